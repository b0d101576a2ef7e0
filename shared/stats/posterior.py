"""What an eps-LDP report can teach an observer: bounds on the posterior from a prior."""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ldpsurvey.shared.stats.design import report_probability


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


def best_guess_accuracy(alpha: float, beta: Sequence[float]) -> float:
    """How often the best guess of a true answer from its one report is right, when every one
    of the k options was equally likely beforehand (the Bayes-optimal guess: the answer most
    likely to have given the report):

    (1/k) * sum over reports r of max over answers i of P(r | i)  =  alpha + (1 - alpha) / k

    for forced response, P(r | i) = alpha [r = i] + (1 - alpha) beta_r. It is at most
    e^eps / (e^eps + k - 1), the most any eps-LDP report allows (equal for a uniform beta).
    This is what someone gets who sees one respondent's report alone (see the threat model
    in docs/privacy.md: an owner who fills a release around them)."""
    k = len(beta)
    return sum(max(report_probability(alpha, beta, i, r) for i in range(k))
               for r in range(k)) / k
