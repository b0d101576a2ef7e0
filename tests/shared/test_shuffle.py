"""Shuffle amplification (Feldman, McMillan and Talwar 2021): closed form against the reference
cases, the numerical bound against the published figure and an exact brute-force divergence."""

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpsurvey.shared import (
    DEFAULT_DELTA,
    central_epsilon,
    closed_form_epsilon,
    numerical_epsilon,
    release_batch_required,
)
from ldpsurvey.shared.stats import shuffle

CASES = json.loads((Path(__file__).parents[1] / "reference" / "shuffle_cases.json").read_text())
REL = 1e-12
PROPERTY = settings(max_examples=20, deadline=None)


def test_closed_form_matches_every_reference_case():
    for case in CASES["cases"]:
        args = (case["epsilon_local"], case["n"], case["delta"])
        closed = closed_form_epsilon(*args)
        if case["epsilon_closed_form"] is None:
            assert closed is None and not case["valid"], case
        else:
            assert math.isclose(closed, case["epsilon_closed_form"], rel_tol=REL), case


def test_central_epsilon_is_within_the_reference_ceiling():
    for case in CASES["cases"]:
        if case["n"] <= 10_000:
            args = (case["epsilon_local"], case["n"], case["delta"])
            assert central_epsilon(*args) <= case["epsilon_central_at_most"], case


def test_published_closed_form_and_numerical_bound():
    published = CASES["published"]
    args = (published["epsilon_local"], published["n"], published["delta"])
    assert math.isclose(closed_form_epsilon(*args), 0.5378040242374512, rel_tol=REL)
    assert math.isclose(closed_form_epsilon(*args), published["closed_form"], rel_tol=REL)
    numerical = numerical_epsilon(*args)
    # An upper bound cannot fall below the published lower bound, and must be near the upper.
    assert published["numerical_lower"] <= numerical
    assert 0.1675 <= numerical <= 0.1735
    assert central_epsilon(*args) == numerical


def test_closed_form_validity_threshold_at_ln3():
    eps0, delta = math.log(3), 1e-6
    threshold = next(n for n in range(1, 10_000) if eps0 <= math.log(n / (16 * math.log(4 / delta))))
    assert threshold == 730  # 16 * ln(4e6) * 3 = 729.7
    assert closed_form_epsilon(eps0, 100, delta) is None
    assert closed_form_epsilon(eps0, threshold - 1, delta) is None
    assert closed_form_epsilon(eps0, threshold, delta) is not None


def exact_divergence(eps0: float, n: int, eps: float) -> float:
    """sum_c P(C = c) sum_a max(0, P_c(a) - e^eps Q_c(a)) from exact binomial coefficients,
    skipping the c whose probability is below 1e-30."""
    big_n, p = n - 1, math.exp(-eps0)
    alpha, e = 1 / (1 + math.exp(-eps0)), math.exp(eps)
    total, coefficient = 0.0, 1  # comb(big_n, c)
    for c in range(big_n + 1):
        if c:
            coefficient = coefficient * (big_n - c + 1) // c
        weight = math.exp(math.log(coefficient) + c * math.log(p) + (big_n - c) * math.log1p(-p))
        if weight < 1e-30:
            continue
        pmf = [math.comb(c, a) / 2**c for a in range(c + 1)] + [0.0]
        inner = 0.0
        for a in range(c + 2):
            below = pmf[a - 1] if a else 0.0
            inner += max(0.0, alpha * below + (1 - alpha) * pmf[a]
                         - e * ((1 - alpha) * below + alpha * pmf[a]))
        total += weight * inner
    return total


@pytest.mark.parametrize("eps0, n, eps", [
    (1.0, 40, 0.4),      # every c below the exact-table limit
    (0.5, 400, 0.12),    # c around 240: the recurrence
    (4.0, 3000, 1.5),    # c around 55: both
    (1.0, 1, 0.5),       # no other report at all
])
def test_divergence_bound_is_an_upper_bound_and_tight(eps0, n, eps):
    exact = exact_divergence(eps0, n, eps)
    bound = shuffle._hockey_stick_delta(eps0, n, DEFAULT_DELTA, eps)
    assert exact <= bound <= exact * (1 + 1e-4) + 1e-6 * DEFAULT_DELTA


