"""Confidence intervals for a binomial proportion (here: the reported rate of one option).

Wilson score (the default: honest coverage near 0 and 1 and for small n), Clopper-Pearson
(exact, conservative) and Wald (the textbook normal interval, kept for comparison: it
undercovers near 0 and 1).
"""

import math
from collections.abc import Callable
from statistics import NormalDist

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


def wilson(successes: int, n: int, confidence: float) -> Interval:
    """Wilson score interval:
    (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), with p = successes/n.
    """
    z = z_value(confidence)
    p = successes / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    return max(0.0, (centre - half) / scale), min(1.0, (centre + half) / scale)


def wald(successes: int, n: int, confidence: float) -> Interval:
    """Wald interval p -+ z sqrt(p(1-p)/n), with p = successes/n."""
    z = z_value(confidence)
    p = successes / n
    half = z * math.sqrt(p * (1 - p) / n)
    return p - half, p + half


def clopper_pearson(successes: int, n: int, confidence: float) -> Interval:
    """Clopper-Pearson interval from beta quantiles:
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


def regularized_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction
    (modified Lentz), using the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) where it converges faster.
    """
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - regularized_beta(1.0 - x, b, a)
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    return math.exp(log_front) * _beta_continued_fraction(x, a, b) / a


def _beta_continued_fraction(x: float, a: float, b: float) -> float:
    """1 / (1 + d1 / (1 + d2 / (1 + ...))) with the standard coefficients d_m of I_x(a, b)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 10_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-15:
            return result
    raise ArithmeticError(f"incomplete beta did not converge for x={x}, a={a}, b={b}")


def beta_quantile(q: float, a: float, b: float) -> float:
    """The x in [0, 1] with I_x(a, b) = q, by bisection (I is increasing in x)."""
    low, high = 0.0, 1.0
    for _ in range(200):
        mid = (low + high) / 2
        if mid in (low, high):
            break
        if regularized_beta(mid, a, b) < q:
            low = mid
        else:
            high = mid
    return (low + high) / 2
