"""Cross-tabs of two questions: joint and conditional proportions from joint reported counts.

Each respondent's two answers are randomized independently, so the joint report of (A, B) has
the report matrix P_A (x) P_B (Kronecker product; P[i][j] = P(report j | true i)). In matrix
form the reported joint rates are Lam = P_A^T Pi P_B, and the unbiased estimate inverts both
sides: Pi_hat = Q_A Lam_hat Q_B^T with Q = (P^T)^-1 (van den Hout and van der Heijden 2002,
"Randomized response, statistical disclosure control and misclassification: a review",
International Statistical Review 70, on independent misclassification of several variables).
For forced response P^T x = alpha x + f (1^T x) and Q x = (x - f (1^T x)) / alpha, with f = (1 - alpha) beta.
"""

import math
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass

from ldpsurvey.shared.stats.design import Mechanism
from ldpsurvey.shared.stats.estimate import (
    DEFAULT_CONFIDENCE,
    clip_unit,
    cover,
    project_to_simplex,
    total_reports,
)
from ldpsurvey.shared.stats.intervals import z_value
from ldpsurvey.shared.stats.likelihood import floors

Matrix = tuple[tuple[float, ...], ...]

# Cells (k_A x k_B) of one cross-tab. Its covariance has cells^2 entries, so the work and the
# reply grow with the square: 256 cells make 65,536 covariance entries, a reply under
# reply_bound(MAX_CELLS) = 2.1 MB; two 64-option questions (4,096 cells) made 16.8 million,
# a 367 MiB reply. Declared pairs are checked at publish, every request before any work.
MAX_CELLS = 256
# Bytes of JSON per number at most ("-1.2345678901234567e-300" and a separator), and per
# entry of cells or conditional (six keys, two small integers, four numbers or nulls).
NUMBER_BYTES = 26
ENTRY_BYTES = 16 + 6 * 20 + 2 * 6 + 4 * NUMBER_BYTES


@dataclass(frozen=True)
class Cell:
    """The joint proportion P(A = row, B = col): p_hat the unbiased estimate (it may leave
    [0, 1]) and its standard error; p_constrained the point shown to people (the cell of the
    joint projected onto the simplex, in [0, 1]); the interval contains p_constrained."""

    row: int
    col: int
    p_hat: float
    p_constrained: float
    standard_error: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class Conditional:
    """P(B = col | A = row) = pi_row,col / pi_row.: p_hat the unbiased joint's ratio (it may
    leave [0, 1]) and its delta-method standard error, both None when the unbiased share of
    A = row is not positive; p_constrained the point shown to people, the same ratio of the
    projected joint (in [0, 1]; None when the projected share of A = row is 0); the interval
    (conditional_interval) contains p_constrained."""

    row: int
    col: int
    p_hat: float | None
    p_constrained: float | None
    standard_error: float | None
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class CrossTab:
    """joint: the k_A x k_B unbiased joint proportions (row = option of A); covariance: that of
    its row-major flattening; cells and conditional: one entry per (row, col), row-major."""

    n: int
    confidence: float
    joint: Matrix
    covariance: Matrix
    cells: tuple[Cell, ...]
    conditional: tuple[Conditional, ...]

    def as_dict(self) -> dict:
        """The fields under their own names (API, CLI --json, mock)."""
        return asdict(self)


def size_problem(k_rows: int, k_cols: int) -> str | None:
    """Why a cross-tab of a k_rows- and a k_cols-option question is refused (None: it is not):
    more than MAX_CELLS cells."""
    if k_rows * k_cols <= MAX_CELLS:
        return None
    return (f"a cross-tab of {k_rows} x {k_cols} options has {k_rows * k_cols} cells, above "
            f"the limit of {MAX_CELLS} cells per cross-tab")


def reply_bound(cells: int) -> int:
    """An upper bound on the bytes of a cross-tab's JSON reply with this many cells:
    the covariance's cells^2 numbers, the joint's cells numbers, two entries per cell, 1 KiB
    for the rest."""
    return cells * cells * NUMBER_BYTES + cells * (NUMBER_BYTES + 2 * ENTRY_BYTES) + 1024


