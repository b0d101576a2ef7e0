import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpsurvey.shared import Mechanism, crosstab
from ldpsurvey.shared.stats.crosstab import block_interval, cell_interval, conditional_interval
from ldpsurvey.shared.stats.design import alpha_for_epsilon
from ldpsurvey.shared.stats.intervals import z_value


def report_matrix(m: Mechanism) -> np.ndarray:
    """P[i, j] = P(report j | true i)."""
    return np.array([[m.probability(i, j) for j in range(m.k)] for i in range(m.k)])


def joint_rates(rows: Mechanism, cols: Mechanism, truth: np.ndarray) -> np.ndarray:
    """Lam = P_A^T Pi P_B: the reported joint rates for true joint proportions."""
    return report_matrix(rows).T @ truth @ report_matrix(cols)


def _designs():
    def mechanism(k):
        return st.tuples(st.floats(0.1, 0.9), st.lists(st.integers(1, 10), min_size=k, max_size=k)).map(
            lambda t: Mechanism(t[0], tuple(w / sum(t[1]) for w in t[1])))
    return st.tuples(st.integers(2, 4), st.integers(2, 4)).flatmap(lambda ks: st.tuples(
        mechanism(ks[0]), mechanism(ks[1]),
        st.lists(st.integers(0, 20), min_size=ks[0] * ks[1], max_size=ks[0] * ks[1]).filter(any)))


@settings(max_examples=50)
@given(_designs())
def test_crosstab_recovers_the_truth_from_exact_expected_joint_counts(design):
    rows, cols, weights = design
    truth = np.array(weights, dtype=float).reshape(rows.k, cols.k) / sum(weights)
    n = 10 ** 9
    counts = [[round(n * x) for x in row] for row in joint_rates(rows, cols, truth)]
    table = crosstab(rows, cols, counts)
    assert np.abs(np.array(table.joint) - truth).max() < 1e-6
    for cell in table.cells:
        assert cell.p_hat == table.joint[cell.row][cell.col]
    for c in table.conditional:
        share = truth[c.row].sum()
        if share > 0.01:
            assert c.p_hat == pytest.approx(truth[c.row, c.col] / share, abs=1e-5)


def test_covariance_is_the_kronecker_formula():
    """cov(vec Pi_hat) = K (diag(lam) - lam lam^T) K^T / n, K = ((P_A (x) P_B)^T)^-1, with lam the
    observed rates when the unbiased joint is a distribution."""
    rows, cols = Mechanism(0.6, 0.5), Mechanism(0.5, (0.2, 0.3, 0.5))
    counts = [[180, 95, 125], [160, 190, 250]]
    table = crosstab(rows, cols, counts)
    lam = np.array(counts, dtype=float).flatten() / 1000
    k = np.linalg.inv(np.kron(report_matrix(rows), report_matrix(cols)).T)
    assert np.all(k @ lam >= 0)  # interior, so the plug-in is lam itself
    expected = k @ (np.diag(lam) - np.outer(lam, lam)) @ k.T / 1000
    assert np.abs(np.array(table.covariance) - expected).max() < 1e-15
    assert np.abs(np.array(table.joint).flatten() - k @ lam).max() < 1e-14
    for cell in table.cells:
        se = np.sqrt(expected[cell.row * 3 + cell.col, cell.row * 3 + cell.col])
        assert cell.standard_error == pytest.approx(se, rel=1e-12)
        assert (cell.ci_low, cell.ci_high) == cell_interval(rows, cols, cell.row, cell.col,
                                                           cell.p_hat, 1000, z_value(0.95))


def test_a_cell_interval_is_the_corrected_score_interval_with_the_worst_variance_given_the_cell():
    """Brute force over the Kronecker report matrix: E[s^2 | true cell t] = sum_r K[c, r]^2
    P[t, r] with K = ((P_A (x) P_B)^T)^-1; the ends p of the interval of cell c solve
    (|p_hat - p| - d)^2 = z^2/n (p m + (1 - p) M - p^2), m at t = c, M the largest elsewhere,
    d = 1/(2 n alpha_A alpha_B)."""
    rows, cols = Mechanism(0.6, 0.5), Mechanism(0.5, (0.2, 0.3, 0.5))
    counts = [[18, 9, 12], [16, 19, 26]]
    n, z = 100, z_value(0.95)
    table = crosstab(rows, cols, counts)
    joint = np.kron(report_matrix(rows), report_matrix(cols))
    k = np.linalg.inv(joint.T)
    for cell in table.cells:
        c = cell.row * 3 + cell.col
        second = (k[c] ** 2 * joint).sum(axis=1)
        m, most = second[c], np.delete(second, c).max()
        for end in cell_interval(rows, cols, cell.row, cell.col, cell.p_hat, n, z):
            if 0 < end < 1:
                assert (abs(cell.p_hat - end) - 1 / (2 * n * 0.6 * 0.5)) ** 2 == pytest.approx(
                    z * z / n * (end * m + (1 - end) * most - end * end), rel=1e-9)


