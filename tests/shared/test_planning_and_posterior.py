import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from ldpsurvey.shared import (
    DEFAULT_METHOD,
    METHODS,
    Mechanism,
    n_required,
    n_required_central_laplace,
    n_required_question,
    posterior_bounds,
    total_epsilon,
)
from ldpsurvey.shared.mechanisms.budget import exceeds


def test_sample_sizes_match_reference(reference):
    for case in reference["sample_size"]:
        m = Mechanism.from_epsilon(case["epsilon"], case["beta"])
        assert math.isclose(m.alpha, case["alpha"], rel_tol=1e-9)
        args = (case["expected_proportion"], case["margin"], case["confidence"])
        assert n_required(m, *args) == case["n_required_normal_approx"]
        assert n_required_central_laplace(case["epsilon"], *args) == \
            case["n_required_central_laplace"]


@given(eps=st.floats(0.05, 10), p=st.floats(0, 1), margin=st.floats(0.005, 0.2))
def test_central_laplace_n_is_the_smallest_sufficient(eps, p, margin):
    z = 1.959963984540054

    def enough(n):
        return z * math.sqrt(p * (1 - p) / n + 2 / (eps * eps * n * n)) <= margin

    n = n_required_central_laplace(eps, p, margin)
    assert enough(n) and (n == 1 or not enough(n - 1))


def test_local_privacy_costs_more_than_central():
    m = Mechanism.from_epsilon(1.0)
    assert n_required(m, 0.3, 0.03) > 5 * n_required_central_laplace(1.0, 0.3, 0.03)


@pytest.mark.parametrize("bad", [dict(proportion=1.5), dict(margin=0.0), dict(confidence=1.0)])
def test_planning_refuses_bad_input(bad):
    args = dict(proportion=0.3, margin=0.03, confidence=0.95) | bad
    with pytest.raises(ValueError):
        n_required(Mechanism(0.5, 0.5), **args)


def test_posterior_bounds_match_reference(reference):
    for case in reference["posterior_bounds"]:
        bounds = posterior_bounds(case["prior"], case["epsilon"])
        assert math.isclose(bounds.high, case["posterior_max"], rel_tol=1e-9)
        assert math.isclose(bounds.low, case["posterior_min"], rel_tol=1e-9)


@given(prior=st.floats(0.001, 0.999), alpha=st.floats(0.01, 0.99), b=st.floats(0.01, 0.99))
def test_posterior_bounds_contain_every_bayes_update(prior, alpha, b):
    """For a yes/no question, Bayes' rule after either report stays within the bounds."""
    m = Mechanism(alpha, b)
    bounds = posterior_bounds(prior, m.epsilon)
    for report in (0, 1):
        yes = prior * m.probability(1, report)
        posterior = yes / (yes + (1 - prior) * m.probability(0, report))
        assert bounds.low * (1 - 1e-9) <= posterior <= bounds.high * (1 + 1e-9)


def test_budget_is_a_sum_and_ceiling_uses_the_tolerance():
    assert total_epsilon([0.5, 1.0, math.log(3)]) == pytest.approx(1.5 + math.log(3))
    assert not exceeds(1.0 + 1e-12, 1.0)
    assert exceeds(1.0 + 1e-6, 1.0)


def test_worst_case_plan_by_hand():
    """alpha = beta = 1/2: the reported rate can reach 1/2, so the worst case is
    ceil(z^2 * 1/4 / (1/4 * 0.05^2)) = ceil(z^2 / 0.0025) = 1537. With alpha 0.3 and
    beta_yes 0.02 the rate stays in [0.014, 0.314]: the worst case is lam = 0.314."""
    z = 1.959963984540054
    assert n_required(Mechanism(0.5, 0.5), None, 0.05) == 1537
    m = Mechanism(0.3, 0.02)
    assert n_required(m, None, 0.05) == math.ceil(z * z * 0.314 * 0.686 / (0.09 * 0.0025))
    assert n_required(m, None, 0.05) == n_required(m, 1.0, 0.05)


def test_question_plan_for_k_options():
    m = Mechanism(0.5, (0.2, 0.3, 0.5))
    given = (0.1, 0.6, 0.3)
    per_option = [n_required(m, p, 0.03, option=j) for j, p in enumerate(given)]
    assert n_required_question(m, given, 0.03) == max(per_option)
    # option 1: lam = 0.5 * 0.6 + 0.15 = 0.45, the largest lam(1 - lam) of the three
    assert max(per_option) == per_option[1] == math.ceil(1.959963984540054 ** 2 * 0.45 * 0.55
                                                         / (0.25 * 0.03 ** 2))
    worst = n_required_question(m, None, 0.03)
    assert worst == n_required(Mechanism(0.5, 0.5), None, 0.03)  # some option can reach 1/2
    assert worst >= n_required_question(m, given, 0.03)


@pytest.mark.parametrize("proportions, message", [
    ((0.5, 0.5), "expected 3"), ((0.5, 0.4, 0.2), "sum to 1"), ((1.2, -0.1, -0.1), r"\[0, 1\]"),
])
def test_question_plan_refuses_bad_proportions(proportions, message):
    with pytest.raises(ValueError, match=message):
        n_required_question(Mechanism(0.5, (0.2, 0.3, 0.5)), proportions, 0.03)


def test_plan_refuses_an_unknown_option():
    with pytest.raises(ValueError, match="option"):
        n_required(Mechanism(0.5, 0.5), 0.3, 0.03, option=2)


def test_the_margin_is_the_expected_half_width_of_the_default_interval():
    """At the planned n (alpha = beta = 1/2, p = 0.3, margin 0.03: n = 4098) the default
    interval's half-width, averaged exactly over the binomial count, is the margin within 2 %."""
    m = Mechanism(0.5, 0.5)
    n = n_required(m, 0.3, 0.03)
    lam = m.report_distribution((0.7, 0.3))[1]
    counts = np.arange(round(n * lam) - 200, round(n * lam) + 201)  # +- 6.4 SD: the rest < 1e-9
    pmf = stats.binom.pmf(counts, n, lam)
    half = [(lambda low, high: (high - low) / 2 / m.alpha)(*METHODS[DEFAULT_METHOD](int(c), n, 0.95))
            for c in counts]
    assert pmf.sum() == pytest.approx(1.0, abs=1e-9)
    assert float(pmf @ half) == pytest.approx(0.03, rel=0.02)
