"""The Piecewise and Hybrid mechanisms for number questions (Wang, Xiao, Yang, Zhao, Hui, Shin,
Shin and Yu, "Collecting and Analyzing Multidimensional Data with Local Differential Privacy",
ICDE 2019, section III; arXiv:1907.00782), discretized so that every probability is an exact
integer over 2^53, with the JavaScript twin web/piecewise.js. numeric.py registers them.

The continuous Piecewise Mechanism (PM). For t in [-1, 1] and z = e^(eps/2) it reports a value
in [-C, C], C = (z + 1)/(z - 1), with density p = (e^eps - z)/(2z + 2) on the window
[l(t), r(t)] = [(C + 1)t/2 - (C - 1)/2, l(t) + C - 1] and p / e^eps elsewhere: the window holds
probability z/(z + 1), E[y | t] = t, and (Wang et al., Lemma 1)

    Var_PM(t) = t^2/(z - 1) + (z + 3)/(3 (z - 1)^2).

Its sampler draws a real number, which a device can only approximate in floating point, and
such approximations leak the input (Mironov, CCS 2012). This module samples from a finite grid.

The discrete PM. The range is split into M = K + m equal cells j = 0..M-1; input position i in
0..K (K = `grid`, a power of two) has the window of cells i..i+m-1 (m = `window`), so windows
slide one cell per input step, as [l(t), r(t)] slides over [-C, C]. With integers T (`alpha` =
T/N, N = 2^53), u = T/m and v = (N - T)/M (both exact: T is chosen with m | T and M | N - T)

    P(j | i) = (u [i <= j < i + m] + v) / N,

a mixture: with probability T/N a cell of the window, uniformly, else any of the M cells,
uniformly. Specified exactly, so Python and the browser agree bit for bit:

    x  = the answer clamped to [min, max];  r = (x - min)/(max - min)   (IEEE double)
    P  = floor(r 2^53);  S = 2^53 / K;  i = floor(P / S) + [U1 < (P mod S) K]
    j  = i + floor(U2 / u)   if U2 < T,   else floor((U2 - T) / v)

Two draws always; the report is j. E[i | x] = P K / N exactly (stochastic rounding on the
power-of-two grid), within K 2^-53 of r K.

Exact epsilon. For any cell j, P(j | i)/P(j | i') is at most (u + v)/v, reached by an input
whose window holds j against one whose window does not (j = 0: i = 0 against i = 1). Every
input x is a mixture of at most two grid positions with weights independent of the report, so
over all real inputs

    epsilon = ln(1 + u / v) = ln(1 + T M / ((N - T) m)).

From a target epsilon: m = round(K e^(-eps/2)) (the continuous PM's window over its sliding
range, (C - 1)/(C + 1) = 1/z), and T the largest integer with m | T, M | N - T (a residue
class modulo lcm(m, M), by the Chinese remainder theorem: gcd(m, M) divides K, a power of two,
so it divides N) whose epsilon does not exceed the target; then T/N = 1 - 1/z up to the grid,
and the window holds T/N + (1 - T/N) m/M = z/(z + 1), as in the continuous PM.

Unbiased decoding. E[j | i] = (T i + D)/N with D = u m (m - 1)/2 + v M (M - 1)/2, exactly
affine in i, so the report's value as a share of the range

    d(j) = 1/2 + N (2j - M + 1) / (2 T K)

has E[d | i] = i / K and E[d | x] = P / N: its mean over respondents is unbiased for the mean
of r (to 2^-53 of the range, as for Duchi's mechanism, numeric.py). On the [-1, 1] scale the
cells are 2N/(TK) wide, 2z/(K(z - 1)) from the target, so the discrete PM is the continuous
one with its output rounded to cell centres: Var(2d - 1 | i) = Var_PM(t) - w^2/12 + O(1/K)
from the rounding of m (w the cell width), and the stochastic rounding of r adds at most
1/(4K^2) to Var(d). `worst_variance` computes the exact worst case; tests compare it to the
formula, bench/mechanisms.py prints both beside a simulation.

The Hybrid Mechanism (HM; Wang et al., section III-C, Lemma 4). With probability beta the
device runs the PM, otherwise Duchi's mechanism (numeric.StochasticRounding), both at the full
epsilon; beta = 1 - e^(-eps/2) makes the t^2 terms of beta Var_PM + (1 - beta) Var_Duchi cancel
(Var_Duchi(t) = ((e^eps + 1)/(e^eps - 1))^2 - t^2), so the worst case is

    (z + 3)/(3 z (z - 1)) + (e^eps + 1)^2 / (z (e^eps - 1)^2),

below both mechanisms' above eps* = ln((-5 + 2 cbrt(6353 - 405 sqrt 241) + 2 cbrt(6353 +
405 sqrt 241))/27) ~ 0.61; below eps* the paper takes beta = 0 (Duchi alone). Here beta is
B/N (`piecewise_share`), B = floor((1 - e^(-eps/2)) N), or 0 where that hybrid's exact worst
case is not below Duchi's. Four draws always:

    PM   if U1 < B: the report is j (on U2, U3; U4 is drawn and unused)
    else          : the report is M + y, y Duchi's bit (on U2, U3, U4)

The reports of the two parts are apart, so P(report | x) is B/N or (N - B)/N times one part's
probability and the ratio of two inputs is that part's: epsilon = max(PM's, Duchi's). Duchi's
bit decodes exactly as d(y) = (y - c)/(A/N), A = the yes/no keep threshold and c = (N - A) w1 /
N^2 its forced P(1), so both parts' values have mean P/N.

Estimates (both). Counters: reports of the PM part, their sum of j and of j^2 (and for HM the
Duchi reports of 0 and of 1). The mean is the mean of the decoded values (unbiased), its SE
sqrt(v / n) with v the sample variance floored at the least variance any population with that
mean gives one report (variance_floor; the design's worst case when n = 1), the interval the
normal one, mean -+ z SE, clipped to [0, 1] where the true mean lies (so never covering
less), the constrained point the mean clipped to [0, 1]; the hybrid with no piecewise part
(below eps*) is Duchi's mechanism, with its exact interval (numeric.py). fit_p_value tests whether a mean in
[0, 1] explains the unbiased one: 1 inside, else the two-sided normal p-value of the distance.
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from statistics import NormalDist
from typing import Any

from ldpsurvey.shared.mechanisms.numeric import (
    AUTO_MEASURE,
    RANGE,
    SQUARE_WAVE,
    TYPE,
    NumberAnswer,
    StochasticRounding,
    field_error,
    given,
    number_range,
    wants_distribution,
)
from ldpsurvey.shared.mechanisms.protocol import (
    Declaration,
    Fields,
    Param,
    Report,
    Settings,
    percent,
)
from ldpsurvey.shared.mechanisms.randomizer import Draw, N
from ldpsurvey.shared.stats.design import alpha_for_epsilon
from ldpsurvey.shared.stats.distributions import reported_p
from ldpsurvey.shared.stats.estimate import FIT_LEVEL, SMALL_SAMPLE, clip_unit, estimate
from ldpsurvey.shared.stats.intervals import check_confidence, z_value

PIECEWISE, HYBRID = "piecewise", "hybrid"
GRID = 2**10  # K: input positions 0..K; the rounding adds at most 1/(4K^2) to a report's variance
MAX_GRID = 2**16
# Wang et al.'s eps*, where the hybrid starts to beat Duchi's mechanism (section III-C).
EPS_STAR = math.log((-5 + 2 * (6353 - 405 * math.sqrt(241)) ** (1 / 3)
                     + 2 * (6353 + 405 * math.sqrt(241)) ** (1 / 3)) / 27)
CI_METHOD = "normal-floor"  # the normal interval, its variance floored (mean_entry)


def window_for_epsilon(eps: float, grid: int) -> int:
    """m = round(K e^(-eps/2)), at least 1: the continuous PM's window, (C - 1)/(C + 1) = 1/z of
    the range its window slides over."""
    return max(1, round(grid * math.exp(-eps / 2)))


def keep_for_epsilon(eps: float, grid: int, window: int) -> int:
    """The largest T with window | T, M | N - T and ln(1 + T M/((N - T) m)) <= eps (module
    docstring): from T = N (e^eps - 1) m / ((e^eps - 1) m + M), within its residue class."""
    cells = grid + window
    g = math.gcd(window, cells)
    step = window * cells // g  # lcm(m, M)
    base = window * (N // g * pow(window // g, -1, cells // g) % (cells // g))  # the class mod step
    grow = math.expm1(eps) * window
    keep = base + step * math.floor((N * grow / (grow + cells) - base) / step)
    while keep > 0 and _epsilon(keep, window, cells) > eps:
        keep -= step
    while keep + step < N and _epsilon(keep + step, window, cells) <= eps:
        keep += step
    if keep <= 0:
        raise ValueError(f"epsilon {eps:g} is too small for the piecewise mechanism's grid")
    return keep


def _epsilon(keep: int, window: int, cells: int) -> float:
    """ln(1 + u/v), u = T/m, v = (N - T)/M: u/v rounded once, as the browser computes it."""
    return math.log1p((keep // window) / ((N - keep) // cells))


def spread(moments: tuple[Fraction, Fraction]) -> Fraction:
    """The variance E[d^2] - E[d]^2 from the first two moments (E[d], E[d^2])."""
    mean, square = moments
    return square - mean * mean


def quadratic(variance: Any) -> tuple[Fraction, Fraction, Fraction]:
    """(a, b, c) of a quadratic a s^2 + b s + c in the share s, given exactly at s = 0, 1/2
    and 1 (`variance(s)`)."""
    v0, vh, v1 = variance(Fraction(0)), variance(Fraction(1, 2)), variance(Fraction(1))
    a = 2 * v0 - 4 * vh + 2 * v1
    return a, v1 - v0 - a, v0


def worst_of(variance: Any) -> Fraction:
    """The largest of a quadratic in the mean share s over [0, 1], given exactly at s = 0, 1/2
    and 1 (`variance(s)`): the ends, and the vertex when it is a maximum inside."""
    a, b, c = quadratic(variance)
    candidates = [c, a + b + c]
    if a < 0 and 0 < -b / (2 * a) < 1:
        s = -b / (2 * a)
        candidates.append(a * s * s + b * s + c)
    return max(candidates)


def variance_floor(curve: tuple[float, float, float], mean: float) -> float:
    """The least variance of one decoded report over all populations whose mean share is
    `mean` (in [0, 1]), for a design whose report at a point mass s has variance
    q(s) = a s^2 + b s + c (curve = (a, b, c)): Var(d) = E[q(s)] + Var(s) >= E[q(s)] (the law
    of total variance), and E[q(s)] = a E[s^2] + b mean + c with E[s^2] in [mean^2, mean] for
    s in [0, 1], so Var(d) >= q(mean) when a >= 0 (Jensen's inequality), a mean + b mean + c
    (the chord) when a < 0. Attained by a point mass (a >= 0)."""
    a, b, c = curve
    return a * (mean * mean if a >= 0 else mean) + b * mean + c


def duchi_moments(scheme: StochasticRounding, share: Fraction) -> tuple[Fraction, Fraction]:
    """E[d] and E[d^2] of Duchi's report decoded exactly, d(y) = (y - c) N / A, for a true share
    (R/N = share): y is 1 with probability lam = (A/N) share + c, c = (N - A) w1 / N^2."""
    keep, c = duchi_decoding(scheme)
    lam = keep * share + c
    low, high = -c / keep, (1 - c) / keep
    return lam * high + (1 - lam) * low, lam * high**2 + (1 - lam) * low**2


def duchi_decoding(scheme: StochasticRounding) -> tuple[Fraction, Fraction]:
    """(A/N, c): the yes/no randomizer's keep probability and forced P(1), exactly."""
    t = scheme.thresholds
    return Fraction(t.keep, N), Fraction((N - t.keep) * t.option_weights[1], N * N)


def duchi_worst_variance(scheme: StochasticRounding) -> Fraction:
    """n Var of Duchi's mean as a share of the range, worst case over the answer (at 1/2):
    lam (1 - lam) / (A/N)^2 at lam = 1/2, the continuous ((e^eps + 1)/(e^eps - 1))^2 / 4."""
    return worst_of(lambda s: spread(duchi_moments(scheme, s)))


def worst_variance(scheme: Any) -> Fraction:
    """n Var of the mean as a share of the range, worst case over the answer, of a number
    question's scheme (numeric.py's `auto` compares them)."""
    if isinstance(scheme, StochasticRounding):
        return duchi_worst_variance(scheme)
    return scheme.worst_variance()


def mean_entry(n: int, total: Fraction, squares: Fraction, curve: tuple[float, float, float],
               worst: Fraction | None, eps: float, settings: Settings) -> dict[str, Any]:
    """estimate.Estimate's keys for a mean share from n decoded values with this sum and sum of
    squares (module docstring: the normal interval clipped to [0, 1], the clipped point, the
    fit test). The variance of one value is the sample variance floored at the design's least
    variance at the clipped mean (variance_floor of `curve`, the variance at a point mass): at
    high epsilon the rare reports outside the window carry most of the variance and are often
    absent from a small sample, whose variance then falls far below the true one (issue 40:
    coverage 0.13 at n = 20, epsilon 10). `worst`, the design's worst-case variance, is the
    variance when n = 1 (and only then needed: it is exact arithmetic over the grid)."""
    check_confidence(settings.confidence)
    mean = total / n
    point = float(mean)
    sample = float((squares - total * total / n) / (n - 1)) if n > 1 else float(worst)
    se = math.sqrt(max(sample, variance_floor(curve, clip_unit(point))) / n)
    z = z_value(settings.confidence)
    outside = max(0.0, -point, point - 1.0)
    fit = 1.0 if outside == 0 else reported_p(2 * NormalDist().cdf(-outside / se))
    warning = f"small sample: n = {n} < {SMALL_SAMPLE}" if n < SMALL_SAMPLE else None
    return {"n": n, "reported_count": n, "reported_rate": point, "p_hat": point,
            "p_hat_clipped": clip_unit(point), "p_mle": clip_unit(point), "standard_error": se,
            "ci_low": clip_unit(point - z * se), "ci_high": clip_unit(point + z * se),
            "ci_method": CI_METHOD, "confidence": settings.confidence, "fit_p_value": fit,
            "design_consistent": fit >= FIT_LEVEL, "epsilon": eps, "warning": warning}


class DecodedNumber(NumberAnswer):
    """What the piecewise and hybrid mechanisms share: reports decoded to unbiased values
    (decode), the variance of one at a point mass (point_variance, each class's), the design's
    exact worst-case variance (worst_variance) and the curve of the former (variance_curve)."""

    def worst_variance(self) -> Fraction:
        """n Var of the mean as a share of the range, worst case over the answer (worst_of)."""
        return worst_of(self.point_variance)

    @cached_property
    def variance_curve(self) -> tuple[float, float, float]:
        """(a, b, c) of point_variance(s) = a s^2 + b s + c (mean_entry's floor)."""
        a, b, c = quadratic(self.point_variance)
        return float(a), float(b), float(c)

    def expected_margin(self, n: int, confidence: float = 0.95) -> float:
        """As a share of the range: z sqrt(worst_variance / n)."""
        return z_value(confidence) * math.sqrt(float(self.worst_variance()) / n)

    def cells(self, report: Report, codes: bool) -> list[str]:
        """The report with `codes`; else its unbiased value in the answer's units (design)."""
        return [str(report) if codes else repr(self.to_units(float(self.decode(report))))]


@dataclass(frozen=True)
class Piecewise(DecodedNumber):
    low: float  # the question's min
    high: float  # the question's max
    grid: int  # K, a power of two: input positions 0..K
    window: int  # m: cells in a window; M = K + m cells in all
    alpha: float  # T/N: the probability of a cell of the window rather than any cell
    unit: str | None = None
    name: str = PIECEWISE
    options: tuple[str, ...] = ()
    quantity: str = "mean"

    def __post_init__(self) -> None:
        self.check_range()
        grid, window = self.grid, self.window
        if type(grid) is not int or not 2 <= grid <= MAX_GRID or grid & (grid - 1):
            raise ValueError(f"grid must be a power of two from 2 to {MAX_GRID}")
        if type(window) is not int or not 1 <= window <= MAX_GRID:
            raise ValueError(f"window must be a whole number from 1 to {MAX_GRID}")
        keep = self.alpha * N
        if not (0 < keep < N and keep == math.floor(keep) and int(keep) % window == 0
                and (N - int(keep)) % self.outputs == 0 and N - int(keep) >= self.outputs):
            raise ValueError("alpha times 2^53 must be a whole multiple of window, leaving a "
                             "multiple of grid + window")

    @classmethod
    def from_epsilon(cls, low: float, high: float, eps: float, unit: str | None = None,
                     grid: int = GRID) -> "Piecewise":
        window = window_for_epsilon(eps, grid)
        return cls(low, high, grid, window, keep_for_epsilon(eps, grid, window) / N, unit)

    @property
    def outputs(self) -> int:
        """M = K + m: reports 0..M-1."""
        return self.grid + self.window

    @property
    def keep(self) -> int:
        """T = alpha N, exact."""
        return int(self.alpha * N)

    @property
    def in_window(self) -> int:
        """u = T/m: a window cell's extra weight."""
        return self.keep // self.window

    @property
    def anywhere(self) -> int:
        """v = (N - T)/M: every cell's weight."""
        return (N - self.keep) // self.outputs

    @property
    def epsilon(self) -> float:
        return math.log1p(self.in_window / self.anywhere)

    realized_epsilon = nominal_epsilon = epsilon  # no float formula: the manifest states integers

    @property
    def counters(self) -> int:
        """Reports, their sum and their sum of squares."""
        return 3

    def fields(self) -> dict[str, Any]:
        return {"mechanism": self.name, "min": self.low, "max": self.high, "grid": self.grid,
                "window": self.window, "alpha": self.alpha, **self.unit_fields()}

    def position(self, truth: float) -> tuple[int, int]:
        """(floor(P/S), (P mod S) K): the lower grid position and the threshold of rounding up."""
        step = N // self.grid
        p = self.rounding_threshold(truth)
        return p // step, p % step * self.grid

    def cell(self, position: int, u: int) -> int:
        """The report of grid position i on draw U2 (module docstring)."""
        keep = self.keep
        return position + u // self.in_window if u < keep else (u - keep) // self.anywhere

    def randomize(self, truth: Any, draw: Draw) -> Report:
        base, threshold = self.position(self.check_truth(truth))
        return self.cell(base + (draw() < threshold), draw())

    def probability(self, report: int, position: int) -> Fraction:
        """P(j | i), exactly."""
        inside = position <= report < position + self.window
        return Fraction(self.in_window * inside + self.anywhere, N)

    def decode(self, report: int) -> Fraction:
        """d(j) = 1/2 + N (2j - M + 1)/(2 T K): the report's unbiased share of the range."""
        return Fraction(1, 2) + Fraction(N * (2 * report - self.outputs + 1),
                                         2 * self.keep * self.grid)

    def moments(self, share: Fraction) -> tuple[Fraction, Fraction]:
        """E[d] and E[d^2] at a grid position i = share K (d = 1/2 + s (j - h), s = N/(T K),
        h = (M - 1)/2; E[(j - h)^2 | i] from sum of squares over the window and all cells)."""
        position = share * self.grid
        s = Fraction(N, self.keep * self.grid)
        h = Fraction(self.outputs - 1, 2)
        m, cells = self.window, self.outputs
        mean = (self.keep * position + self.in_window * m * (m - 1) // 2
                + self.anywhere * cells * (cells - 1) // 2) / Fraction(N) - h
        centre = position + Fraction(m - 1, 2) - h
        square = (self.in_window * (m * centre**2 + Fraction(m * (m * m - 1), 12))
                  + self.anywhere * Fraction(cells * (cells * cells - 1), 12)) / N
        return Fraction(1, 2) + s * mean, Fraction(1, 4) + s * mean + s * s * square

    def point_variance(self, share: Fraction) -> Fraction:
        """Var(d) at a grid position i = share K (convex in i, so the worst case is at the
        ends); between positions the rounding adds <= 1/(4K^2)."""
        return spread(self.moments(share))

    def check_report(self, value: Any) -> str | None:
        if type(value) is not int or not 0 <= value < self.outputs:
            return f"must be a whole number from 0 to {self.outputs - 1}"
        return None

    def largest_report(self) -> Report:
        return self.outputs - 1

    def tally(self, report: Report) -> Iterable[tuple[int, int]]:
        return ((0, 1), (1, report), (2, report * report))

    def sums(self, counts: Sequence[int]) -> tuple[Fraction, Fraction]:
        """The sum of the decoded values and of their squares, from the counters n, sum j,
        sum j^2: d = a + s j with s = N/(T K), a = 1/2 - s (M - 1)/2."""
        n, total, squares = counts[:3]
        s = Fraction(N, self.keep * self.grid)
        a = Fraction(1, 2) - s * Fraction(self.outputs - 1, 2)
        return a * n + s * total, a * a * n + 2 * a * s * total + s * s * squares

    def summary(self, counts: Sequence[int], settings: Settings) -> dict[str, Any]:
        """The mean from the counters (module docstring), in the answer's units."""
        n = counts[0]
        entry = None if n == 0 else mean_entry(
            n, *self.sums(counts), self.variance_curve,
            self.worst_variance() if n == 1 else None, self.epsilon, settings)
        return self.document(n, entry, settings)

    def simulate_many(self, truths: Any, rng: Any) -> Any:
        """The device's reports of an array of answers, drawn with a NumPy generator: the same
        integer rule on uniform integers in [0, 2^53)."""
        import numpy as np

        limits = self.thresholds_many(truths)
        step = N // self.grid
        up = rng.integers(0, N, size=len(limits), dtype=np.int64) < limits % step * self.grid
        position = limits // step + up
        u = rng.integers(0, N, size=len(limits), dtype=np.int64)
        return np.where(u < self.keep, position + u // self.in_window,
                        (u - self.keep) // self.anywhere)

    def simulate(self, truths: Any, rng: Any) -> list[Report]:
        return self.simulate_many(truths, rng).tolist()

    def best_guess(self) -> float:
        """Whether the answer is min or max, both equally likely, guessing the likelier from the
        report: (1/2) sum_j max(P(j | 0), P(j | K)) = (|W0 u W_K| u + M v) / (2N)."""
        union = min(self.outputs, 2 * self.window)
        return (union * self.in_window + self.outputs * self.anywhere) / (2 * N)

    @property
    def window_chance(self) -> float:
        """The probability the report is in the answer's window: T/N + (1 - T/N) m/M."""
        return self.alpha + (1 - self.alpha) * self.window / self.outputs

    def design(self) -> dict[str, Any]:
        return {**self.fields(), "epsilon": self.epsilon, "outputs": self.outputs,
                "report": f"a cell from 0 to {self.outputs - 1}: the answer is rounded at random "
                          f"to a position i from 0 to {self.grid}, then the cell is one of i "
                          f"to i + {self.window - 1} with probability alpha, else any cell",
                "cells": "the report's unbiased value min + (max - min)(1/2 + (2j - M + 1) / "
                         "(2 alpha grid)), in the answer's units and often outside [min, max]: "
                         "their mean is the unbiased mean (codes: the cell j)"}

    def shown_report(self, report: Report) -> str:
        return f"a randomized cell {report} of 0 to {self.outputs - 1}"

    def plain_report(self, report: Report) -> str:
        return "a coded number"

    def note(self) -> tuple[str, str]:
        return (f"The server receives one number from 0 to {self.outputs - 1}: with "
                f"{percent(self.window_chance)} probability one of the {self.window} near your "
                f"number, else any of them at random.",
                f"your number is {self.high:g} rather than {self.low:g}")


@dataclass(frozen=True)
class Hybrid(DecodedNumber):
    low: float
    high: float
    grid: int  # the piecewise part's K, m and T/N (Piecewise)
    window: int
    alpha: float
    duchi_alpha: float  # Duchi's part: the yes/no randomizer's keep probability
    piecewise_share: float  # beta = B/N: the probability of the piecewise part (0: Duchi alone)
    unit: str | None = None
    name: str = HYBRID
    options: tuple[str, ...] = ()
    quantity: str = "mean"

    def __post_init__(self) -> None:
        self.piecewise  # noqa: B018 -- each part refuses parameters with no privacy
        self.duchi  # noqa: B018
        share = self.piecewise_share * N
        if not (0 <= share < N and share == math.floor(share)):
            raise ValueError("piecewise_share must be in [0, 1), a whole number over 2^53")

    @classmethod
    def from_epsilon(cls, low: float, high: float, eps: float, unit: str | None = None,
                     grid: int = GRID) -> "Hybrid":
        """beta = 1 - e^(-eps/2) (Wang et al.), or 0 where that is no better than Duchi alone."""
        pm = Piecewise.from_epsilon(low, high, eps, unit, grid)
        duchi_alpha = alpha_for_epsilon(eps, 0.5)
        mixed = cls(low, high, pm.grid, pm.window, pm.alpha, duchi_alpha,
                    math.floor(-math.expm1(-eps / 2) * N) / N, unit)
        if mixed.worst_variance() < duchi_worst_variance(mixed.duchi):
            return mixed
        return cls(low, high, pm.grid, pm.window, pm.alpha, duchi_alpha, 0.0, unit)

    @cached_property
    def piecewise(self) -> Piecewise:
        return Piecewise(self.low, self.high, self.grid, self.window, self.alpha, self.unit)

    @cached_property
    def duchi(self) -> StochasticRounding:
        return StochasticRounding(self.low, self.high, self.duchi_alpha, self.unit)

    @property
    def share(self) -> int:
        """B = beta N."""
        return int(self.piecewise_share * N)

    def _with_duchi(self, duchi: float) -> float:
        """The design's epsilon from its Duchi part's: the larger of both parts' when the
        piecewise part is ever sent (their reports do not overlap), else Duchi's alone."""
        return max(self.piecewise.epsilon, duchi) if self.share else duchi

    @property
    def epsilon(self) -> float:
        return self._with_duchi(self.duchi.epsilon)

    @property
    def realized_epsilon(self) -> float:
        return self._with_duchi(self.duchi.realized_epsilon)

    @property
    def nominal_epsilon(self) -> float:
        return self._with_duchi(self.duchi.nominal_epsilon)

    @property
    def counters(self) -> int:
        """The piecewise part's three, then Duchi's reports of 0 and of 1."""
        return 5

    def fields(self) -> dict[str, Any]:
        return {"mechanism": self.name, "min": self.low, "max": self.high, "grid": self.grid,
                "window": self.window, "alpha": self.alpha, "duchi_alpha": self.duchi_alpha,
                "piecewise_share": self.piecewise_share, **self.unit_fields()}

    def randomize(self, truth: Any, draw: Draw) -> Report:
        if draw() < self.share:
            report = self.piecewise.randomize(truth, draw)
            draw()  # four draws always
            return report
        return self.piecewise.outputs + self.duchi.randomize(truth, draw)

    def probability(self, report: int, position: int) -> Fraction:
        """P(report | grid position i), exactly (Duchi's part at R = i N / K)."""
        beta = Fraction(self.share, N)
        if report < self.piecewise.outputs:
            return beta * self.piecewise.probability(report, position)
        keep, c = duchi_decoding(self.duchi)
        one = keep * Fraction(position, self.grid) + c
        return (1 - beta) * (one if report - self.piecewise.outputs else 1 - one)

    def decode(self, report: int) -> Fraction:
        """A report's unbiased share: the piecewise part's d(j), or Duchi's (y - c) N / A."""
        if report < self.piecewise.outputs:
            return self.piecewise.decode(report)
        keep, c = duchi_decoding(self.duchi)
        return (report - self.piecewise.outputs - c) / keep

    def point_variance(self, share: Fraction) -> Fraction:
        """beta E_PM[d^2] + (1 - beta) E_Duchi[d^2] - s^2 at the share s (a quadratic, nearly
        flat: beta cancels the s^2 terms up to the grid)."""
        beta = Fraction(self.share, N)
        square = self.piecewise.moments(share)[1] if beta else 0
        return beta * square + (1 - beta) * duchi_moments(self.duchi, share)[1] - share * share

    def check_report(self, value: Any) -> str | None:
        first = 0 if self.share else self.piecewise.outputs
        if type(value) is not int or not first <= value < self.piecewise.outputs + 2:
            return f"must be a whole number from {first} to {self.piecewise.outputs + 1}"
        return None

    def largest_report(self) -> Report:
        return self.piecewise.outputs + 1

    def tally(self, report: Report) -> Iterable[tuple[int, int]]:
        outputs = self.piecewise.outputs
        return self.piecewise.tally(report) if report < outputs else ((report - outputs + 3, 1),)

    def summary(self, counts: Sequence[int], settings: Settings) -> dict[str, Any]:
        """The mean of both parts' decoded values (module docstring), in the answer's units;
        below eps* (no piecewise part) Duchi's estimate and exact interval."""
        n = counts[0] + counts[3] + counts[4]
        if n == 0:
            return self.document(0, None, settings)
        if not self.share:  # Duchi's mechanism alone: its exact interval (numeric.py)
            return self.document(n, estimate(self.duchi.mechanism, counts[3:5],
                                             confidence=settings.confidence,
                                             method=settings.method)[1].as_dict(), settings)
        total, squares = self.piecewise.sums(counts)
        for y in (0, 1):
            value = self.decode(self.piecewise.outputs + y)
            total += counts[3 + y] * value
            squares += counts[3 + y] * value * value
        return self.document(n, mean_entry(n, total, squares, self.variance_curve,
                                           self.worst_variance() if n == 1 else None,
                                           self.epsilon, settings), settings)

    def simulate(self, truths: Any, rng: Any) -> list[Report]:
        """Each part's device distribution (Piecewise.simulate_many, StochasticRounding
        .simulate), one chosen per answer with probability B/N."""
        import numpy as np

        pm = self.piecewise.simulate_many(truths, rng)
        duchi = np.asarray(self.duchi.simulate(truths, rng)) + self.piecewise.outputs
        chosen = rng.integers(0, N, size=len(pm), dtype=np.int64) < self.share
        return np.where(chosen, pm, duchi).tolist()

    def best_guess(self) -> float:
        """Min or max, both equally likely, from one report: each part's accuracy, weighted."""
        beta = self.share / N
        return beta * self.piecewise.best_guess() + (1 - beta) * self.duchi.best_guess()

    def design(self) -> dict[str, Any]:
        outputs = self.piecewise.outputs
        return {**self.fields(), "epsilon": self.epsilon, "outputs": outputs + 2,
                "report": f"with probability piecewise_share the piecewise mechanism's cell "
                          f"(0 to {outputs - 1}; see mechanism piecewise with grid, window and "
                          f"alpha), else {outputs} + Duchi's bit (alpha = duchi_alpha)",
                "cells": "the report's unbiased value in the answer's units, often outside "
                         "[min, max]: their mean is the unbiased mean (codes: the report)"}

    def shown_report(self, report: Report) -> str:
        outputs = self.piecewise.outputs
        if report < outputs:
            return self.piecewise.shown_report(report)
        return self.duchi.shown_report(report - outputs)

    def plain_report(self, report: Report) -> str:
        outputs = self.piecewise.outputs
        if report < outputs:
            return self.piecewise.plain_report(report)
        return self.duchi.plain_report(report - outputs)

    def note(self) -> tuple[str, str]:
        pm, duchi = self.piecewise.note()[0], self.duchi.note()[0]
        if not self.share:
            return duchi, self.duchi.note()[1]
        return (f"Your device picks one of two ways at random ({percent(self.share / N)} the "
                f"first). {pm} Or: {duchi[0].lower()}{duchi[1:]}",
                f"your number is {self.high:g} rather than {self.low:g}")


def piecewise_for(kind: str, options: tuple[str, ...], fields: Fields) -> Piecewise:
    """The piecewise mechanism from min, max, unit and grid, window, alpha (a manifest) or
    epsilon."""
    low, high, unit = number_range(fields)
    named = given(fields, PIECEWISE_PARAMS)
    try:
        if named:
            return Piecewise(low, high, fields.count("grid", 2, MAX_GRID),
                             fields.count("window", 1, MAX_GRID),
                             fields.number("alpha", 0.0, 1.0), unit)
        return Piecewise.from_epsilon(low, high, fields.epsilon(), unit)
    except ValueError as exc:
        raise field_error(exc, named) from None


def hybrid_for(kind: str, options: tuple[str, ...], fields: Fields) -> Hybrid:
    """The hybrid from min, max, unit and grid, window, alpha, duchi_alpha, piecewise_share (a
    manifest) or epsilon."""
    low, high, unit = number_range(fields)
    named = given(fields, HYBRID_PARAMS)
    try:
        if named:
            return Hybrid(low, high, fields.count("grid", 2, MAX_GRID),
                          fields.count("window", 1, MAX_GRID), fields.number("alpha", 0.0, 1.0),
                          fields.number("duchi_alpha", 0.0, 1.0),
                          fields.number("piecewise_share", -1.0, 1.0), unit)
        return Hybrid.from_epsilon(low, high, fields.epsilon(), unit)
    except ValueError as exc:
        raise field_error(exc, named) from None


def choose(options: tuple[str, ...], fields: Fields) -> tuple[str, dict[str, float] | None]:
    """`auto`: Duchi's, the piecewise and the hybrid mechanism built from the question's
    epsilon, and the one with the lowest worst-case variance of the mean (duchi on a tie, then
    piecewise); square_wave, comparing nothing, when the question asks for its distribution
    (numeric.wants_distribution)."""
    if wants_distribution("auto", fields):
        return SQUARE_WAVE, None
    low, high, unit = number_range(fields)
    try:
        eps = fields.epsilon()
        candidates = {"duchi": StochasticRounding(low, high, alpha_for_epsilon(eps, 0.5), unit),
                      PIECEWISE: Piecewise.from_epsilon(low, high, eps, unit),
                      HYBRID: Hybrid.from_epsilon(low, high, eps, unit)}
    except ValueError as exc:
        raise field_error(exc, []) from None
    variances = {name: float(worst_variance(scheme)) for name, scheme in candidates.items()}
    return min(variances, key=variances.__getitem__), variances  # the first, on a tie


GRID_PARAMS = (Param("grid", "integer", "piecewise, hybrid, square_wave: K, the answer "
                     "rounded at random to one of K + 1 positions", 2, MAX_GRID),
               Param("window", "integer", "piecewise, hybrid, square_wave: m, the cells of a "
                     "window (K + m cells in all)", 1, MAX_GRID),
               Param("alpha", "number", "piecewise, hybrid, square_wave: P(the report is drawn "
                     "from the window around the answer)", 0.0, 1.0))
PIECEWISE_PARAMS = (*RANGE, *GRID_PARAMS)
# Asking for the distribution (square_wave.py): auto's, and square_wave's.
DISTRIBUTION = (Param("distribution", "flag", "numeric: estimate the answers' distribution "
                      "(the square wave mechanism) besides their mean"),
                Param("bins", "integer", "square_wave: the histogram's equal bins of [min, "
                      "max], a power of two", 2, 64))
HYBRID_PARAMS = (*PIECEWISE_PARAMS,
                 Param("duchi_alpha", "number", "hybrid: the alpha of Duchi's part", 0.0, 1.0),
                 Param("piecewise_share", "number", "hybrid: P(the piecewise part reports)",
                       -1.0, 1.0))
DECLARATIONS = (
    Declaration(PIECEWISE, (TYPE,), "the piecewise mechanism on a grid (Wang et al.)",
                PIECEWISE_PARAMS, piecewise_for, since=7),
    Declaration(HYBRID, (TYPE,), "the hybrid of the piecewise and Duchi's mechanisms (Wang et "
                "al.)", HYBRID_PARAMS, hybrid_for, since=7),
    Declaration("auto", (TYPE,), "the lowest worst-case variance of the mean at the question's "
                "epsilon", (*RANGE, *DISTRIBUTION), default=False, choose=choose, measure=AUTO_MEASURE))
