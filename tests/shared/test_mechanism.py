import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldpsurvey.shared import Mechanism, alpha_for_epsilon, epsilon, report_probability
from ldpsurvey.shared.stats.design import compose

REL = 1e-9


def test_epsilon_matches_reference(reference):
    for case in reference["epsilon"]:
        assert math.isclose(epsilon(case["alpha"], case["beta"]), case["epsilon"], rel_tol=REL)
        if "p_report_yes_if_yes" in case:
            m = Mechanism(case["alpha"], case["beta"])
            assert math.isclose(m.probability(1, 1), case["p_report_yes_if_yes"], rel_tol=REL)
            assert math.isclose(m.probability(0, 1), case["p_report_yes_if_no"], rel_tol=REL)


def test_alpha_for_epsilon_matches_reference(reference):
    for case in reference["alpha_for_epsilon"]:
        alpha = alpha_for_epsilon(case["epsilon"], case["beta"])
        assert math.isclose(alpha, case["alpha"], rel_tol=REL)
        assert epsilon(alpha, case["beta"]) <= case["epsilon"]


def test_hand_worked_values():
    # alpha = 1/2, beta = 1/2: P(yes|yes) = 3/4, P(yes|no) = 1/4, eps = ln 3.
    assert math.isclose(epsilon(0.5, 0.5), math.log(3), rel_tol=1e-15)
    # beta = 0.2: the rarer output 'yes' decides: 1 + 0.5 / (0.5 * 0.2) = 6.
    assert math.isclose(epsilon(0.5, 0.2), math.log(6), rel_tol=1e-15)
    assert math.isclose(epsilon(0.5, 0.8), math.log(6), rel_tol=1e-15)  # both outputs count
    assert epsilon(0.0, 0.5) == 0.0
    # Warner's design: beta = 1/2 gives truth probability e^eps / (1 + e^eps).
    m = Mechanism.from_epsilon(1.3)
    assert math.isclose(m.probability(1, 1), math.exp(1.3) / (1 + math.exp(1.3)), rel_tol=1e-12)


@pytest.mark.parametrize("alpha, beta, message", [
    (1.0, 0.5, "alpha"), (-0.1, 0.5, "alpha"), (math.nan, 0.5, "alpha"),
    (0.5, 0.0, "beta"), (0.5, 1.0, "beta"), (0.5, [0.5, 0.6], "sum to 1"),
    (0.5, [1.0], "at least 2"), (0.5, [0.5, 0.5, 0.0], "beta"),
])
def test_invalid_parameters_are_refused(alpha, beta, message):
    with pytest.raises(ValueError, match=message):
        epsilon(alpha, beta)


@pytest.mark.parametrize("eps", [0.0, -1.0, math.inf, math.nan])
def test_alpha_for_invalid_epsilon(eps):
    with pytest.raises(ValueError, match="epsilon"):
        alpha_for_epsilon(eps, 0.5)


def _beta_strategy():
    yes_no = st.floats(0.001, 0.999).map(lambda b: (1 - b, b))
    weights = st.lists(st.floats(0.01, 1.0), min_size=2, max_size=8)
    k_options = weights.map(lambda w: tuple(x / math.fsum(w) for x in w))
    return st.one_of(yes_no, k_options).filter(lambda b: abs(math.fsum(b) - 1) < 1e-12)


EPS = st.floats(min_value=1e-300, max_value=20.0)


@given(eps=EPS, beta=_beta_strategy())
def test_alpha_for_epsilon_never_exceeds_and_is_close(eps, beta):
    alpha = alpha_for_epsilon(eps, beta)
    assert epsilon(alpha, beta) <= eps
    # largest such float: one step up exceeds eps (or reaches alpha = 1)
    up = math.nextafter(alpha, 1.0)
    assert up >= 1.0 or epsilon(up, beta) > eps
    # and close: within 1e-9, or within what one float step of alpha can resolve (near
    # alpha = 1 one step moves epsilon by about 2e-8 at eps = 20)
    step = epsilon(up, beta) - epsilon(alpha, beta) if up < 1.0 else math.inf
    assert math.isclose(epsilon(alpha, beta), eps, rel_tol=1e-9) or eps - epsilon(alpha, beta) <= step


@given(alpha=st.floats(0.0, 0.999), beta=_beta_strategy())
def test_epsilon_is_the_brute_force_max_log_ratio(alpha, beta):
    k = len(beta)
    worst = max(
        math.log(report_probability(alpha, beta, i, j) / report_probability(alpha, beta, i2, j))
        for i, i2, j in itertools.product(range(k), repeat=3)
    )
    assert math.isclose(worst, epsilon(alpha, beta), rel_tol=1e-9, abs_tol=1e-12)


