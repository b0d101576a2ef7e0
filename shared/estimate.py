"""Estimating true proportions from counts of randomized reports."""

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from .intervals import METHODS
from .mechanism import Mechanism

DEFAULT_CONFIDENCE = 0.95
DEFAULT_METHOD = "wilson"


@dataclass(frozen=True)
class Estimate:
    """The estimate for one option. ci_low/ci_high are None when design_consistent is False."""

    n: int
    reported_count: int
    reported_rate: float
    p_hat: float
    p_hat_clipped: float
    standard_error: float
    ci_low: float | None
    ci_high: float | None
    ci_method: str
    confidence: float
    design_consistent: bool
    epsilon: float

    def as_dict(self) -> dict:
        """The fields under the key names used everywhere (CLI --json, API, mock, export)."""
        return asdict(self)


def unbiased_estimate(reported_rate: float, alpha: float, beta_j: float) -> float:
    """pi_hat_j = (c_j/n - (1 - alpha)*beta_j) / alpha; unbiased, and may leave [0, 1]."""
    return (reported_rate - (1.0 - alpha) * beta_j) / alpha


def standard_error(reported_rate: float, n: int, alpha: float) -> float:
    """Plug-in standard error of pi_hat_j as an estimate of the population proportion:
    sqrt(lam_hat (1 - lam_hat) / n) / alpha, with lam_hat = c_j / n.
    """
    return math.sqrt(reported_rate * (1.0 - reported_rate) / n) / alpha


def project_to_simplex(values: Sequence[float]) -> tuple[float, ...]:
    """Euclidean projection onto the probability simplex {x : x_j >= 0, sum x_j = 1}:
    x_j = max(v_j - theta, 0) with theta chosen so the result sums to 1 (sort-based rule).
    For two options this is clipping to [0, 1].
    """
    ordered = sorted(values, reverse=True)
    cumulative, theta = 0.0, 0.0
    for count, value in enumerate(ordered, start=1):
        cumulative += value
        candidate = (cumulative - 1.0) / count
        if value - candidate > 0:
            theta = candidate
    return tuple(max(v - theta, 0.0) for v in values)


def estimate(mechanism: Mechanism, counts: Sequence[int], *,
             confidence: float = DEFAULT_CONFIDENCE,
             method: str = DEFAULT_METHOD) -> tuple[Estimate, ...]:
    """Estimates for every option from the counts c_j of reports of option j (n = sum c_j).

    The confidence interval is the chosen interval for the reported rate, mapped through
    (x - (1 - alpha)*beta_j) / alpha and clipped to [0, 1]. If the interval for the reported rate
    lies wholly outside what the design allows, [(1 - alpha)*beta_j, alpha + (1 - alpha)*beta_j],
    the data do not fit the stated design: design_consistent is False and the bounds are None.
    """
    if len(counts) != mechanism.k:
        raise ValueError(f"expected {mechanism.k} counts, got {len(counts)}")
    for count in counts:
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"counts must be non-negative integers, got {count!r}")
    n = sum(counts)
    if n <= 0:
        raise ValueError("need at least one report (n > 0)")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    if mechanism.alpha <= 0.0:
        raise ValueError("alpha = 0 reports pure noise: nothing can be estimated")
    interval = METHODS[method]
    alpha = mechanism.alpha
    rates = [c / n for c in counts]
    p_hats = [unbiased_estimate(rate, alpha, b) for rate, b in zip(rates, mechanism.beta, strict=True)]
    clipped = project_to_simplex(p_hats)
    eps = mechanism.epsilon
    estimates = []
    for j, (count, rate, b) in enumerate(zip(counts, rates, mechanism.beta, strict=True)):
        floor = (1.0 - alpha) * b
        low, high = interval(count, n, confidence)
        consistent = not (high < floor or low > alpha + floor)
        estimates.append(Estimate(
            n=n,
            reported_count=count,
            reported_rate=rate,
            p_hat=p_hats[j],
            p_hat_clipped=clipped[j],
            standard_error=standard_error(rate, n, alpha),
            ci_low=_clip(unbiased_estimate(low, alpha, b)) if consistent else None,
            ci_high=_clip(unbiased_estimate(high, alpha, b)) if consistent else None,
            ci_method=method,
            confidence=confidence,
            design_consistent=consistent,
            epsilon=eps,
        ))
    return tuple(estimates)


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))
