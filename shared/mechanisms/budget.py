"""The per-respondent privacy budget and the one tolerance used to compare against a ceiling."""

import math
from collections.abc import Iterable

# Ceiling comparisons allow this much relative slack, so that a survey built "at eps" by
# alpha_for_epsilon, or a value that went through JSON and back, never reads as above eps.
EPSILON_TOLERANCE = 1e-9

# A respondent's default limits, the same in the Python client (client/ceilings.py) and the
# web form (web/randomizer.js, which the browser tests compare): epsilon e makes a guess at
# most e^e times likelier, so ln 3 per question means at most 3 times.
DEFAULT_MAX_EPSILON = math.log(3)                # per question: at most 3x likelier either way
DEFAULT_MAX_TOTAL_EPSILON = 4 * math.log(3)      # per submission: four such questions
DEFAULT_MAX_LIFETIME_EPSILON = 8 * math.log(3)   # per device: every aggregator, key and survey


def total_epsilon(epsilons: Iterable[float]) -> float:
    """Per-respondent epsilon of a survey: the sum over its questions (sequential composition)."""
    return math.fsum(epsilons)


def exceeds(epsilon: float, ceiling: float) -> bool:
    """True iff epsilon > ceiling * (1 + EPSILON_TOLERANCE)."""
    return epsilon > ceiling * (1.0 + EPSILON_TOLERANCE)