def report(mechanism: Mechanism, x: Sequence[float]) -> tuple[float, ...]:
    """P^T x = alpha x + f (1^T x): reported rates from true proportions, extended linearly."""
    total = math.fsum(x)
    return tuple(mechanism.alpha * v + f * total for v, f in zip(x, floors(mechanism), strict=True))


def unreport(mechanism: Mechanism, x: Sequence[float]) -> tuple[float, ...]:
    """Q x = (P^T)^-1 x = (x - f (1^T x)) / alpha, the inverse of `report`."""
    total = math.fsum(x)
    return tuple((v - f * total) / mechanism.alpha for v, f in zip(x, floors(mechanism), strict=True))


def both_sides(rows: Mechanism, cols: Mechanism, matrix: Sequence[Sequence[float]], apply) -> Matrix:
    """(apply_rows (x) apply_cols) on a k_A x k_B matrix: `apply(cols, .)` on each row, then
    `apply(rows, .)` on each column."""
    by_row = [apply(cols, row) for row in matrix]
    by_col = [apply(rows, column) for column in zip(*by_row, strict=True)]
    return tuple(zip(*by_col, strict=True))


def sandwich(mechanism: Mechanism, x: Sequence[float]) -> list[list[float]]:
    """Q diag(x) Q^T for Q = (P^T)^-1, entrywise
    ([i = i'] x_i - x_i f_i' - f_i x_i' + (1^T x) f_i f_i') / alpha^2."""
    f, total, a2 = floors(mechanism), math.fsum(x), mechanism.alpha ** 2
    k = len(x)
    return [[((i == j) * x[i] - x[i] * f[j] - f[i] * x[j] + total * f[i] * f[j]) / a2
             for j in range(k)] for i in range(k)]


def second_moments(mechanism: Mechanism, options: Collection[int]) -> tuple[float, ...]:
    """g_i = E[w(r)^2 | true option i] = sum_c w(c)^2 P[i, c] for every i, the second moment
    of one report's weight w(c) = sum_{a in options} Q[a, c] = ([c in options] - F) / alpha,
    F = sum_{a in options} f_a, in the rows `options` of Q = (P^T)^-1
    (Q[a, c] = ([a = c] - f_a)/alpha, P[i, c] = alpha [i = c] + f_c: forced response, module
    docstring)."""
    f, alpha = floors(mechanism), mechanism.alpha
    forced = math.fsum(f[a] for a in options)
    return tuple(math.fsum((((c in options) - forced) / alpha) ** 2 * (alpha * (i == c) + f[c])
                           for c in range(mechanism.k)) for i in range(mechanism.k))


def cell_interval(rows: Mechanism, cols: Mechanism, a: int, b: int, p_hat: float, n: int,
                  z: float) -> tuple[float, float]:
    """The interval of the cell pi_ab: block_interval of the block (a, {b})."""
    return block_interval(rows, cols, a, (b,), p_hat, n, z)


def block_interval(rows: Mechanism, cols: Mechanism, a: int, columns: Collection[int],
                   p_hat: float, n: int, z: float) -> tuple[float, float]:
    """A continuity-corrected score interval for a block of row a's cells, here the cell pi_ab
    (Wilson 1927's construction, the values p that a normal test with the variance at p does
    not reject, with Newcombe
    1998's continuity correction, "Two-sided confidence intervals for the single proportion",
    Statistics in Medicine 17, method 4) with the worst variance given p. pi_hat_ab is the
    mean over respondents of s = Q_A[a, r_A] Q_B[b, r_B], so
    n Var(pi_hat_ab) = E[s^2] - p^2 with E[s^2] = sum_ij pi_ij g_A(a)_i g_B(b)_j
    (second_moments) <= p m + (1 - p) M, m = g_A(a)_a g_B(b)_b and M the largest product over
    the other cells. The interval is {p : (|p_hat - p| - d)^2 <= z^2/n (p m + (1 - p) M - p^2)}
    with d = 1/(2 n alpha_A alpha_B), half the largest step one report moving into the cell
    makes, each end a root of a quadratic, clipped to [0, 1]; without randomization (m = 1,
    M = 0, alpha 1) Newcombe's interval. Uncorrected, it covered 0.93 for a cell of 0.9 at
    eps 5, n = 50 (the lattice of a nearly binomial count). A block of row a's cells
    (`columns`), pi_a,columns, is the same with Q_B's rows summed over `columns`
    (second_moments), m the largest product over the block's cells and M over the rest."""
    g_rows, g_cols = second_moments(rows, (a,)), second_moments(cols, columns)
    inside = [(a, j) for j in columns]
    m = max(g_rows[i] * g_cols[j] for i, j in inside)
    other = max(g_rows[i] * g_cols[j] for i in range(rows.k) for j in range(cols.k)
                if (i, j) not in inside)
    c, step = z * z / n, 1.0 / (2.0 * n * rows.alpha * cols.alpha)

    def roots(centre: float) -> tuple[float, float]:
        """The roots of (centre - p)^2 = c (p m + (1 - p) M - p^2)."""
        quad, lin = 1.0 + c, -(2.0 * centre + c * (m - other))
        root = math.sqrt(max(lin * lin - 4.0 * quad * (centre * centre - c * other), 0.0))
        return (-lin - root) / (2.0 * quad), (-lin + root) / (2.0 * quad)

    return clip_unit(roots(p_hat - step)[0]), clip_unit(roots(p_hat + step)[1])


