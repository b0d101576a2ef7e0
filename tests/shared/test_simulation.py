import json
import math
from importlib import resources
from itertools import pairwise

import numpy as np
import pytest
from scipy import stats

from ldpsurvey.shared.mechanisms.randomizer import N, Thresholds, randomize, thresholds
from ldpsurvey.shared.sim.simulation import forced_bounds, randomize_many, true_answers

VECTORS = json.loads(resources.files("ldpsurvey.shared").joinpath("testvectors.json").read_text())


def client_count(t: Thresholds, true: int, reported: int) -> int:
    """N^2 * P(reported | true) under the client's two-draw rule: U1 < T keeps the truth,
    else U2 in [C_{j-1}, C_j) forces j."""
    return t.keep * N * (true == reported) + (N - t.keep) * t.option_weights[reported]


def defined_report(t: Thresholds, true: int, w: int) -> int:
    """The simulation's rule on the 106-bit integer W (module docstring), in Python integers."""
    return true if w < t.keep * N else sum(w >= r for r in forced_bounds(t))


class ScriptedGenerator:
    """Stands in for NumPy's Generator: the uniforms U / 2^53, then the low bits L of the ties,
    in order (each L must be asked for exactly once)."""

    def __init__(self, tops, lows):
        self._tops, self._lows = tops, list(lows)

    def random(self, out):
        out[:] = np.array(self._tops, dtype=np.int64) / N

    def integers(self, low, high):
        assert (low, high) == (0, N)
        return self._lows.pop(0)


@pytest.mark.parametrize("alpha, beta", [
    (0.75, (0.7, 0.3)),
    (0.4, (0.5, 0.3, 0.2)),
    (0.3, (0.1, 0.2, 0.3, 0.25, 0.15)),
])
def test_chi_square_against_the_exact_client_distribution(alpha, beta):
    """10^6 reports, all true options, against the client's exact P(j | i): the chi-square
    statistic over the k x k table (df = k(k - 1): each row's total is fixed) stays below its
    1 - 10^-6 quantile, and a design with alpha off by 0.01 would exceed it (the test can fail)."""
    t, k, n = thresholds(alpha, beta), len(beta), 1_000_000
    true = (np.arange(n) % k).astype(np.int8)
    reports = randomize_many(true, t, np.random.default_rng(17))
    observed = np.bincount(true.astype(np.int64) * k + reports, minlength=k * k).reshape(k, k)
    rows = np.bincount(true, minlength=k)

    def statistic(design: Thresholds) -> float:
        expected = np.array([[int(rows[i]) * client_count(design, i, j) / N**2 for j in range(k)]
                             for i in range(k)])
        return float(((observed - expected) ** 2 / expected).sum())

    limit = stats.chi2.ppf(1 - 1e-6, k * (k - 1))
    assert statistic(t) < limit
    assert statistic(thresholds(alpha - 0.01, beta)) > limit


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda case: case["name"])
def test_bounds_give_the_clients_exact_counts(case):
    """The test vectors' integers are the simulation's, and its intervals of W hold exactly
    N^2 * P(j | i) of the client's rule: the two rules agree at 2^-106, with no rounding."""
    t = thresholds(case["alpha"], case["beta"])
    assert (t.keep, list(t.cumulative)) == (case["keep_threshold"], case["cumulative_thresholds"])
    edges = [0, *forced_bounds(t), N * N]
    for i in range(len(t.cumulative)):
        counts = [b - a for a, b in pairwise(edges)]
        counts[0] -= t.keep * N  # [0, T*N) keeps the truth, the rest of [0, R_0) forces 0
        counts[i] += t.keep * N
        assert counts == [client_count(t, i, j) for j in range(len(t.cumulative))]


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda case: case["name"])
def test_decisions_at_every_bound_use_all_106_bits(case):
    """U at T - 1 and T, and at each bound's top - 1, top (with L just below and at its low
    bits, where they are not 0) and top + 1: each report is the rule's on W = U*N + L."""
    t = thresholds(case["alpha"], case["beta"])
    draws = [(t.keep - 1, None), (t.keep, None)]
    for r in forced_bounds(t):
        top, rest = divmod(r, N)
        draws += [(top - 1, None), (top + 1, None)]
        draws += [(top, rest - 1), (top, rest)] if rest else [(top, None)]
    for true in range(len(t.cumulative)):
        lows = [low for _, low in draws if low is not None]
        rng = ScriptedGenerator([top for top, _ in draws], lows)
        reports = randomize_many(np.full(len(draws), true, dtype=np.int8), t, rng)
        assert reports.tolist() == [defined_report(t, true, top * N + (low or 0))
                                    for top, low in draws]
        assert rng._lows == []  # every tie was seen and drew its low bits


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda case: case["name"])
def test_vectors_as_ties_on_every_bound(case):
    """With T = N - 1 (alpha = 1 - 2^-53) every bound R_j = (N - 1)*N + C_j has top N - 1, so
    the draw U = N - 1 ties on all of them at once and L alone picks the forced option: the
    report must be the client's forced option for U2 = L, the first j with L < C_j."""
    t = thresholds(1 - 2**-53, case["beta"])
    assert list(t.cumulative) == case["cumulative_thresholds"] and t.keep == N - 1
    lows = [draw["u"][1] for draw in case["draws"]]
    true = np.array([draw["true"] for draw in case["draws"]], dtype=np.int8)
    reports = randomize_many(true, t, ScriptedGenerator([N - 1] * len(lows), lows))
    expected = [randomize(0, t, iter([N - 1, low]).__next__) for low in lows]
    assert reports.tolist() == expected
    for draw, report in zip(case["draws"], reports.tolist(), strict=True):
        if draw["u"][0] >= case["keep_threshold"]:  # the vector itself was forced: same U2
            assert report == draw["output"]


def test_true_answers_follow_the_proportions():
    rng = np.random.default_rng(3)
    answers = true_answers([0.2, 0.5, 0.3], 500_000, rng)
    frequencies = np.bincount(answers) / answers.size
    assert np.all(np.abs(frequencies - [0.2, 0.5, 0.3]) < 5 * math.sqrt(0.25 / answers.size))


def test_true_answers_index_every_cell_of_a_large_joint_table():
    """The mock draws joint answers over the cells of a cross-tab: 12 x 12 = 144 options must
    not wrap around a one-byte integer (they used to, into negative indices)."""
    answers = true_answers([1 / 144] * 144, 20_000, np.random.default_rng(5))
    assert answers.min() >= 0 and answers.max() == 143


def test_scalar_and_vectorized_agree_in_distribution():
    """Both paths against each other: a two-sample check on 200,000 reports each."""
    rng = np.random.default_rng(11)
    t = thresholds(0.3, (0.2, 0.5, 0.3))
    n = 200_000
    vectorized = np.bincount(randomize_many(np.full(n, 1, dtype=np.int8), t, rng), minlength=3)
    scalar = np.zeros(3)
    for _ in range(n):
        scalar[randomize(1, t, lambda: int(rng.integers(0, N)))] += 1
    for a, b in zip(vectorized / n, scalar / n, strict=True):
        assert abs(a - b) < 5 * math.sqrt(2 * 0.25 / n)


def test_the_simulation_restates_the_devices_constants():
    """sim imports nothing of the mechanisms (they import it, for `simulate`): the draws' range
    and xxHash32's constants it restates are the device's."""
    from ldpsurvey.shared.mechanisms import olh, randomizer
    from ldpsurvey.shared.sim import simulation

    assert (simulation.N, simulation.PRIME32, simulation.MASK) == (
        randomizer.N, olh.PRIME32, olh.MASK)
