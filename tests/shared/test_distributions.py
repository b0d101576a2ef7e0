import pytest
from scipy import stats

from ldpsurvey.shared.stats.distributions import (
    beta_quantile,
    binomial_cdf,
    binomial_sf,
    chi_square_sf,
    regularized_beta,
)


@pytest.mark.parametrize("x, a, b", [(0.3, 2, 5), (0.9, 0.5, 0.5), (0.01, 40, 960),
                                     (0.5, 500, 501), (0.999, 3, 1)])
def test_regularized_beta_against_scipy(x, a, b):
    assert regularized_beta(x, a, b) == pytest.approx(stats.beta.cdf(x, a, b), rel=1e-10)


@pytest.mark.parametrize("q, a, b", [(0.025, 3, 98), (0.975, 400, 601), (0.5, 1, 1)])
def test_beta_quantile_against_scipy(q, a, b):
    assert beta_quantile(q, a, b) == pytest.approx(stats.beta.ppf(q, a, b), rel=1e-10)


@pytest.mark.parametrize("count, n, p", [(0, 20, 0.3), (3, 20, 0.3), (100, 500, 0.25),
                                         (7300, 20000, 0.375), (19, 20, 0.9), (20, 20, 0.5),
                                         (-1, 5, 0.5), (6, 5, 0.5)])
def test_binomial_tails_against_scipy(count, n, p):
    assert binomial_cdf(count, n, p) == pytest.approx(stats.binom.cdf(count, n, p), rel=1e-10,
                                                      abs=1e-300)
    assert binomial_sf(count, n, p) == pytest.approx(stats.binom.sf(count - 1, n, p), rel=1e-10,
                                                     abs=1e-300)


def test_binomial_tail_by_hand():
    # P(X <= 0) = (1 - p)^n and P(X >= n) = p^n
    assert binomial_cdf(0, 10, 0.2) == pytest.approx(0.8 ** 10, rel=1e-12)
    assert binomial_sf(10, 10, 0.2) == pytest.approx(0.2 ** 10, rel=1e-12)


@pytest.mark.parametrize("df", range(1, 12))
@pytest.mark.parametrize("x", [0.0, 1e-6, 0.5, 3.84, 10.0, 21.07, 60.0, 400.0])
def test_chi_square_tail_against_scipy(x, df):
    assert chi_square_sf(x, df) == pytest.approx(stats.chi2.sf(x, df), rel=1e-10, abs=1e-300)


def test_chi_square_tail_by_hand():
    # df = 2 is the exponential with mean 2: P(chi^2_2 >= x) = e^{-x/2}
    assert chi_square_sf(4.0, 2) == pytest.approx(0.1353352832366127, rel=1e-14)
    with pytest.raises(ValueError, match="degrees of freedom"):
        chi_square_sf(1.0, 0)
