"""Estimating true proportions from counts of randomized reports, option by option."""

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from ldpsurvey.shared.stats.design import Mechanism
from ldpsurvey.shared.stats.intervals import METHODS, check_confidence, simultaneous_confidence
from ldpsurvey.shared.stats.likelihood import feasible_rates, fit_p_value, maximum_likelihood

DEFAULT_CONFIDENCE = 0.95
# Exact: coverage >= the stated confidence for every true proportion and n (test_intervals scans it).
DEFAULT_METHOD = "clopper-pearson"
FIT_LEVEL = 0.001  # design_consistent is fit_p_value >= FIT_LEVEL
SMALL_SAMPLE = 30  # fewer reports than this earn a warning
SMALL_EXPECTED_COUNT = 5  # so does an option expected to be forced fewer times than this


@dataclass(frozen=True)
class Estimate:
    """The estimate for one option of a question.

    p_hat is the unbiased estimate (it may leave [0, 1]); standard_error is p_hat's, evaluated
    at the constrained fit's reported rates (so never 0). p_hat_clipped (p_hat projected onto
    the simplex) and p_mle (the constrained maximum-likelihood estimate, the point shown to
    people) have no standard error of their own. ci_low/ci_high: the interval for the reported
    rate mapped to the true proportion and clipped to [0, 1] (possibly degenerate, never None),
    widened to contain p_mle (see estimate). fit_p_value
    tests the stated design on the whole question (the same for each of its options);
    design_consistent is fit_p_value >= FIT_LEVEL. warning: None, or why to read with care.
    """

    n: int
    reported_count: int
    reported_rate: float
    p_hat: float
    p_hat_clipped: float
    p_mle: float
    standard_error: float
    ci_low: float
    ci_high: float
    ci_method: str
    confidence: float
    fit_p_value: float
    design_consistent: bool
    epsilon: float
    warning: str | None

    def as_dict(self) -> dict:
        """The fields under the key names used everywhere (CLI --json, API, mock, export)."""
        return asdict(self)


def unbiased_estimate(reported_rate: float, alpha: float, beta_j: float) -> float:
    """pi_hat_j = (c_j/n - (1 - alpha)*beta_j) / alpha; unbiased, and may leave [0, 1]."""
    return (reported_rate - (1.0 - alpha) * beta_j) / alpha


def standard_error(reported_rate: float, n: int, alpha: float) -> float:
    """Standard error of pi_hat_j at the reported rate lam_j: sqrt(lam_j (1 - lam_j) / n) / alpha.

    estimate() evaluates it at the constrained fit's rate lam~_j (feasible_rates): never 0, and
    the raw plug-in lam_j = c_j / n wherever the unbiased estimate lies in the simplex.
    """
    return math.sqrt(reported_rate * (1.0 - reported_rate) / n) / alpha


def covariance(mechanism: Mechanism, counts: Sequence[int]) -> tuple[tuple[float, ...], ...]:
    """Covariance matrix of the unbiased estimates pi_hat = (c/n - (1 - alpha) beta) / alpha:
    (diag(lam) - lam lam^T) / (n alpha^2), the multinomial covariance of c/n scaled by the
    linear map, at the constrained fit's rates lam~ (its diagonal is standard_error squared).
    """
    n = check_counts(mechanism, counts)
    lam = feasible_rates(mechanism, counts)
    scale = n * mechanism.alpha ** 2
    return tuple(tuple(((i == j) * lam[i] - lam[i] * lam[j]) / scale for j in range(len(lam)))
                 for i in range(len(lam)))


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


def warning(n: int, alpha: float, beta_j: float) -> str | None:
    """None, or why an option's figures need care: n < SMALL_SAMPLE, or fewer than
    SMALL_EXPECTED_COUNT forced reports of the option expected, n (1 - alpha) beta_j (then an
    option nobody holds is reported only a handful of times, and normal approximations such as
    the standard error are rough)."""
    forced = n * (1.0 - alpha) * beta_j
    reasons = []
    if n < SMALL_SAMPLE:
        reasons.append(f"small sample: n = {n} < {SMALL_SAMPLE}")
    if forced < SMALL_EXPECTED_COUNT:
        reasons.append(f"few forced reports expected: n(1 - alpha)beta = {forced:.3g} "
                       f"< {SMALL_EXPECTED_COUNT}")
    return "; ".join(reasons) or None