def joint_covariance(rows: Mechanism, cols: Mechanism, rates: Matrix, pi: Sequence[float],
                     n: int) -> Matrix:
    """Covariance of the row-major flattening of Pi_hat at reported joint rates lam, given
    with pi = K lam flattened (the joint distribution they report):
    (K diag(lam) K^T - pi pi^T) / n with K = Q_A (x) Q_B (the multinomial
    covariance of Lam_hat through the linear map). K diag(lam) K^T is assembled from `sandwich`:
    its entry ((i, j), (i', j')) is sum_a Q_A[i,a] Q_A[i',a] T_a[j][j'], with
    T_a = Q_B diag(lam_a.) Q_B^T.
    """
    ka, kb = len(rates), len(rates[0])
    inner = [sandwich(cols, row) for row in rates]
    outer = {(j, jj): sandwich(rows, [inner[a][j][jj] for a in range(ka)])
             for j in range(kb) for jj in range(kb)}
    return tuple(tuple((outer[j, jj][i][ii] - pi[i * kb + j] * pi[ii * kb + jj]) / n
                       for ii in range(ka) for jj in range(kb))
                 for i in range(ka) for j in range(kb))


def crosstab(rows: Mechanism, cols: Mechanism, joint_counts: Sequence[Sequence[int]], *,
             confidence: float = DEFAULT_CONFIDENCE) -> CrossTab:
    """The cross-tab of questions A (`rows`) and B (`cols`) from the k_A x k_B matrix of joint
    reported counts (entry [a][b]: respondents who reported a to A and b to B).

    joint: Pi_hat = Q_A Lam_hat Q_B^T, unbiased (entries may leave [0, 1]). covariance: at the
    feasible plug-in lam~ = P_A^T Pi~ P_B, Pi~ the Euclidean projection of Pi_hat onto the
    simplex, so never 0 (and the observed rates wherever Pi_hat is a distribution). Cells:
    continuity-corrected score intervals with the worst variance given the cell
    (cell_interval; the Wald interval p_hat -+ z se covered 0.86 to 0.90 at eps 3 to 5,
    n = 50, for cells of 0.1).
    Conditional: r = pi_ab / pi_a. with the delta-method (Agresti 2013, Categorical Data
    Analysis, 3rd ed., 16.1) variance g^T Sigma_a g over row a's cells,
    g_b' = ([b' = b] - r) / pi_a., as its SE; its interval bounds the ratio by the cell's and
    the row rest's simultaneous score intervals (conditional_interval; r -+ z se covered 0.90
    to 0.92 at eps 3 to 5, n = 50).

    The constrained points (p_constrained) come from Pi~: its cells, and its rows' ratios
    Pi~_ab / Pi~_a.. The projection moves every cell by the same theta before clipping at 0,
    so a cell with a small se can leave its interval; each interval is then widened to
    the nearest one that contains its constrained point (`cover`).
    """
    n = _check_joint(rows, cols, joint_counts)
    z = z_value(confidence)  # checks the level
    ka, kb = rows.k, cols.k
    joint = both_sides(rows, cols, [[c / n for c in row] for row in joint_counts], unreport)
    projected = project_to_simplex([p for row in joint for p in row])
    plug_in = both_sides(rows, cols, [projected[a * kb:(a + 1) * kb] for a in range(ka)], report)
    cov = joint_covariance(rows, cols, plug_in, projected, n)
    cells = []
    for a in range(ka):
        for b in range(kb):
            p, se, point = joint[a][b], math.sqrt(cov[a * kb + b][a * kb + b]), projected[a * kb + b]
            cells.append(Cell(a, b, p, point, se,
                              *cover(*cell_interval(rows, cols, a, b, p, n, z), point)))
    shares = [math.fsum(row) for row in joint]
    z_pair = z_value(1.0 - (1.0 - confidence) / 2.0)  # Bonferroni over a cell and its row's rest
    conditional = [_conditional(joint, cov, shares[a], projected[a * kb:(a + 1) * kb], a, b,
                                conditional_interval(rows, cols, joint, a, b, n, z_pair))
                   for a in range(ka) for b in range(kb)]
    return CrossTab(n=n, confidence=confidence, joint=joint, covariance=cov, cells=tuple(cells),
                    conditional=tuple(conditional))


