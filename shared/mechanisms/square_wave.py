"""The Square Wave mechanism for a number question's distribution (Li, Lopuhaa-Zwakenberg, Li,
Skoric, Wang and Li, "Estimating Numerical Distributions under Local Differential Privacy",
SIGMOD 2020, section 4), on an exact integer grid, with the JavaScript twin web/square_wave.js.
numeric.py registers it as mechanism "square_wave" (and `auto` picks it when the question
asks for a distribution).

The continuous mechanism maps the answer to v in [0, 1] and reports a value in [-b, 1 + b] with
density p on [v - b, v + b] and q = p / e^eps elsewhere, where (Li et al., eq. (5))

    b = (eps e^eps - e^eps + 1) / (2 e^eps (e^eps - 1 - eps)),

the half-width that maximizes the mutual information between answer and report (b -> 1/2 as
eps -> 0; b ~ (eps - 1) / (2 e^eps) as eps grows).

Discretized, it is the piecewise module's sampler with another window: the answer is rounded
at random to a position i of 0..K (K = `grid`, a power of two; P = floor(r 2^53), i =
floor(P / S) + [U1 < (P mod S) K], S = 2^53 / K), and the report is a cell j of 0..M - 1,
M = K + m, with

    P(j | i) = (u [i <= j < i + m] + v) / N,    T = m u,  N - T = M v  (all integers),

drawn as j = i + floor(U2 / u) if U2 < T, else floor((U2 - T) / v): two draws always, the same
rule, code and vectors as piecewise.Piecewise (its docstring derives it). Cell j's centre is
the share (j - (m - 1)/2) / K, so the reports span [-b, 1 + b] with 2b = m / K:

    m = max(1, round(2 b K)),

and T is the largest integer with m | T and M | N - T whose epsilon does not exceed the target
(piecewise.keep_for_epsilon), so the window's density is e^eps times the rest's up to the grid.
Exact epsilon, as for the piecewise mechanism: the largest ratio P(j | i) / P(j | i') is
(u + v) / v, and every real answer is a mixture of two positions with weights independent of
the report, so

    epsilon = ln(1 + u / v),

computed from the manifest's integers (never the float formula) by both devices.

Estimates. The counters are the M report counts. From them (deconvolution.py): EMS, the
paper's expectation-maximization with smoothing, for the histogram on `bins` equal bins of
[min, max] and the quartiles' point estimates; exact, distribution-free intervals for each bin's
share and for the median and quartiles (one-sided Clopper-Pearson bounds on the reported CDF
turned into bounds on the answers' CDF through the known channel; deconvolution.py derives them
and says what they cost at low epsilon), each point clipped into its interval; and the mean, as
the piecewise mechanism's: the reports decoded to unbiased values (E[j | i] is affine in i) with
piecewise.mean_entry's interval.
"""

import copy
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import accumulate
from typing import Any

from ldpsurvey.shared.mechanisms.piecewise import Piecewise, keep_for_epsilon, mean_entry
from ldpsurvey.shared.mechanisms.protocol import FieldError, Fields, Report, Settings
from ldpsurvey.shared.mechanisms.randomizer import N
from ldpsurvey.shared.stats.deconvolution import (
    Window,
    bin_bounds,
    cdf_bounds,
    ems,
    quantile_bounds,
    reported_bounds,
)

SQUARE_WAVE = "square_wave"
GRID = 256  # K: positions 0..K, reports 0..K + m - 1 (the counters)
MAX_GRID = 1024
BINS = 16
MAX_BINS = 64
QUANTILES = (0.25, 0.5, 0.75)
CI_METHOD = "clopper-pearson through the window (exact)"


def half_width(eps: float) -> float:
    """b = (eps e^eps - e^eps + 1) / (2 e^eps (e^eps - 1 - eps)) (Li et al., eq. (5))."""
    return (eps * math.exp(eps) - math.expm1(eps)) / (2 * math.exp(eps) * (math.expm1(eps) - eps))


