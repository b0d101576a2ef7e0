"""The respondent's limits: what one question, one submission, this device over its lifetime
and (optionally) one aggregator signing key may get.

Epsilon bounds how much likelier any guess about the respondent can become: an answer at
epsilon e makes it at most e^e times likelier. ln 3 per question means at most 3 times.
"""

from dataclasses import dataclass

from ldpsurvey.shared.mechanisms.budget import (
    DEFAULT_MAX_EPSILON,
    DEFAULT_MAX_LIFETIME_EPSILON,
    DEFAULT_MAX_TOTAL_EPSILON,
)

__all__ = ["DEFAULTS", "DEFAULT_MAX_EPSILON", "DEFAULT_MAX_LIFETIME_EPSILON",
           "DEFAULT_MAX_TOTAL_EPSILON", "Ceilings"]


@dataclass(frozen=True)
class Ceilings:
    """`lifetime` bounds everything this device sends, to every aggregator and signing key
    together; `aggregator`, when set, bounds what one signing key receives (None: only the
    device's limit applies)."""

    per_question: float = DEFAULT_MAX_EPSILON
    total: float = DEFAULT_MAX_TOTAL_EPSILON
    lifetime: float = DEFAULT_MAX_LIFETIME_EPSILON
    aggregator: float | None = None


DEFAULTS = Ceilings()
