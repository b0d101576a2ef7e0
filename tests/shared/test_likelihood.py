import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import optimize, stats
from test_intervals import DESIGNS, SIZES, TRUTH

from ldpsurvey.shared import FIT_LEVEL, Mechanism, feasible_rates, fit_p_value, maximum_likelihood
from ldpsurvey.shared.stats.estimate import unbiased_estimate
from ldpsurvey.shared.stats.likelihood import floors


def log_likelihood(m: Mechanism, counts, pi) -> float:
    return sum(c * math.log(lam) for c, lam in zip(counts, m.report_distribution(pi), strict=True) if c)


def direct_maximum(m: Mechanism, counts) -> np.ndarray:
    """The MLE by a general-purpose optimizer: bounded scalar search for k = 2, SLSQP on the
    simplex (mean log-likelihood with its gradient) otherwise."""
    if m.k == 2:
        found = optimize.minimize_scalar(lambda p: -log_likelihood(m, counts, (1 - p, p)),
                                         bounds=(0.0, 1.0), method="bounded",
                                         options={"xatol": 1e-12})
        return np.array([1 - found.x, found.x])
    shares, floor, alpha = np.array(counts) / sum(counts), np.array(floors(m)), m.alpha
    found = optimize.minimize(
        lambda pi: -(shares * np.log(np.maximum(alpha * pi + floor, 1e-300))).sum(),
        np.full(m.k, 1.0 / m.k), jac=lambda pi: -shares * alpha / (alpha * pi + floor),
        method="SLSQP", bounds=[(0.0, 1.0)] * m.k,
        constraints=[{"type": "eq", "fun": lambda pi: pi.sum() - 1.0,
                      "jac": lambda pi: np.ones(m.k)}],
        options={"ftol": 1e-15, "maxiter": 1000})
    assert found.success, found.message
    return found.x


def cases():
    rng = np.random.default_rng(11)
    fixed = [
        (Mechanism(0.5, 0.5), [400, 100]),  # below the floor: clipped to 0
        (Mechanism(0.5, 0.5), [50, 450]),  # above the ceiling: clipped to 1
        (Mechanism(0.75, 0.5), [12700, 7300]),  # interior
        (Mechanism(0.9, 0.05), [50, 0]),
        (Mechanism(0.5, (0.2, 0.3, 0.5)), [0, 30, 70]),
        (Mechanism(0.3, (0.1, 0.2, 0.3, 0.4)), [5, 40, 10, 45]),
        (Mechanism(0.6, (0.25, 0.25, 0.25, 0.25)), [0, 0, 3, 1]),
    ]
    drawn = []
    for _ in range(15):
        k = int(rng.integers(3, 7))
        beta = rng.dirichlet(np.ones(k)) * 0.9 + 0.1 / k
        beta = tuple(float(b) for b in beta / beta.sum())
        alpha = float(rng.uniform(0.1, 0.9))
        counts = [int(c) for c in rng.multinomial(int(rng.integers(5, 300)), rng.dirichlet(np.ones(k)))]
        drawn.append((Mechanism(alpha, beta), counts))
    return fixed + drawn


@pytest.mark.parametrize("m, counts", cases())
def test_mle_matches_a_direct_maximization(m, counts):
    ours = np.array(maximum_likelihood(m, counts))
    theirs = direct_maximum(m, counts)
    assert np.all(ours >= 0) and math.isclose(ours.sum(), 1.0, rel_tol=1e-12)
    assert np.abs(ours - theirs).max() < 1e-6
    assert log_likelihood(m, counts, ours) >= log_likelihood(m, counts, np.clip(theirs, 0, 1)) - 1e-9


@given(alpha=st.floats(0.05, 0.95), b=st.floats(0.01, 0.99), n=st.integers(1, 2000),
       share=st.floats(0, 1))
def test_yes_no_fit_is_the_reported_rate_clipped(alpha, b, n, share):
    m = Mechanism(alpha, b)
    yes = round(n * share)
    floor = (1 - alpha) * b
    lam = feasible_rates(m, [n - yes, yes])[1]
    assert lam == pytest.approx(min(max(yes / n, floor), alpha + floor), rel=1e-12, abs=1e-15)
    p_mle = maximum_likelihood(m, [n - yes, yes])[1]
    assert p_mle == pytest.approx(min(max(unbiased_estimate(yes / n, alpha, b), 0), 1), abs=1e-12)


