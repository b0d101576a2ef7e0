import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldpsurvey.shared import Mechanism, estimate, project_to_simplex
from ldpsurvey.shared.intervals import wilson

REL = 1e-9


def _close(a, b):
    return math.isclose(a, b, rel_tol=REL, abs_tol=1e-15)


def test_estimates_match_reference(reference):
    for case in reference["estimate_from_counts"]:
        m = Mechanism(case["alpha"], case["beta"])
        n, yes = case["n"], case["reported_yes"]
        result = estimate(m, [n - yes, yes])[1]
        assert _close(result.p_hat, case["p_hat_unbiased"])
        assert _close(result.p_hat_clipped, case["p_hat_clipped"])
        assert _close(result.standard_error, case["standard_error_plugin"])
        low, high = wilson(yes, n, 0.95)
        assert _close(low, case["wilson_95_reported_rate"][0])
        assert _close(high, case["wilson_95_reported_rate"][1])
        assert result.design_consistent is case["design_consistent"]
        if case["ci_95_wilson_mapped_clipped"] is None:
            assert result.ci_low is None and result.ci_high is None
        else:
            assert _close(result.ci_low, case["ci_95_wilson_mapped_clipped"][0])
            assert _close(result.ci_high, case["ci_95_wilson_mapped_clipped"][1])


def test_hand_worked_estimate():
    # alpha = 1/2, beta = 1/2, 1000 reports of which 400 yes: (0.4 - 0.25) / 0.5 = 0.3,
    # SE = sqrt(0.4 * 0.6 / 1000) / 0.5.
    result = estimate(Mechanism(0.5, 0.5), [600, 400])
    assert _close(result[1].p_hat, 0.3) and _close(result[0].p_hat, 0.7)
    assert _close(result[1].standard_error, math.sqrt(0.24 / 1000) / 0.5)
    assert result[1].epsilon == pytest.approx(math.log(3))


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
    shifts = {round(v - xi, 9) for v, xi in zip(values, x, strict=True) if xi > 1e-12}
    assert len(shifts) == 1
    theta = shifts.pop()
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
    for est, p in zip(estimate(m, counts), truth, strict=True):
        assert est.p_hat == pytest.approx(p, abs=1e-7)


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
    p_hat = np.array([[e.p_hat for e in estimate(m, [int(c) for c in row])] for row in counts])
    lam = np.array(m.report_distribution(truth))
    se_formula = np.sqrt(lam * (1 - lam) / n) / alpha
    mc_se = p_hat.std(axis=0, ddof=1) / math.sqrt(replications)
    assert np.all(np.abs(p_hat.mean(axis=0) - truth) < 4 * mc_se)
    assert np.all(np.abs(p_hat.std(axis=0, ddof=1) / se_formula - 1) < 0.05)
