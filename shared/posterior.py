"""What an eps-LDP report can teach an observer: bounds on the posterior from a prior."""

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class PosteriorBounds:
    """The posterior probability of a belief after a report lies in [low, high]."""

    low: float
    high: float


def posterior_bounds(prior: float, eps: float) -> PosteriorBounds:
    """Bounds on the posterior after an eps-LDP report, for a prior q:

    [q / (e^eps + q(1 - e^eps)),  q e^eps / (1 + q(e^eps - 1))].

    Use the question's eps for one answer and the survey's total eps for a whole
    submission: answers to correlated questions can reveal more together than one alone.
    """
    if not 0.0 <= prior <= 1.0:
        raise ValueError(f"prior must be in [0, 1], got {prior!r}")
    if not eps >= 0.0:
        raise ValueError(f"epsilon must be >= 0, got {eps!r}")
    e = math.exp(eps)
    return PosteriorBounds(
        low=prior / (e + prior * (1.0 - e)),
        high=prior * e / (1.0 + prior * (e - 1.0)),
    )
