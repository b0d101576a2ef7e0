"""Sample-size planning: how many respondents a margin of error needs, locally and centrally."""

import math
from collections.abc import Sequence

from ldpsurvey.shared.stats.design import BETA_SUM_TOLERANCE, Mechanism
from ldpsurvey.shared.stats.estimate import standard_error
from ldpsurvey.shared.stats.intervals import z_value
from ldpsurvey.shared.stats.likelihood import floors


def _check_plan(proportion: float | None, margin: float) -> None:
    if proportion is not None and not 0.0 <= proportion <= 1.0:
        raise ValueError(f"proportion must be in [0, 1], got {proportion!r}")
    if not 0.0 < margin < 1.0:
        raise ValueError(f"margin must be in (0, 1), got {margin!r}")


def n_required(mechanism: Mechanism, proportion: float | None, margin: float,
               confidence: float = 0.95, option: int = 1) -> int:
    """Respondents needed for an expected CI half-width of `margin` on option `option` (yes by
    default): ceil(z^2 lam(1 - lam) / (alpha^2 m^2)), lam = alpha*p + (1 - alpha)*beta_option.

    z sqrt(lam(1 - lam)/n) / alpha is the normal-approximation half-width at the expected
    reported rate: about what the interval's half-width will be on average (the margin is an
    expected half-width, not a bound that holds in every survey).
    proportion None plans for the worst case over the option's true share: lam(1 - lam) at the
    lam nearest 1/2 in [(1 - alpha) beta_option, alpha + (1 - alpha) beta_option].
    """
    if not 0 <= option < mechanism.k:
        raise ValueError(f"option must be in 0..{mechanism.k - 1}, got {option!r}")
    _check_plan(proportion, margin)
    _check_alpha(mechanism)
    if proportion is None:
        lam = _worst_rate(mechanism, option)
    else:
        lam = mechanism.alpha * proportion + (1.0 - mechanism.alpha) * mechanism.beta[option]
    z = z_value(confidence)
    return max(1, math.ceil(z * z * lam * (1.0 - lam) / (mechanism.alpha ** 2 * margin ** 2)))


def n_required_question(mechanism: Mechanism, proportions: Sequence[float] | None, margin: float,
                        confidence: float = 0.95) -> int:
    """Respondents needed for an expected half-width of `margin` on every option of a question:
    the largest n_required over its options, at the given true proportions (one per option,
    summing to 1) or, with None, each option's worst case (the worst case over all true
    distributions, since it is a maximum over options of a maximum over proportions).
    """
    if proportions is not None:
        if len(proportions) != mechanism.k:
            raise ValueError(f"expected {mechanism.k} proportions, got {len(proportions)}")
        if abs(math.fsum(proportions) - 1.0) > BETA_SUM_TOLERANCE:
            raise ValueError(f"proportions must sum to 1, got {math.fsum(proportions)!r}")
    return max(n_required(mechanism, None if proportions is None else proportions[j], margin,
                          confidence, option=j) for j in range(mechanism.k))


def expected_margin(mechanism: Mechanism, n: int, confidence: float = 0.95) -> float:
    """The expected CI half-width with n respondents on the question's least certain option,
    at its worst-case true share: max over options j of z sqrt(lam_j (1 - lam_j) / n) / alpha
    with lam_j the reported rate nearest 1/2 (the inverse of n_required_question's worst
    case)."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n!r}")
    _check_alpha(mechanism)
    return z_value(confidence) * max(standard_error(_worst_rate(mechanism, j), n, mechanism.alpha)
                                     for j in range(mechanism.k))


def _worst_rate(mechanism: Mechanism, option: int) -> float:
    """The reported rate of `option` nearest 1/2 over its true shares, where lam(1 - lam) and
    so the variance is largest: within [(1 - alpha) beta_j, alpha + (1 - alpha) beta_j]."""
    floor = floors(mechanism)[option]
    return min(max(0.5, floor), floor + mechanism.alpha)


def _check_alpha(mechanism: Mechanism) -> None:
    if mechanism.alpha <= 0.0:
        raise ValueError("alpha = 0 reports pure noise: no sample size suffices")


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
