import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldpsurvey.shared import (
    DEFAULT_METHOD,
    METHODS,
    Estimate,
    Mechanism,
    covariance,
    estimate,
    project_to_simplex,
    simultaneous_confidence,
    standard_error,
    unbiased_estimate,
)
from ldpsurvey.shared.stats.intervals import clopper_pearson, wilson

REL = 1e-9


def _close(a, b):
    return math.isclose(a, b, rel_tol=REL, abs_tol=1e-15)


def test_estimates_match_reference(reference):
    """Version 2: SE at the feasible plug-in, p_mle, fit_p_value, and intervals never null."""
    for case in reference["estimate_from_counts"]:
        m = Mechanism(case["alpha"], case["beta"])
        n, yes = case["n"], case["reported_yes"]
        result = estimate(m, [n - yes, yes], method="wilson")[1]
        assert _close(result.p_hat, case["p_hat_unbiased"])
        assert _close(result.p_hat_clipped, case["p_hat_clipped"])
        assert _close(result.standard_error, case["standard_error"])
        assert _close(standard_error(yes / n, n, case["alpha"]), case["standard_error_plugin"])
        assert _close(result.p_mle, case["p_mle"])
        assert _close(result.fit_p_value, case["fit_p_value"])
        low, high = wilson(yes, n, 0.95)
        assert _close(low, case["wilson_95_reported_rate"][0])
        assert _close(high, case["wilson_95_reported_rate"][1])
        assert result.design_consistent is case["design_consistent"]
        assert _close(result.ci_low, case["ci_95_wilson_mapped_clipped"][0])
        assert _close(result.ci_high, case["ci_95_wilson_mapped_clipped"][1])


def test_hand_worked_estimate():
    # alpha = 1/2, beta = 1/2, 1000 reports of which 400 yes: (0.4 - 0.25) / 0.5 = 0.3,
    # SE = sqrt(0.4 * 0.6 / 1000) / 0.5.
    result = estimate(Mechanism(0.5, 0.5), [600, 400])
    assert _close(result[1].p_hat, 0.3) and _close(result[0].p_hat, 0.7)
    assert _close(result[1].standard_error, math.sqrt(0.24 / 1000) / 0.5)
    assert result[1].epsilon == pytest.approx(math.log(3))
    assert result[1].ci_method == "clopper-pearson"
    assert result[1].warning is None and result[1].fit_p_value == 1.0


def test_standard_error_at_zero_counts_is_the_formula_at_the_feasible_rate():
    """alpha 0.9, beta 0.05, n 50, no yes report (issue 15 printed SE 0): the constrained fit's
    reported rate is the floor (1 - 0.9) * 0.05 = 0.005, so SE = sqrt(0.005 * 0.995 / 50) / 0.9."""
    no, yes = estimate(Mechanism(0.9, 0.05), [50, 0])
    expected = math.sqrt(0.005 * 0.995 / 50) / 0.9
    assert yes.standard_error == pytest.approx(expected, rel=1e-12)
    assert no.standard_error == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(0.0110833, abs=1e-7)  # the true SD the issue quotes, 0.011
    assert (yes.ci_low, yes.p_mle, yes.p_hat_clipped) == (0.0, 0.0, 0.0)
    assert yes.ci_high == pytest.approx((clopper_pearson(0, 50, 0.95)[1] - 0.005) / 0.9, rel=1e-12)
    # a count of 0 lies below the floor 0.005 * 50, but not significantly: P(X <= 0) = 0.995^50
    assert no.fit_p_value == yes.fit_p_value == pytest.approx(0.995 ** 50, rel=1e-12)
    # All reports "yes": the rate is clipped to the ceiling 0.9 + 0.005
    yes = estimate(Mechanism(0.9, 0.05), [0, 50])[1]
    assert yes.standard_error == pytest.approx(math.sqrt(0.905 * 0.095 / 50) / 0.9, rel=1e-12)


def test_hand_worked_constrained_fit_for_three_options():
    """alpha 1/2, beta (0.2, 0.3, 0.5): floors f = (0.1, 0.15, 0.25). Counts (0, 30, 70) give the
    unbiased (-0.2, 0.3, 0.9). The fit holds option 0 at its floor, mu = 100 / (1 - 0.1), so
    lam~ = (0.1, 0.27, 0.63) and p_mle = (0, 0.24, 0.76); G = 2 * 100 ln(10/9) on 2 degrees of
    freedom gives p = e^{-G/2} = 0.9^100."""
    m = Mechanism(0.5, (0.2, 0.3, 0.5))
    result = estimate(m, [0, 30, 70])
    assert [e.p_hat for e in result] == pytest.approx([-0.2, 0.3, 0.9], rel=1e-12)
    assert [e.p_mle for e in result] == pytest.approx([0.0, 0.24, 0.76], rel=1e-12)
    assert [e.standard_error for e in result] == pytest.approx(
        [math.sqrt(lam * (1 - lam) / 100) / 0.5 for lam in (0.1, 0.27, 0.63)], rel=1e-12)
    for e in result:
        assert e.fit_p_value == pytest.approx(0.9 ** 100, rel=1e-9)
        assert e.design_consistent is False  # 2.7e-5 < 0.001
        assert 0.0 <= e.ci_low <= e.ci_high <= 1.0


