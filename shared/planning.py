"""Sample-size planning: how many respondents a margin of error needs, locally and centrally."""

import math

from .intervals import z_value
from .mechanism import Mechanism


def _check_plan(proportion: float, margin: float) -> None:
    if not 0.0 <= proportion <= 1.0:
        raise ValueError(f"proportion must be in [0, 1], got {proportion!r}")
    if not 0.0 < margin < 1.0:
        raise ValueError(f"margin must be in (0, 1), got {margin!r}")


def n_required(mechanism: Mechanism, proportion: float, margin: float,
               confidence: float = 0.95, option: int = 1) -> int:
    """Respondents needed for a CI half-width of `margin` on option `option` (yes by default):
    ceil(z^2 lam(1 - lam) / (alpha^2 m^2)), lam = alpha*p + (1 - alpha)*beta (normal approximation).
    """
    _check_plan(proportion, margin)
    if mechanism.alpha <= 0.0:
        raise ValueError("alpha = 0 reports pure noise: no sample size suffices")
    z = z_value(confidence)
    lam = mechanism.alpha * proportion + (1.0 - mechanism.alpha) * mechanism.beta[option]
    return max(1, math.ceil(z * z * lam * (1.0 - lam) / (mechanism.alpha ** 2 * margin ** 2)))


def n_required_central_laplace(eps: float, proportion: float, margin: float,
                               confidence: float = 0.95) -> int:
    """The same margin under central DP, for comparison: a trusted curator adds Laplace(1/eps)
    noise (variance 2/eps^2) to the count, so the smallest n with
    z * sqrt(p(1 - p)/n + 2/(eps^2 n^2)) <= margin.
    """
    _check_plan(proportion, margin)
    if not eps > 0.0:
        raise ValueError(f"epsilon must be > 0, got {eps!r}")
    z = z_value(confidence)

    def enough(n: int) -> bool:
        return z * math.sqrt(proportion * (1 - proportion) / n + 2 / (eps * eps * n * n)) <= margin

    # With x = 1/n the condition is (2/eps^2) x^2 + p(1-p) x - (m/z)^2 <= 0: take the positive root.
    a, b, c = 2 / (eps * eps), proportion * (1 - proportion), -(margin / z) ** 2
    root = (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)
    n = max(1, math.ceil(1 / root))
    while not enough(n):
        n += 1
    while n > 1 and enough(n - 1):
        n -= 1
    return n