@given(alpha=st.floats(0.05, 0.95), data=st.data())
def test_mle_is_the_unbiased_estimate_wherever_that_is_interior(alpha, data):
    k = data.draw(st.integers(2, 6))
    weights = data.draw(st.lists(st.integers(1, 20), min_size=k, max_size=k))
    m = Mechanism(alpha, tuple(w / sum(weights) for w in weights))
    counts = data.draw(st.lists(st.integers(0, 500), min_size=k, max_size=k).filter(any))
    n = sum(counts)
    unbiased = [unbiased_estimate(c / n, alpha, b) for c, b in zip(counts, m.beta, strict=True)]
    if min(unbiased) >= 0:
        assert maximum_likelihood(m, counts) == pytest.approx(unbiased, abs=1e-12)
        assert fit_p_value(m, counts) == pytest.approx(1.0, abs=1e-9)
    assert min(feasible_rates(m, counts)) > 0  # never a zero rate, so never a zero SE


@pytest.fixture(scope="module")
def false_alarms() -> dict:
    """P(fit_p_value < FIT_LEVEL) for yes/no, summed exactly over the count, per (n, design),
    at every true proportion of the coverage scan."""
    rates = {}
    for n in SIZES:
        counts = np.arange(n + 1)
        for alpha, b in DESIGNS:
            m = Mechanism(alpha, b)
            alarm = np.array([fit_p_value(m, [n - c, c]) < FIT_LEVEL for c in range(n + 1)])
            pmf = stats.binom.pmf(counts[None, :], n, (alpha * TRUTH + (1 - alpha) * b)[:, None])
            rates[n, alpha, b] = pmf @ alarm
    return rates


def test_fit_check_false_alarm_rate_is_at_most_0_002(false_alarms):
    worst = max(false_alarms, key=lambda cell: false_alarms[cell].max())
    assert false_alarms[worst].max() <= 0.002, (worst, false_alarms[worst].max())
    # not vacuous: the check does fire near the edges at the rate the level allows
    assert false_alarms[worst].max() > 0.0002


@pytest.mark.parametrize("alpha, beta, n, yes, expected", [
    (0.5, 0.5, 500, 100, stats.binom.cdf(100, 500, 0.25)),  # below the floor 0.25
    (0.5, 0.5, 500, 400, stats.binom.sf(399, 500, 0.75)),  # above the ceiling 0.75
    (0.5, 0.5, 500, 130, 1.0),  # inside
])
def test_yes_no_fit_p_value_by_hand(alpha, beta, n, yes, expected):
    assert fit_p_value(Mechanism(alpha, beta), [n - yes, yes]) == pytest.approx(expected, rel=1e-10)


def test_fit_check_for_six_options_rarely_alarms_on_a_correct_design_and_catches_a_wrong_one():
    """20,000 seeded surveys of n = 100 on a 6-option question with three empty options (the
    old check alarmed on 6.7 % of such surveys): alarms at most FIT_LEVEL plus 4 Monte Carlo
    SEs. Reports whose noise is not the stated beta are caught in most surveys of n = 1,000."""
    m = Mechanism(0.8, (0.3, 0.2, 0.2, 0.1, 0.1, 0.1))
    truth = (0.5, 0.3, 0.2, 0.0, 0.0, 0.0)
    rng = np.random.default_rng(2026)
    replications = 20_000

    def alarm_rate(n: int, lam, replications: int) -> float:
        draws = rng.multinomial(n, lam, size=replications)
        return np.mean([fit_p_value(m, [int(c) for c in row]) < FIT_LEVEL for row in draws])

    bound = FIT_LEVEL + 4 * math.sqrt(FIT_LEVEL / replications)
    assert alarm_rate(100, m.report_distribution(truth), replications) <= bound
    # the devices forced (0.5, 0.5, 0, 0, 0, 0) instead of the stated beta
    wrong = [0.8 * p + 0.2 * w for p, w in zip(truth, (0.5, 0.5, 0, 0, 0, 0), strict=True)]
    assert alarm_rate(1000, wrong, 1000) > 0.9


def test_floors():
    assert floors(Mechanism(0.5, (0.2, 0.8))) == pytest.approx((0.1, 0.4))
