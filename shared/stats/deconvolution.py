"""A distribution seen through a window channel, and its finite-sample bounds: the estimates of
the Square Wave mechanism (square_wave.py), whose device reports cell j of 0..M-1 for a grid
position i of 0..K (M = K + m) with

    P(j | i) = (v + u [i <= j < i + m]) / N,        m u + M v = N,

all integers (`Window`). Everything here is on positions; square_wave.py maps them to the
answer's units (position i is the share i/K of the range).

EMS (Li, Lopuhaa-Zwakenberg, Li, Skoric, Wang and Li, "Estimating Numerical Distributions
under Local Differential Privacy", SIGMOD 2020, section 5.2): expectation-maximization of the
multinomial likelihood of the report counts over distributions x on the positions, each step
followed by a smoothing with binomial weights (1, 2, 1)/4 (at the ends (2, 1)/3, then
renormalized), from the uniform distribution, until an iteration raises the log-likelihood by
less than TOLERANCE (or MAX_ITERATIONS). The channel is banded, so one step costs O(K + M):

    y_j  = (v + u W_j) / N,           W_j = x_{j-m+1} + ... + x_j   (prefix sums)
    x_i <- x_i (v S + u (r_i + ... + r_{i+m-1})) / (N n),   r_j = c_j / y_j,  S = sum of r_j.

EMS is a smoothed point estimate with no finite-sample guarantee; the intervals below are not
built from it (a bootstrap of it would not be exact either).

Bounds on the CDF F(t) = P(position <= t), exact and distribution-free. The reports at or
below s have probability

    P(j <= s) = ((s + 1) v + u (F(s) + F(s - 1) + ... + F(s - m + 1))) / N,

an average of m values of F. F is non-decreasing, so with a = T/N = m u / N

    P(j <= t + m - 1) >= (t + m) v / N + a F(t)     and     P(j <= t) <= (t + 1) v / N + a F(t).

One-sided Clopper-Pearson bounds (Clopper and Pearson 1934) on those two binomial proportions,
each failing with probability at most delta, give U(t) >= F(t) and L(t) <= F(t), each failing
with probability at most delta at every fixed t (`cdf_bounds`). The price of exactness is the
window: at any n, F is known only up to an average over m positions (2b of the range), so these
bounds stay wide at low epsilon, where m is large, and narrow to the sampling error alone as
epsilon grows (m = 1 at epsilon 8 on the default grid).

A quantile (`quantile_bounds`), by test inversion: the q-quantile x* (the least x with
P(share <= x) >= q) of the true share r, where position i = floor(r K) + (0 or 1), satisfies
F(floor(x* K) + 1) >= q and F(ceil(x* K) - 2) < q, two statements at positions fixed by the truth;
a candidate x is kept unless U at its first position is below q or L at its second reaches q,
so the true x* is dropped with probability at most 2 delta. The interval is the hull of the
kept candidates. A bin's share (`bin_bounds`), P(lo <= r < hi) with lo = l/K, hi = h/K, lies
between F(h - 1) - F(l) and F(h) - F(l - 1), since {position <= i - 1} implies r < i/K implies
{position <= i}: its bounds take U and L at delta = (1 - confidence)/4, each end failing with
probability at most 2 delta. Each interval covers with probability at least the confidence
(separately: the median's, each quartile's, each bin's), at every distribution and every n.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from ldpsurvey.shared.stats.distributions import beta_quantile

TOLERANCE = 1e-7  # EMS stops when an iteration raises the log-likelihood per report by less
MAX_ITERATIONS = 5000


@dataclass(frozen=True)
class Window:
    """The channel P(j | i) = (anywhere + in_window [i <= j < i + window]) / total."""

    grid: int  # K: positions 0..K
    window: int  # m
    in_window: int  # u
    anywhere: int  # v
    total: int  # N = m u + M v

    @property
    def outputs(self) -> int:
        return self.grid + self.window

    def reported(self, x: Sequence[float]) -> list[float]:
        """y_j, the probability of each report under the distribution x on the positions."""
        prefix = [0.0, *accumulate(x)]
        m, k = self.window, self.grid
        return [(self.anywhere + self.in_window * (prefix[min(j, k) + 1] - prefix[max(0, j - m + 1)]))
                / self.total for j in range(self.outputs)]


def smooth(x: Sequence[float]) -> list[float]:
    """Binomial smoothing (1, 2, 1)/4, (2, 1)/3 at the ends, renormalized to sum 1."""
    last = len(x) - 1
    out = [(2 * x[0] + x[1]) / 3, *((x[i - 1] + 2 * x[i] + x[i + 1]) / 4 for i in range(1, last)),
           (x[last - 1] + 2 * x[last]) / 3]
    total = math.fsum(out)
    return [value / total for value in out]


def ems(channel: Window, counts: Sequence[int]) -> list[float]:
    """The EMS estimate of the distribution on positions 0..K from the report counts (module
    docstring)."""
    n = sum(counts)
    k, m = channel.grid, channel.window
    x = [1.0 / (k + 1)] * (k + 1)
    before = -math.inf
    for _ in range(MAX_ITERATIONS):
        y = channel.reported(x)
        likelihood = math.fsum(c * math.log(p) for c, p in zip(counts, y, strict=True) if c) / n
        if likelihood - before < TOLERANCE:
            break
        before = likelihood
        ratio = [c / p for c, p in zip(counts, y, strict=True)]
        prefix = [0.0, *accumulate(ratio)]
        everywhere = channel.anywhere * prefix[-1]
        x = smooth([x[i] * (everywhere + channel.in_window * (prefix[i + m] - prefix[i]))
                    / (channel.total * n) for i in range(k + 1)])
    return x


def reported_bounds(counts: Sequence[int], delta: float) -> tuple[list[float], list[float]]:
    """One-sided Clopper-Pearson bounds on P(j <= s), s = 0..M-1, each failing with
    probability at most delta."""
    n, known = sum(counts), {}

    def bounds(x: int) -> tuple[float, float]:
        """[B(delta; x, n - x + 1), B(1 - delta; x + 1, n - x)], 0 at x = 0, 1 at x = n (any
        delta in (0, 1), a confidence of 5e-324 too: delta = 1/2)."""
        if x not in known:
            known[x] = (0.0 if x == 0 else beta_quantile(delta, x, n - x + 1),
                        1.0 if x == n else beta_quantile(1 - delta, x + 1, n - x))
        return known[x]

    pairs = [bounds(below) for below in accumulate(counts)]
    return [low for low, _ in pairs], [high for _, high in pairs]


def cdf_bounds(channel: Window, reported: tuple[Sequence[float], Sequence[float]]
               ) -> tuple[list[float], list[float]]:
    """(L, U) at positions 0..K from bounds on the reported CDF (reported_bounds): L(t) <= F(t)
    <= U(t) whenever the bounds at s = t and s = t + m - 1 hold (module docstring; F(K) = 1)."""
    low_rates, high_rates = reported
    k, m, a = channel.grid, channel.window, channel.in_window * channel.window / channel.total
    step = channel.anywhere / channel.total
    lower = [min(1.0, max(0.0, (low_rates[t] - (t + 1) * step) / a)) for t in range(k)]
    upper = [min(1.0, max(0.0, (high_rates[t + m - 1] - (t + m) * step) / a)) for t in range(k)]
    return [*lower, 1.0], [*upper, 1.0]


def quantile_bounds(lower: Sequence[float], upper: Sequence[float], q: float) -> tuple[float, float]:
    """The interval of the q-quantile of the share r, in [0, 1], from the CDF bounds on the
    positions (module docstring): the kept candidates' hull. A candidate x in (i/K, (i+1)/K]
    needs U(i + 1) >= q (at x = i/K exactly, U(i + 1) too) and L(i - 1) < q."""
    k = len(lower) - 1

    def u(i: int) -> float:
        return 1.0 if i >= k else upper[i]

    def el(i: int) -> float:
        return 0.0 if i < 0 else lower[i]

    first = next(i for i in range(k + 1) if u(i + 1) >= q)  # lowest x: i/K
    last = max(i for i in range(k) if el(i - 1) < q)  # highest x: (i + 1)/K
    return first / k, max(first / k, (last + 1) / k)


def bin_bounds(lower: Sequence[float], upper: Sequence[float], low: int,
               high: int) -> tuple[float, float]:
    """The interval of P(low/K <= r < high/K) (to r <= 1 when high = K) from CDF bounds on the
    positions: P(r < i/K) lies in [F(i - 1), F(i)] (module docstring), 0 at i = 0."""
    k = len(lower) - 1

    def below(i: int) -> tuple[float, float]:
        """Bounds on P(r < i/K); at i > K, P(r <= 1) = 1."""
        if i <= 0:
            return 0.0, 0.0
        return (1.0, 1.0) if i > k else (lower[i - 1], upper[i] if i < k else 1.0)

    top = below(high if high < k else k + 1)
    bottom = below(low)
    return max(0.0, top[0] - bottom[1]), min(1.0, top[1] - bottom[0])