def _variance_factor(eps: float, beta: tuple[float, ...], truth: tuple[float, ...]) -> float:
    """n * sum_j Var(pi_hat_j) = sum_j lam_j (1 - lam_j) / alpha^2 at the given eps."""
    m = Mechanism.from_epsilon(eps, beta)
    return sum(lam * (1 - lam) for lam in m.report_distribution(truth)) / m.alpha ** 2


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, math.log(3), 2.0, 4.0])
def test_uniform_beta_minimizes_variance_yes_no(eps):
    for p in (0.0, 0.05, 0.3, 0.5, 0.9, 1.0):
        uniform = _variance_factor(eps, (0.5, 0.5), (1 - p, p))
        for b in (0.02, 0.1, 0.25, 0.4, 0.49, 0.51, 0.7, 0.95):
            assert uniform < _variance_factor(eps, (1 - b, b), (1 - p, p))


@pytest.mark.parametrize("eps", [0.5, 1.5, 3.0])
def test_uniform_beta_minimizes_total_variance_three_options(eps):
    grid = [i / 10 for i in range(1, 9)]
    betas = [(a, b, 1 - a - b) for a in grid for b in grid if 1 - a - b > 0.05]
    for truth in ((1 / 3, 1 / 3, 1 / 3), (0.8, 0.1, 0.1), (0.0, 0.5, 0.5), (1.0, 0.0, 0.0)):
        uniform = _variance_factor(eps, (1 / 3,) * 3, truth)
        for beta in betas:
            assert uniform <= _variance_factor(eps, beta, truth) * (1 + 1e-12)


@pytest.mark.parametrize("eps", [20.0, 37.0, 50.0, 1000.0])
def test_alpha_for_a_very_large_epsilon_is_the_largest_alpha_below_one(eps):
    """Beyond eps ~ 37 every alpha < 1 qualifies at beta = 1/2: the answer is the float just
    below 1, and no larger alpha is allowed."""
    alpha = alpha_for_epsilon(eps, 0.5)
    assert alpha < 1.0 and epsilon(alpha, 0.5) <= eps
    assert alpha == math.nextafter(1.0, 0.0) or epsilon(math.nextafter(alpha, 1.0), 0.5) > eps


def test_mechanism_at_epsilon_defaults_to_uniform_beta_over_k_options():
    m = Mechanism.from_epsilon(1.0, k=4)
    assert m.beta == (0.25,) * 4 and m.k == 4
    assert Mechanism.from_epsilon(1.0, [0.2, 0.8]).beta == (0.2, 0.8)
    with pytest.raises(ValueError, match="at least 2 options, got 1"):
        Mechanism.from_epsilon(1.0, k=1)


def test_lists_of_the_wrong_length_are_refused_not_truncated():
    m = Mechanism(0.5, [0.2, 0.3, 0.5])
    with pytest.raises(ValueError):
        m.report_distribution([0.5, 0.5])
    with pytest.raises(ValueError):
        m.then(Mechanism(0.5, 0.5))
    with pytest.raises(ValueError):
        compose(0.5, (0.5, 0.5), 0.5, (0.2, 0.3, 0.5))


def test_probability_of_each_report():
    m = Mechanism(0.5, [0.2, 0.3, 0.5])
    assert m.probability(1, 1) == 0.5 + 0.5 * 0.3
    assert m.probability(0, 1) == 0.5 * 0.3
    assert m.report_distribution([1.0, 0.0, 0.0]) == (0.6, 0.15, 0.25)


def test_a_beta_of_one_is_refused_even_when_the_sum_is_within_tolerance():
    with pytest.raises(ValueError, match=r"beta\[0\] must be in \(0, 1\)"):
        epsilon(0.5, [1.0, 1e-12])


def test_two_layers_are_the_composed_mechanism_exactly():
    """P(r | t) of the composed mechanism = sum_p P_permanent(p | t) P_instantaneous(r | p),
    for a non-uniform permanent beta (worked on fractions: alpha = 1/5, beta = (17/40, 23/40))."""
    from fractions import Fraction as F

    a_p, b_p, a_i, b_i = F(1, 2), (F(1, 5), F(4, 5)), F(2, 5), (F(1, 2), F(1, 2))
    alpha, beta = compose(a_p, b_p, a_i, b_i)
    assert (alpha, beta) == (F(1, 5), (F(17, 40), F(23, 40)))
    for t, r in itertools.product(range(2), repeat=2):
        layered = sum(report_probability(a_p, b_p, t, p) * report_probability(a_i, b_i, p, r)
                      for p in range(2))
        assert math.isclose(report_probability(alpha, beta, t, r), layered, rel_tol=1e-15)
    m = Mechanism(0.5, [0.2, 0.8]).then(Mechanism(0.4, 0.5))
    assert math.isclose(m.alpha, 0.2) and all(map(math.isclose, m.beta, (0.425, 0.575)))
