"""The per-respondent privacy budget and the one tolerance used to compare against a ceiling."""

import math
from collections.abc import Iterable

# Ceiling comparisons allow this much relative slack, so that a survey built "at eps" by
# alpha_for_epsilon, or a value that went through JSON and back, never reads as above eps.
EPSILON_TOLERANCE = 1e-9


def total_epsilon(epsilons: Iterable[float]) -> float:
    """Per-respondent epsilon of a survey: the sum over its questions (sequential composition)."""
    return math.fsum(epsilons)


def exceeds(epsilon: float, ceiling: float) -> bool:
    """True iff epsilon > ceiling * (1 + EPSILON_TOLERANCE)."""
    return epsilon > ceiling * (1.0 + EPSILON_TOLERANCE)
