"""Confidence intervals for a binomial proportion (here: the reported rate of one option).

Clopper-Pearson (exact: coverage at least the stated confidence for every true proportion and
every n; the default, see estimate.DEFAULT_METHOD), Wilson score (shorter, coverage near the
stated level on average but below it for some proportions and small n) and Wald (the textbook
normal interval, kept for comparison: it undercovers near 0 and 1). Brown, Cai and DasGupta
(2001), "Interval estimation for a binomial proportion", Statistical Science 16, compare them.
"""

import math
from collections.abc import Callable
from functools import lru_cache
from statistics import NormalDist

from ldpsurvey.shared.stats.distributions import beta_quantile

Interval = tuple[float, float]


def check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


def z_value(confidence: float) -> float:
    """Two-sided standard-normal quantile z = Phi^-1(1 - (1 - confidence)/2), computed as
    -Phi^-1((1 - confidence)/2): the same by symmetry, and it stays finite for a confidence
    so close to 1 that 1 - (1 - confidence)/2 rounds to 1 (0.9999999999999999, say)."""
    check_confidence(confidence)
    return -NormalDist().inv_cdf((1.0 - confidence) / 2.0)


def simultaneous_confidence(confidence: float, k: int) -> float:
    """The per-option level that makes the k options' intervals cover together with probability
    >= confidence: Bonferroni, 1 - (1 - confidence)/k. For k = 2 the level itself: the intervals
    of every method here are mirror images under count -> n - count, and a question's two
    options have complementary counts and proportions, so both cover exactly when one does.
    """
    check_confidence(confidence)
    return confidence if k == 2 else 1.0 - (1.0 - confidence) / k


def wilson(successes: int, n: int, confidence: float) -> Interval:
    """Wilson score interval (Wilson 1927):
    (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), with p = successes/n.
    """
    z = z_value(confidence)
    p = successes / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    return max(0.0, (centre - half) / scale), min(1.0, (centre + half) / scale)


def wald(successes: int, n: int, confidence: float) -> Interval:
    """Wald interval p -+ z sqrt(p(1-p)/n), with p = successes/n (not clipped)."""
    z = z_value(confidence)
    p = successes / n
    half = z * math.sqrt(p * (1 - p) / n)
    return p - half, p + half


@lru_cache(maxsize=4096)  # pure in its arguments; a survey's estimates repeat them
def clopper_pearson(successes: int, n: int, confidence: float) -> Interval:
    """Clopper-Pearson interval (Clopper and Pearson 1934) from beta quantiles:
    [B(a/2; x, n-x+1), B(1-a/2; x+1, n-x)] with a = 1 - confidence, x = successes
    (0 for x = 0, 1 for x = n).
    """
    check_confidence(confidence)
    a = 1.0 - confidence
    low = 0.0 if successes == 0 else beta_quantile(a / 2, successes, n - successes + 1)
    high = 1.0 if successes == n else beta_quantile(1 - a / 2, successes + 1, n - successes)
    return low, high


METHODS: dict[str, Callable[[int, int, float], Interval]] = {
    "wilson": wilson,
    "clopper-pearson": clopper_pearson,
    "wald": wald,
}
