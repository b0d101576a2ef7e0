import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldpsurvey.shared import (
    Mechanism,
    n_required,
    n_required_central_laplace,
    posterior_bounds,
    total_epsilon,
)
from ldpsurvey.shared.budget import exceeds


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