def test_covariance_by_hand():
    """(diag(lam) - lam lam^T) / (n alpha^2) at lam = (0.34, 0.26, 0.24, 0.16), n = 1000."""
    m = Mechanism(0.6, (0.1, 0.2, 0.3, 0.4))
    counts = [340, 260, 240, 160]
    cov = covariance(m, counts)
    lam = [0.34, 0.26, 0.24, 0.16]
    for i in range(4):
        for j in range(4):
            expected = ((i == j) * lam[i] - lam[i] * lam[j]) / (1000 * 0.36)
            assert cov[i][j] == pytest.approx(expected, rel=1e-12)
    for i, e in enumerate(estimate(m, counts)):
        assert e.standard_error == pytest.approx(math.sqrt(cov[i][i]), rel=1e-12)
    assert sum(map(sum, cov)) == pytest.approx(0.0, abs=1e-15)  # the estimates sum to 1


def test_warnings():
    assert estimate(Mechanism(0.5, 0.5), [300, 300])[1].warning is None
    assert estimate(Mechanism(0.5, 0.5), [10, 10])[1].warning == "small sample: n = 20 < 30"
    # forced reports expected: 600 * 0.1 * 0.95 = 57 of "no", 600 * 0.1 * 0.05 = 3 of "yes"
    no, yes = estimate(Mechanism(0.9, (0.95, 0.05)), [400, 200])
    assert no.warning is None
    assert yes.warning == "few forced reports expected: n(1 - alpha)beta = 3 < 5"
    both = estimate(Mechanism(0.9, (0.95, 0.05)), [20, 0])[1].warning
    assert both == ("small sample: n = 20 < 30; "
                    "few forced reports expected: n(1 - alpha)beta = 0.1 < 5")


def test_simultaneous_intervals_are_at_the_bonferroni_level():
    m = Mechanism(0.5, (0.25, 0.25, 0.25, 0.25))
    counts = [30, 20, 25, 25]
    joint = estimate(m, counts, simultaneous=True)
    for count, e in zip(counts, joint, strict=True):
        low, high = clopper_pearson(count, 100, 1 - 0.05 / 4)
        assert e.ci_low == pytest.approx(max(0.0, (low - 0.125) / 0.5), rel=1e-12)
        assert e.ci_high == pytest.approx(min(1.0, (high - 0.125) / 0.5), rel=1e-12)
        assert e.confidence == 0.95
    yes_no = Mechanism(0.5, 0.5)
    assert estimate(yes_no, [40, 60], simultaneous=True) == estimate(yes_no, [40, 60])


def test_simplex_projection():
    assert project_to_simplex([0.3, 0.7]) == pytest.approx((0.3, 0.7))
    assert project_to_simplex([1.1, -0.1]) == pytest.approx((1.0, 0.0))
    assert project_to_simplex([0.6, 0.6, -0.2]) == pytest.approx((0.5, 0.5, 0.0))
    # sum 1.2: every coordinate moves down by 0.2 / 3
    assert project_to_simplex([0.5, 0.4, 0.3]) == pytest.approx((0.5 - 0.2 / 3, 0.4 - 0.2 / 3, 0.3 - 0.2 / 3))
    assert project_to_simplex([0.9, 0.5, -0.3]) == pytest.approx((0.7, 0.3, 0.0))


@given(st.lists(st.floats(-2, 2), min_size=2, max_size=8))
def test_simplex_projection_is_the_nearest_distribution(values):
    x = project_to_simplex(values)
    assert all(v >= 0 for v in x) and math.isclose(sum(x), 1.0, rel_tol=1e-9)
    # optimality (KKT): every positive coordinate was shifted by the same theta, and every
    # zero coordinate lies at or below that shift
    shifts = [v - xi for v, xi in zip(values, x, strict=True) if xi > 1e-12]
    assert max(shifts) - min(shifts) <= 1e-9  # (rounding each shift instead was flaky)
    theta = max(shifts)
    assert all(v <= theta + 1e-9 for v, xi in zip(values, x, strict=True) if xi <= 1e-12)