def conditional_interval(rows: Mechanism, cols: Mechanism, joint: Matrix, a: int, b: int,
                         n: int, z: float) -> tuple[float, float]:
    """An interval for r = pi_ab / pi_a. = x / (x + y), x = pi_ab and y = pi_a. - pi_ab the
    rest of row a: r increases with x and decreases with y, so when x is in [x1, x2] and y in
    [y1, y2] together, r is in [x1 / (x1 + y2), x2 / (x2 + y1)] (0/0 read as the widest end).
    x's and y's intervals are block_interval's at z, Bonferroni's level for the two together
    (1 - (1 - confidence) / 2 each), so the ratio's coverage is at least the confidence
    whenever theirs are at least their level (Bonferroni's inequality; the bounding of a
    ratio by its parts' simultaneous intervals as in Fieller 1954's setting, without its
    normality)."""
    rest = [j for j in range(cols.k) if j != b]
    x1, x2 = block_interval(rows, cols, a, (b,), joint[a][b], n, z)
    y1, y2 = block_interval(rows, cols, a, rest, math.fsum(joint[a][j] for j in rest), n, z)
    return (x1 / (x1 + y2) if x1 > 0.0 else 0.0,
            x2 / (x2 + y1) if x2 + y1 > 0.0 else 1.0)


def _conditional(joint: Matrix, cov: Matrix, share: float, projected_row: Sequence[float],
                 a: int, b: int, interval: tuple[float, float]) -> Conditional:
    """P(B = b | A = a) (see crosstab) with its interval (conditional_interval, widened to
    the constrained point); share = pi_a., row a's unbiased total; projected_row = row a of
    Pi~, whose ratio is the constrained point; the unbiased ratio's delta-method SE."""
    kb = len(joint[0])
    projected_share = math.fsum(projected_row)
    point = projected_row[b] / projected_share if projected_share > 0.0 else None
    if share <= 0.0:
        return Conditional(a, b, None, point, None, *cover(*interval, point))
    r = joint[a][b] / share
    g = [((j == b) - r) / share for j in range(kb)]
    base = a * kb
    variance = math.fsum(g[j] * g[jj] * cov[base + j][base + jj] for j in range(kb) for jj in range(kb))
    se = math.sqrt(max(variance, 0.0))
    return Conditional(a, b, r, point, se, *cover(*interval, point))


def _check_joint(rows: Mechanism, cols: Mechanism, joint_counts: Sequence[Sequence[int]]) -> int:
    """n = the sum of a k_A x k_B matrix of joint counts (see total_reports)."""
    if len(joint_counts) != rows.k or any(len(row) != cols.k for row in joint_counts):
        raise ValueError(f"expected a {rows.k} x {cols.k} matrix of joint counts")
    return total_reports((c for row in joint_counts for c in row), rows, cols)