@pytest.mark.parametrize("eps", [3.0, 5.0])
@pytest.mark.parametrize("joint", [[[0.7, 0.1], [0.1, 0.1]], [[0.9, 0.05], [0.05, 0.0]]])
def test_small_cells_cover_at_n_50(eps, joint):
    """The issue's setting: two yes/no questions at eps 3 and 5, n = 50, a joint of 0.7, 0.1,
    0.1, 0.1 (the Wald interval covered the small cells 0.88 to 0.91), and 0.9, 0.05, 0.05, 0
    (without the continuity correction the cell of 0.9 covered 0.93): 2,000 seeded surveys,
    every cell at or above 0.94 within 3 binomial SDs."""
    design = Mechanism(alpha_for_epsilon(eps, 0.5), 0.5)
    truth = np.array(joint)
    lam = joint_rates(design, design, truth).flatten()
    replications = 2_000
    covered = np.zeros((2, 2))
    for draw in np.random.default_rng(40).multinomial(50, lam, size=replications):
        table = crosstab(design, design, [[int(x) for x in draw[:2]], [int(x) for x in draw[2:]]])
        for c in table.cells:
            covered[c.row, c.col] += c.ci_low <= truth[c.row, c.col] <= c.ci_high
    assert (covered / replications).min() >= 0.94 - 3 * math.sqrt(0.94 * 0.06 / replications)


def test_a_conditional_interval_bounds_the_ratio_by_its_parts_simultaneous_intervals():
    """P(B = b | A = a) = x / (x + y), x the cell and y the rest of its row: the interval is
    [x1 / (x1 + y2), x2 / (x2 + y1)] from their score intervals at Bonferroni's level
    (block_interval at 1 - 0.05 / 2 each), the rest's a block of two cells."""
    rows, cols = Mechanism(0.6, 0.5), Mechanism(0.5, (0.2, 0.3, 0.5))
    counts = [[40, 25, 60], [30, 20, 25]]
    table = crosstab(rows, cols, counts)
    z = z_value(0.975)
    for c in table.conditional:
        rest = [j for j in range(3) if j != c.col]
        x1, x2 = block_interval(rows, cols, c.row, (c.col,), table.joint[c.row][c.col], 200, z)
        y1, y2 = block_interval(rows, cols, c.row, rest,
                                sum(table.joint[c.row][j] for j in rest), 200, z)
        expected = (x1 / (x1 + y2) if x1 > 0 else 0.0, x2 / (x2 + y1))
        assert conditional_interval(rows, cols, table.joint, c.row, c.col, 200, z) == expected
        assert (c.ci_low, c.ci_high) == (min(expected[0], c.p_constrained),
                                         max(expected[1], c.p_constrained))


def test_an_empty_row_has_no_conditional_and_zero_cells_keep_an_error():
    rows, cols = Mechanism(0.8, 0.5), Mechanism(0.8, 0.5)
    table = crosstab(rows, cols, [[5, 5], [0, 0]])
    assert table.n == 10 and table.confidence == 0.95
    empty = [c for c in table.conditional if c.row == 1]
    assert all(c.p_hat is None and (c.ci_low, c.ci_high) == (0.0, 1.0) for c in empty)
    assert all(cell.standard_error > 0 for cell in table.cells)
    body = table.as_dict()
    assert set(body) == {"n", "confidence", "joint", "covariance", "cells", "conditional"}
    assert set(body["cells"][0]) == {"row", "col", "p_hat", "p_constrained", "standard_error",
                                     "ci_low", "ci_high"}


@pytest.mark.parametrize("counts, message", [
    ([[1, 2], [3, 4]], "2 x 3"), ([[1, 2, 3], [4, 5]], "2 x 3"),
    ([[1, 2, -3], [4, 5, 6]], "non-negative"), ([[0, 0, 0], [0, 0, 0]], "n > 0"),
])
def test_crosstab_refuses_bad_counts(counts, message):
    with pytest.raises(ValueError, match=message):
        crosstab(Mechanism(0.5, 0.5), Mechanism(0.5, (0.2, 0.3, 0.5)), counts)


@pytest.mark.parametrize("truth", [
    [[0.3, 0.1, 0.1], [0.05, 0.15, 0.3]],  # a real association
    [[0.4, 0.0, 0.1], [0.1, 0.2, 0.2]],  # with an empty cell
])
def test_monte_carlo_conditional_and_cell_coverage(truth):
    """2,000 seeded surveys of n = 1,000: every conditional and every cell interval covers
    >= 0.93 (Monte Carlo SE about 0.005), and the joint's empirical covariance matches the
    formula at the true rates within 4 SEs of a sample covariance."""
    rows, cols = Mechanism(0.6, 0.5), Mechanism(0.5, (0.2, 0.3, 0.5))
    truth = np.array(truth)
    conditional = truth / truth.sum(axis=1, keepdims=True)
    lam = joint_rates(rows, cols, truth).flatten()
    n, replications = 1000, 2_000
    rng = np.random.default_rng(int(truth[0, 0] * 100))
    covered_conditional, covered_cell, joints = np.zeros((2, 3)), np.zeros((2, 3)), []
    for draw in rng.multinomial(n, lam, size=replications):
        table = crosstab(rows, cols, [[int(x) for x in draw[:3]], [int(x) for x in draw[3:]]])
        joints.append(np.array(table.joint).flatten())
        for c in table.conditional:
            covered_conditional[c.row, c.col] += c.ci_low <= conditional[c.row, c.col] <= c.ci_high
        for c in table.cells:
            covered_cell[c.row, c.col] += c.ci_low <= truth[c.row, c.col] <= c.ci_high
    assert (covered_conditional / replications).min() >= 0.93
    assert (covered_cell / replications).min() >= 0.93
    k = np.linalg.inv(np.kron(report_matrix(rows), report_matrix(cols)).T)
    cov = k @ (np.diag(lam) - np.outer(lam, lam)) @ k.T / n
    sd = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov ** 2) / (replications - 1))
    assert np.all(np.abs(np.cov(np.array(joints), rowvar=False) - cov) < 4 * sd)