@pytest.mark.parametrize("counts, message", [
    ([0, 0], "n > 0"), ([-1, 5], "non-negative"), ([1, 2, 3], "expected 2"),
    ([1.5, 2], "integers"), ([True, 3], "integers"),
])
def test_bad_counts(counts, message):
    with pytest.raises(ValueError, match=message):
        estimate(Mechanism(0.5, 0.5), counts)


def test_bad_method_and_confidence():
    with pytest.raises(ValueError, match="unknown method"):
        estimate(Mechanism(0.5, 0.5), [3, 4], method="bayes")
    with pytest.raises(ValueError, match="confidence"):
        estimate(Mechanism(0.5, 0.5), [3, 4], confidence=1.0)


def _beta_and_truth():
    dist = st.lists(st.integers(1, 20), min_size=2, max_size=6)
    return dist.flatmap(lambda w: st.tuples(
        st.just(tuple(x / sum(w) for x in w)),
        st.lists(st.integers(0, 20), min_size=len(w), max_size=len(w))
        .filter(lambda t: sum(t) > 0).map(lambda t: tuple(x / sum(t) for x in t))))


@given(alpha=st.floats(0.05, 0.95), pair=_beta_and_truth())
def test_estimator_recovers_truth_from_exact_expected_counts(alpha, pair):
    beta, truth = pair
    m = Mechanism(alpha, beta)
    n = 10 ** 9  # counts proportional to the expected reported rates, rounded
    counts = [round(n * lam) for lam in m.report_distribution(truth)]
    for est, p in zip(estimate(m, counts, method="wald"), truth, strict=True):
        assert est.p_hat == pytest.approx(p, abs=1e-7)
        assert est.p_mle == pytest.approx(p, abs=1e-7)


@pytest.mark.parametrize("alpha, beta, truth", [
    (0.5, (0.5, 0.5), (0.7, 0.3)),
    (0.75, (0.8, 0.2), (0.95, 0.05)),
    (0.4, (0.5, 0.3, 0.2), (0.2, 0.5, 0.3)),
])
def test_monte_carlo_unbiased_and_standard_error(alpha, beta, truth):
    """5,000 simulated surveys of 1,000 respondents each, drawn respondent by respondent."""
    rng = np.random.default_rng(20261121)
    m = Mechanism(alpha, beta)
    replications, n, k = 5_000, 1_000, len(beta)
    true_answers = rng.choice(k, size=(replications, n), p=truth)
    forced = rng.choice(k, size=(replications, n), p=beta)
    keep = rng.random((replications, n)) < alpha
    reports = np.where(keep, true_answers, forced)
    counts = np.stack([(reports == j).sum(axis=1) for j in range(k)], axis=1)
    # p_hat does not depend on the interval: the cheapest method keeps the loop fast
    p_hat = np.array([[e.p_hat for e in estimate(m, [int(c) for c in row], method="wald")]
                      for row in counts])
    lam = np.array(m.report_distribution(truth))
    se_formula = np.sqrt(lam * (1 - lam) / n) / alpha
    mc_se = p_hat.std(axis=0, ddof=1) / math.sqrt(replications)
    assert np.all(np.abs(p_hat.mean(axis=0) - truth) < 4 * mc_se)
    assert np.all(np.abs(p_hat.std(axis=0, ddof=1) / se_formula - 1) < 0.05)


def test_monte_carlo_covariance_k4_non_uniform_beta():
    """20,000 seeded surveys of n = 1,000 (counts are multinomial(n, lam)): the empirical
    covariance of pi_hat matches covariance() at the true rates entry by entry, within 4 standard
    errors of a sample covariance, sqrt((s_ii s_jj + s_ij^2) / (R - 1))."""
    m = Mechanism(0.6, (0.1, 0.2, 0.3, 0.4))
    truth = (0.5, 0.3, 0.2, 0.0)
    n, replications = 1000, 20_000
    lam = np.array(m.report_distribution(truth))
    expected_counts = [round(n * x) for x in lam]
    assert expected_counts == [340, 260, 240, 160]  # exact, so covariance() sees the true rates
    cov = np.array(covariance(m, expected_counts))
    rng = np.random.default_rng(20261122)
    counts = rng.multinomial(n, lam, size=replications)
    p_hat = unbiased_estimate(counts / n, m.alpha, np.array(m.beta))
    empirical = np.cov(p_hat, rowvar=False)
    sd = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov ** 2) / (replications - 1))
    assert np.all(np.abs(empirical - cov) < 4 * sd), (empirical - cov) / sd
    assert np.all(np.abs(cov) > 4 * sd)  # not vacuous: every entry is resolved