def window_for_epsilon(eps: float, grid: int) -> int:
    """m = max(1, round(2 b K)): the window's cells, 2b of the range."""
    return max(1, round(2 * half_width(eps) * grid))


def is_power_of_two(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high and not value & (value - 1)


@dataclass(frozen=True)
class SquareWave(Piecewise):
    name: str = SQUARE_WAVE
    bins: int = BINS  # the histogram's equal bins of [min, max], a power of two dividing grid

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.grid > MAX_GRID:
            raise ValueError(f"grid must be a power of two from 2 to {MAX_GRID}")
        if not is_power_of_two(self.bins, 2, min(MAX_BINS, self.grid)):
            raise ValueError(f"bins must be a power of two from 2 to {min(MAX_BINS, self.grid)}")

    @classmethod
    def from_epsilon(cls, low: float, high: float, eps: float, unit: str | None = None,
                     grid: int = GRID, bins: int = BINS) -> "SquareWave":
        window = window_for_epsilon(eps, grid)
        return cls(low, high, grid, window, keep_for_epsilon(eps, grid, window) / N, unit,
                   bins=bins)

    @property
    def counters(self) -> int:
        """The count of each report, 0..M - 1."""
        return self.outputs

    def fields(self) -> dict[str, Any]:
        return {**super().fields(), "bins": self.bins}

    def tally(self, report: Report) -> Iterable[tuple[int, int]]:
        return ((report, 1),)

    @cached_property
    def channel(self) -> Window:
        return Window(self.grid, self.window, self.in_window, self.anywhere, N)

    def summary(self, counts: Sequence[int], settings: Settings) -> dict[str, Any]:
        """The mean and the distribution (module docstring), in the answer's units; the
        distribution of the same counts at the same confidence is computed once (EMS and the
        bounds take a second or more; the results page, its charts and its CSV ask again)."""
        if sum(counts) == 0:
            return {**self.document(0, None, settings), "distribution": None}
        return {**self.document(sum(counts), self.mean(counts, settings), settings),
                "distribution": copy.deepcopy(
                    distribution_of(self, tuple(counts), settings.confidence))}

    def intervals(self, counts: Sequence[int], confidence: float, rates: Any = reported_bounds
                  ) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
        """The intervals, as shares of the range, of the quartiles (QUANTILES) and of each bin's
        share (deconvolution.py), from one-sided bounds on the reported CDF (`rates(counts,
        delta)`: reported_bounds; the benchmark passes the same bounds from SciPy)."""
        tail = 1 - confidence
        lower, upper = cdf_bounds(self.channel, rates(counts, tail / 2))
        quantiles = [quantile_bounds(lower, upper, q) for q in QUANTILES]
        lower, upper = cdf_bounds(self.channel, rates(counts, tail / 4))
        step = self.grid // self.bins
        return quantiles, [bin_bounds(lower, upper, b * step, (b + 1) * step)
                           for b in range(self.bins)]

    def distribution(self, counts: Sequence[int], confidence: float) -> dict[str, Any]:
        """The histogram and the quartiles with their intervals, each EMS point clipped into its
        interval, in the answer's units (bins' shares as shares)."""
        x = ems(self.channel, counts)
        cdf = [0.0, *accumulate(x)]  # cdf[i + 1] = the EMS estimate of F(i)
        quantile_intervals, bin_intervals = self.intervals(counts, confidence)
        quantiles = []
        for q, (low, high) in zip(QUANTILES, quantile_intervals, strict=True):
            point = next(i for i in range(self.grid + 1) if cdf[i + 1] >= q - 1e-12) / self.grid
            quantiles.append({"q": q, "value": self.to_units(min(high, max(low, point))),
                              "ci_low": self.to_units(low), "ci_high": self.to_units(high)})
        bins, step = [], self.grid // self.bins
        for b, (low, high) in enumerate(bin_intervals):
            first, last = b * step, (b + 1) * step
            # the positions inside, and half of each edge's (position i holds answers within
            # 1/K of i/K), all of position 0's and K's
            share = (cdf[last] - cdf[first + 1] + x[first] * (1 if b == 0 else 0.5)
                     + x[last] * (1 if b == self.bins - 1 else 0.5))
            bins.append({"low": self.to_units(first / self.grid),
                         "high": self.to_units(last / self.grid),
                         "share": min(high, max(low, share)), "ci_low": low, "ci_high": high})
        return {"bins": bins, "quantiles": quantiles, "ci_method": CI_METHOD,
                "confidence": confidence}

    def mean(self, counts: Sequence[int], settings: Settings) -> dict[str, Any]:
        """The mean's entry (shares of the range), as the piecewise mechanism's from n, sum j
        and sum j^2 (piecewise.mean_entry)."""
        n = sum(counts)
        moments = [n, sum(j * c for j, c in enumerate(counts)),
                   sum(j * j * c for j, c in enumerate(counts))]
        return mean_entry(n, *self.sums(moments), self.variance_curve,
                          self.worst_variance() if n == 1 else None, self.epsilon, settings)

    def design(self) -> dict[str, Any]:
        return {**super().design(),
                "report": f"a cell from 0 to {self.outputs - 1}: the answer is rounded at random "
                          f"to a position i from 0 to {self.grid}, then the cell is one of i "
                          f"to i + {self.window - 1} with probability alpha, else any cell (the "
                          "square wave: 2b = window / grid of the range around the answer)",
                "histogram": f"a histogram on {self.bins} equal bins of [min, max], the median "
                             "and quartiles (EMS; exact intervals: docs/statistics.md)"}



@lru_cache(maxsize=64)
def distribution_of(scheme: SquareWave, counts: tuple[int, ...],
                    confidence: float) -> dict[str, Any]:
    """scheme.distribution, kept for the last 64 (scheme, counts, confidence): a survey's
    counters change only at a release."""
    return scheme.distribution(counts, confidence)


def square_wave_for(low: float, high: float, unit: str | None, fields: Fields) -> SquareWave:
    """The scheme from a manifest's grid, window, alpha and bins, or from a definition's epsilon
    and bins (default BINS). FieldError naming the field."""
    bins = fields.count("bins", 2, MAX_BINS, BINS)
    given = [key for key in ("grid", "window", "alpha") if fields.has(key)]
    try:
        if not given:
            return SquareWave.from_epsilon(low, high, fields.epsilon(), unit, bins=bins)
        return SquareWave(low, high, fields.count("grid", 2, MAX_GRID),
                          fields.count("window", 1, MAX_GRID + 1), fields.number("alpha", 0.0, 1.0),
                          unit, bins=bins)
    except ValueError as exc:
        if isinstance(exc, FieldError):
            raise
        named = str(exc).split()[0]
        raise FieldError(named if named in (*given, "bins") else "alpha" if given else "epsilon",
                         str(exc)) from None


def distribution_rows(question: dict[str, Any]) -> list[dict[str, Any]]:
    """An estimates document's question's distribution (none: []) as rows beside its options
    (the results page's CSV, the CLI): each quartile (its value in the answer's units) and each
    bin's share, as p_mle with its interval."""
    distribution = question.get("distribution")
    if not distribution:
        return []
    names = {0.25: "lower quartile", 0.5: "median", 0.75: "upper quartile"}
    method = distribution["ci_method"]
    return [*({"option": names[p["q"]], "p_mle": p["value"], "ci_low": p["ci_low"],
               "ci_high": p["ci_high"], "ci_method": method} for p in distribution["quantiles"]),
            *({"option": f"share from {b['low']:g} to {b['high']:g}", "p_mle": b["share"],
               "ci_low": b["ci_low"], "ci_high": b["ci_high"], "ci_method": method}
              for b in distribution["bins"])]