def test_divergence_is_only_the_window_tail_at_eps0():
    assert shuffle._hockey_stick_delta(1.0, 1000, DEFAULT_DELTA, 1.0) <= 1e-6 * DEFAULT_DELTA


def test_numerical_epsilon_lies_on_the_grid_and_is_checked():
    eps0, n = math.log(3), 5000
    eps = numerical_epsilon(eps0, n)
    assert (eps / shuffle.EPSILON_GRID).is_integer()
    assert shuffle._hockey_stick_delta(eps0, n, DEFAULT_DELTA, eps) <= DEFAULT_DELTA
    assert shuffle._hockey_stick_delta(eps0, n, DEFAULT_DELTA, eps - shuffle.EPSILON_GRID) > DEFAULT_DELTA


def test_large_n_uses_the_bound_at_the_cap(monkeypatch):
    monkeypatch.setattr(shuffle, "NUMERICAL_MAX_N", 2000)
    numerical_epsilon.cache_clear()
    try:
        at_cap = numerical_epsilon(1.0, 2000)
        assert numerical_epsilon(1.0, 50_000) == min(at_cap, closed_form_epsilon(1.0, 50_000))
        target = at_cap * 0.99  # out of the numerical range: only the closed form can reach it
        n = release_batch_required(1.0, target)
        assert closed_form_epsilon(1.0, n) <= target < closed_form_epsilon(1.0, n - 1)
    finally:
        numerical_epsilon.cache_clear()


def test_release_batch_edges():
    assert release_batch_required(1.0, 1.0) == 1
    assert release_batch_required(1.0, 5.0) == 1
    assert release_batch_required(1.0, 1e-6) is None


@pytest.mark.parametrize("call", [
    lambda: closed_form_epsilon(0.0, 100, 1e-6),
    lambda: closed_form_epsilon(-1.0, 100, 1e-6),
    lambda: closed_form_epsilon(float("nan"), 100, 1e-6),
    lambda: numerical_epsilon(1.0, 0, 1e-6),
    lambda: numerical_epsilon(1.0, 10.5, 1e-6),
    lambda: numerical_epsilon(1.0, True, 1e-6),
    lambda: central_epsilon(1.0, 100, 1.0),
    lambda: central_epsilon(1.0, 100, 0.0),
    lambda: release_batch_required(1.0, 0.0),
    lambda: release_batch_required(1.0, float("inf")),
])
def test_bad_input_is_refused(call):
    with pytest.raises(ValueError):
        call()


EPS0 = st.floats(0.05, 6.0)
N = st.integers(1, 100_000)
DELTA = st.sampled_from([1e-4, 1e-6, 1e-9])


@PROPERTY
@given(eps0=EPS0, n=N, delta=DELTA)
def test_central_never_above_local_and_numerical_never_above_closed_form(eps0, n, delta):
    assert central_epsilon(eps0, n, delta) <= eps0
    closed = closed_form_epsilon(eps0, n, delta)
    if closed is not None:
        assert numerical_epsilon(eps0, n, delta) <= closed


@PROPERTY
@given(eps0=EPS0, n=st.integers(1, 90_000), more=st.integers(1, 10_000), delta=DELTA)
def test_bound_does_not_grow_with_n(eps0, n, more, delta):
    assert central_epsilon(eps0, n + more, delta) <= central_epsilon(eps0, n, delta)


@PROPERTY
@given(eps0=EPS0, more=st.floats(0.0, 1.0), n=N, delta=DELTA)
def test_bound_does_not_fall_with_local_epsilon(eps0, more, n, delta):
    assert central_epsilon(eps0 + more, n, delta) >= central_epsilon(eps0, n, delta)


@PROPERTY
@given(eps0=st.floats(0.1, 5.0), batch=st.integers(2, 20_000), slack=st.floats(1.0, 1.3))
def test_release_batch_is_the_smallest_that_reaches_the_target(eps0, batch, slack):
    target = central_epsilon(eps0, batch) * slack
    n = release_batch_required(eps0, target)
    assert n is not None and n <= batch
    assert central_epsilon(eps0, n) <= target
    assert n == 1 or central_epsilon(eps0, n - 1) > target