def mapped_table(m: Mechanism, n: int, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The default method's mapped, clipped intervals for every count 0..n, per option:
    arrays low[j, count] and high[j, count] (intervals depend only on count and n)."""
    raw = np.array([METHODS[DEFAULT_METHOD](c, n, level) for c in range(n + 1)])
    beta = np.array(m.beta)[:, None]
    low = np.clip(unbiased_estimate(raw[None, :, 0], m.alpha, beta), 0, 1)
    high = np.clip(unbiased_estimate(raw[None, :, 1], m.alpha, beta), 0, 1)
    return low, high


@pytest.mark.parametrize("n", [100, 500])
def test_monte_carlo_simultaneous_coverage(n):
    """4,000 seeded surveys of a 6-option question with one empty option: all six simultaneous
    intervals cover together >= 0.93 (the Monte Carlo SE is about 0.0035); the unadjusted ones
    do not."""
    m = Mechanism(0.5, (0.3, 0.2, 0.2, 0.1, 0.1, 0.1))
    truth = np.array([0.4, 0.3, 0.15, 0.1, 0.05, 0.0])
    rng = np.random.default_rng(7 + n)
    counts = rng.multinomial(n, m.report_distribution(truth), size=4_000)
    options = np.arange(6)

    def joint_coverage(level: float) -> float:
        low, high = mapped_table(m, n, level)
        covered = (low[options, counts] <= truth) & (truth <= high[options, counts])
        return covered.all(axis=1).mean()

    assert joint_coverage(simultaneous_confidence(0.95, 6)) >= 0.93
    assert joint_coverage(0.95) < 0.90


def test_a_single_report_is_estimated():
    """n = 1 is the smallest sample there is, and an estimate (with a warning), not an error."""
    [no, yes] = estimate(Mechanism(0.5, 0.5), [0, 1])
    assert (yes.n, yes.reported_count, yes.reported_rate) == (1, 1, 1.0)
    assert (no.reported_count, no.reported_rate) == (0, 0.0)
    assert yes.p_hat == 1.5 and yes.p_hat_clipped == 1.0 and "small sample" in yes.warning


def test_pure_noise_cannot_be_estimated():
    with pytest.raises(ValueError, match=r"^alpha = 0 reports pure noise: nothing can be estimated$"):
        estimate(Mechanism(0.0, 0.5), [3, 4])
    with pytest.raises(ValueError, match=r"^need at least one report \(n > 0\)$"):
        estimate(Mechanism(0.5, 0.5), [0, 0])
    with pytest.raises(ValueError,
                       match=r"^unknown method 'bayes'; choose from wilson, clopper-pearson, wald$"):
        estimate(Mechanism(0.5, 0.5), [3, 4], method="bayes")


def test_the_small_sample_warning_starts_below_30():
    m = Mechanism(0.5, 0.5)
    assert "small sample: n = 29 < 30" in estimate(m, [14, 15])[0].warning
    assert estimate(m, [15, 15])[0].warning is None  # 30 reports, 7.5 forced per option


def test_intervals_are_per_option_unless_simultaneous_is_asked():
    m, counts = Mechanism(0.5, [0.2, 0.3, 0.5]), [20, 30, 50]
    default, simultaneous = estimate(m, counts), estimate(m, counts, simultaneous=True)
    assert default == estimate(m, counts, simultaneous=False)
    for d, s in zip(default, simultaneous, strict=True):
        assert d.ci_high - d.ci_low < s.ci_high - s.ci_low


def test_an_estimate_reads_as_a_dictionary_of_its_fields():
    e = estimate(Mechanism(0.5, 0.5), [3, 7])[1]
    assert e.as_dict()["reported_count"] == 7 and e.as_dict()["n"] == 10
    assert set(e.as_dict()) == set(Estimate.__dataclass_fields__)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_interval_bounds_are_clipped_to_proportions(method):
    """80 of 100 report 'yes' at alpha = 1/2: the rate's upper bound (about 0.87) maps to a
    true proportion above 1, the 'no' rate's lower bound to one below 0; they show as 1 and 0."""
    [no, yes] = estimate(Mechanism(0.5, 0.5), [20, 80], method=method)
    assert yes.ci_high == 1.0 and no.ci_low == 0.0
    assert 0.0 < yes.ci_low < 1.0 and 0.0 < no.ci_high < 1.0


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.5, 1.5])
def test_a_confidence_outside_0_1_is_refused(confidence):
    with pytest.raises(ValueError, match=r"^confidence must be in \(0, 1\), got "):
        estimate(Mechanism(0.5, 0.5), [3, 4], confidence=confidence)
