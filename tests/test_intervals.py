import math

import pytest
from scipy import stats

from ldpsurvey.shared import Mechanism, estimate
from ldpsurvey.shared.intervals import clopper_pearson, regularized_beta, wald, wilson


@pytest.mark.parametrize("x, a, b", [(0.3, 2, 5), (0.9, 0.5, 0.5), (0.01, 40, 960),
                                     (0.5, 500, 501), (0.999, 3, 1)])
def test_regularized_beta_against_scipy(x, a, b):
    assert regularized_beta(x, a, b) == pytest.approx(stats.beta.cdf(x, a, b), rel=1e-10)


@pytest.mark.parametrize("x, n", [(0, 10), (1, 10), (5, 10), (10, 10), (3, 1000), (400, 1000),
                                  (7300, 20000)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_clopper_pearson_against_scipy(x, n, confidence):
    a = 1 - confidence
    low = 0.0 if x == 0 else stats.beta.ppf(a / 2, x, n - x + 1)
    high = 1.0 if x == n else stats.beta.ppf(1 - a / 2, x + 1, n - x)
    got = clopper_pearson(x, n, confidence)
    assert got[0] == pytest.approx(low, rel=1e-9, abs=1e-14)
    assert got[1] == pytest.approx(high, rel=1e-9, abs=1e-14)


def test_wilson_and_wald_by_hand():
    # x = 0: Wilson is [0, z^2 / (n + z^2)]; Wald collapses to [0, 0].
    z = stats.norm.ppf(0.975)
    assert wilson(0, 100, 0.95) == pytest.approx((0.0, z * z / (100 + z * z)))
    assert wald(0, 100, 0.95) == (0.0, 0.0)
    half = z * math.sqrt(0.4 * 0.6 / 1000)
    assert wald(400, 1000, 0.95) == pytest.approx((0.4 - half, 0.4 + half))


def _binomial_pmf(n: int, p: float) -> list[float]:
    if p in (0.0, 1.0):
        return [float(c == round(n * p)) for c in range(n + 1)]
    return [math.exp(math.lgamma(n + 1) - math.lgamma(c + 1) - math.lgamma(n - c + 1)
                     + c * math.log(p) + (n - c) * math.log1p(-p)) for c in range(n + 1)]


def exact_coverage(alpha: float, beta: float, p: float, n: int, method: str) -> float:
    """P(CI covers p), summed exactly over every possible count of yes reports."""
    m = Mechanism(alpha, beta)
    lam = m.report_distribution((1 - p, p))[1]
    covered = 0.0
    for yes, prob in enumerate(_binomial_pmf(n, lam)):
        e = estimate(m, [n - yes, yes], method=method)[1]
        if e.design_consistent and e.ci_low <= p <= e.ci_high:
            covered += prob
    return covered


CELLS = [(alpha, 0.5, p, n) for p in (0.01, 0.05, 0.3, 0.5) for n in (100, 1000)
         for alpha in (0.25, 0.5, 0.75)]
CELLS += [(0.9, 0.05, p, 100) for p in (0.0, 0.01)]  # reported rate near 0


@pytest.fixture(scope="module")
def coverage() -> dict:
    return {method: [exact_coverage(*cell, method) for cell in CELLS]
            for method in ("wilson", "wald")}


def test_wilson_has_honest_coverage(coverage):
    for cell, cov in zip(CELLS, coverage["wilson"], strict=True):
        assert cov >= 0.90, f"Wilson covers only {cov:.4f} at alpha, beta, p, n = {cell}"
    mean = sum(coverage["wilson"]) / len(CELLS)
    assert 0.94 <= mean <= 0.96, mean


def test_the_coverage_test_can_fail_wald_undercovers(coverage):
    assert min(coverage["wald"]) < 0.90


@pytest.mark.parametrize("method", ["wilson", "wald", "clopper-pearson"])
def test_a_confidence_next_to_1_gives_an_interval(method):
    """1 - (1 - c)/2 rounds to 1 for c = 0.9999999999999999: the quantile must not."""
    from ldpsurvey.shared.intervals import z_value

    assert z_value(0.9999999999999999) == pytest.approx(8.29, abs=0.01)
    assert z_value(0.95) == pytest.approx(1.959963984540054, rel=1e-15)
    result = estimate(Mechanism(0.5, 0.5), [5, 5], confidence=0.9999999999999999,
                      method=method)[1]
    assert 0.0 <= result.ci_low <= result.p_hat_clipped <= result.ci_high <= 1.0
