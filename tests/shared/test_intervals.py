import math

import numpy as np
import pytest
from scipy import stats

from ldpsurvey.shared import DEFAULT_METHOD, METHODS, Mechanism, estimate, simultaneous_confidence
from ldpsurvey.shared.stats.estimate import clip_unit, unbiased_estimate
from ldpsurvey.shared.stats.intervals import clopper_pearson, wald, wilson, z_value


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


def test_the_default_is_exact():
    assert DEFAULT_METHOD == "clopper-pearson"
    assert {"wilson", "clopper-pearson", "wald"} <= set(METHODS)


# The coverage scan (issue 15): every design with epsilon <= 5 in this grid, every n, and 201
# true proportions, with coverage summed exactly over the binomial distribution of the count.
ALPHAS = (0.1, 0.3, 0.5, 0.7, 0.85, 0.95)
BETAS = (0.02, 0.1, 0.3, 0.5, 0.7)
SIZES = (20, 50, 100, 1000)
TRUTH = np.linspace(0.0, 1.0, 201)
DESIGNS = [(a, b) for a in ALPHAS for b in BETAS if Mechanism(a, b).epsilon <= 5.0]


def coverage_scan(method: str, n: int) -> np.ndarray:
    """Coverage of the mapped 95 % interval, one row per design, one column per true proportion.

    The reported-rate interval depends only on (count, n), so each is computed once; the
    mapping and clipping are estimate()'s own functions applied to every count at once."""
    lows, highs = np.array([METHODS[method](c, n, 0.95) for c in range(n + 1)]).T
    counts = np.arange(n + 1)
    rows = []
    for alpha, b in DESIGNS:
        low = np.vectorize(clip_unit)(unbiased_estimate(lows, alpha, b))
        high = np.vectorize(clip_unit)(unbiased_estimate(highs, alpha, b))
        covers = (low[None, :] <= TRUTH[:, None]) & (TRUTH[:, None] <= high[None, :])
        lam = alpha * TRUTH + (1 - alpha) * b
        pmf = stats.binom.pmf(counts[None, :], n, lam[:, None])
        rows.append((pmf * covers).sum(axis=1))
    return np.array(rows)


@pytest.fixture(scope="module")
def scans() -> dict:
    return {(method, n): coverage_scan(method, n) for method in (DEFAULT_METHOD, "wilson", "wald")
            for n in SIZES}


def test_the_scan_covers_the_grid():
    # eps > 5 drops (alpha, beta) = (0.85, 0.02), (0.95, 0.02) and (0.95, 0.1)
    assert len(DESIGNS) == 27
    assert Mechanism(0.7, 0.02).epsilon <= 5 < Mechanism(0.85, 0.02).epsilon


@pytest.mark.parametrize("n", SIZES)
def test_default_interval_covers_everywhere(scans, n):
    """Coverage >= 0.94 for every design and true proportion, mean coverage per n <= 0.98."""
    cov = scans[DEFAULT_METHOD, n]
    worst = np.unravel_index(cov.argmin(), cov.shape)
    assert cov.min() >= 0.94, (f"covers {cov.min():.4f} at n = {n}, (alpha, beta) = "
                               f"{DESIGNS[worst[0]]}, p = {TRUTH[worst[1]]}")
    assert cov.mean() <= 0.98, cov.mean()


def test_the_scan_can_fail_wilson_and_wald_undercover(scans):
    assert scans["wilson", 20].min() < 0.90  # 0.887 at alpha 0.7, beta 0.02 (issue 15)
    assert scans["wilson", 100].min() < 0.93
    assert min(scans["wald", n].min() for n in SIZES) < 0.5


def test_simultaneous_confidence():
    assert simultaneous_confidence(0.95, 2) == 0.95
    assert simultaneous_confidence(0.95, 4) == pytest.approx(0.9875, rel=1e-15)
    with pytest.raises(ValueError, match="confidence"):
        simultaneous_confidence(1.0, 3)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_is_mirrored(method):
    """simultaneous_confidence leaves k = 2 alone because count -> n - count mirrors the interval."""
    for count, n in [(0, 20), (3, 20), (7, 100), (400, 1000)]:
        low, high = METHODS[method](count, n, 0.95)
        mirror = METHODS[method](n - count, n, 0.95)
        assert mirror == pytest.approx((1 - high, 1 - low), rel=1e-12, abs=1e-14)


@pytest.mark.parametrize("method", ["wilson", "wald", "clopper-pearson"])
def test_a_confidence_next_to_1_gives_an_interval(method):
    """1 - (1 - c)/2 rounds to 1 for c = 0.9999999999999999: the quantile must not."""
    assert z_value(0.9999999999999999) == pytest.approx(8.29, abs=0.01)
    assert z_value(0.95) == pytest.approx(1.959963984540054, rel=1e-15)
    result = estimate(Mechanism(0.5, 0.5), [5, 5], confidence=0.9999999999999999,
                      method=method)[1]
    assert 0.0 <= result.ci_low <= result.p_hat_clipped <= result.ci_high <= 1.0


@pytest.mark.parametrize("method", ["wilson", "clopper-pearson"])
def test_no_bound_leaves_0_1_at_the_edges(method):
    """At successes = n the Wilson upper bound computes above 1 by rounding for about a
    quarter of the n below 400 (Wald is not clipped, by definition)."""
    interval = METHODS[method]
    for n in range(1, 400):
        for successes in (0, n):
            low, high = interval(successes, n, 0.95)
            assert 0.0 <= low <= high <= 1.0


@pytest.mark.parametrize("confidence", [0.0, 1.0])
def test_confidence_0_and_1_are_refused_everywhere(confidence):
    calls = [lambda: z_value(confidence), lambda: simultaneous_confidence(confidence, 3),
             *(lambda f=f: f(5, 10, confidence) for f in METHODS.values())]
    for call in calls:
        with pytest.raises(ValueError, match=r"^confidence must be in \(0, 1\), got "):
            call()


def test_regularized_beta_at_the_ends():
    from ldpsurvey.shared.stats.distributions import regularized_beta

    for a, b in [(1, 1), (2.5, 0.5), (30, 4)]:
        assert regularized_beta(0.0, a, b) == 0.0 and regularized_beta(1.0, a, b) == 1.0
        assert regularized_beta(-0.1, a, b) == 0.0 and regularized_beta(1.1, a, b) == 1.0