def check_counts(mechanism: Mechanism, counts: Sequence[int]) -> int:
    """n = sum c_j after checking one count per option (see total_reports)."""
    if len(counts) != mechanism.k:
        raise ValueError(f"expected {mechanism.k} counts, got {len(counts)}")
    return total_reports(counts, mechanism)


def total_reports(counts: Iterable[int], *mechanisms: Mechanism) -> int:
    """n = the sum of the counts, after checking that each is a non-negative integer, n > 0 and
    every mechanism's alpha > 0."""
    counts = list(counts)
    for count in counts:
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"counts must be non-negative integers, got {count!r}")
    n = sum(counts)
    if n <= 0:
        raise ValueError("need at least one report (n > 0)")
    if any(m.alpha <= 0.0 for m in mechanisms):
        raise ValueError("alpha = 0 reports pure noise: nothing can be estimated")
    return n


def estimate(mechanism: Mechanism, counts: Sequence[int], *,
             confidence: float = DEFAULT_CONFIDENCE,
             method: str = DEFAULT_METHOD,
             simultaneous: bool = False) -> tuple[Estimate, ...]:
    """Estimates for every option from the counts c_j of reports of option j (n = sum c_j).

    The confidence interval is the chosen interval for the reported rate, mapped through
    (x - (1 - alpha)*beta_j) / alpha and clipped to [0, 1]; it contains p_hat clipped to [0, 1]
    but not always p_mle: when options are held at their floor the fit scales the others'
    rates down (feasible_rates), possibly below the lower end of a narrow interval, which is
    then widened to reach p_mle (`cover`). With simultaneous=True every
    interval is at the level simultaneous_confidence(confidence, k), so that all k cover
    together with probability >= confidence (the Estimate still states `confidence`).
    """
    n = check_counts(mechanism, counts)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    check_confidence(confidence)
    level = simultaneous_confidence(confidence, mechanism.k) if simultaneous else confidence
    interval = METHODS[method]
    alpha = mechanism.alpha
    rates = [c / n for c in counts]
    p_hats = [unbiased_estimate(rate, alpha, b) for rate, b in zip(rates, mechanism.beta, strict=True)]
    clipped = project_to_simplex(p_hats)
    fitted = feasible_rates(mechanism, counts)
    mle = maximum_likelihood(mechanism, counts)
    fit = fit_p_value(mechanism, counts)
    eps = mechanism.epsilon
    estimates = []
    for j, (count, b) in enumerate(zip(counts, mechanism.beta, strict=True)):
        low_rate, high_rate = interval(count, n, level)
        low, high = cover(clip_unit(unbiased_estimate(low_rate, alpha, b)),
                          clip_unit(unbiased_estimate(high_rate, alpha, b)), mle[j])
        estimates.append(Estimate(
            n=n,
            reported_count=count,
            reported_rate=rates[j],
            p_hat=p_hats[j],
            p_hat_clipped=clipped[j],
            p_mle=mle[j],
            standard_error=standard_error(fitted[j], n, alpha),
            ci_low=low,
            ci_high=high,
            ci_method=method,
            confidence=confidence,
            fit_p_value=fit,
            design_consistent=fit >= FIT_LEVEL,
            epsilon=eps,
            warning=warning(n, alpha, b),
        ))
    return tuple(estimates)


def clip_unit(x: float) -> float:
    """x clipped to [0, 1], where every proportion lies."""
    return min(1.0, max(0.0, x))


def cover(low: float, high: float, point: float | None) -> tuple[float, float]:
    """The interval [low, high] widened just enough to contain point (unchanged if it does or
    point is None). Any set containing a confidence set covers at least as often (Casella and
    Berger 2002, Statistical Inference, 2nd ed., 9.2), so the stated level still holds."""
    if point is None:
        return low, high
    return min(low, point), max(high, point)
