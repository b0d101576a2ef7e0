"""Vectorized simulation with NumPy (the `sim` extra), for mock surveys and benchmarks.

NumPy's generator is for simulation only: respondents' devices draw from the operating
system's CSPRNG. This module is not imported by `ldpsurvey.shared` itself, so the core math
never loads NumPy.

The randomizer (see `randomizer`) reports option j for a true option i with probability
exactly P(j | i) = (T*N*[i = j] + (N - T)*w_j) / N^2, N = 2^53, from its integer thresholds.
Here the whole report is decided by one uniform V in [0, 1) against the exact cumulative
probabilities Q_ij = (T*N*[i <= j] + (N - T)*C_j) / N^2: report the first j with V < Q_ij.
That is the client's distribution exactly. V is built lazily: NumPy's `random()` gives its
top 53 bits exactly (u = U / 2^53), which decide unless they equal the top 53 bits of Q_ij
(probability 2^-53 per comparison); then 53 further bits decide. One uniform per answer,
instead of two.
"""

from collections.abc import Sequence

import numpy as np

from .randomizer import N, Thresholds

EXTRA_BITS = 53  # Q_ij * N^2 has 106 bits: u supplies the top 53, a tie needs 53 more


def true_answers(proportions: Sequence[float], size: int,
                 rng: np.random.Generator) -> np.ndarray:
    """`size` true option indices drawn i.i.d. from the given population proportions."""
    cumulative = np.cumsum(proportions)
    cumulative[-1] = 1.0
    return np.searchsorted(cumulative, rng.random(size), side="right").astype(np.int8)


def report_cumulative(t: Thresholds) -> list[list[int]]:
    """Q_ij * 2^106 as exact integers, for j = 0..k-2 (Q_i,k-1 = 1 needs no comparison)."""
    k = len(t.cumulative)
    return [[t.keep * N * (i <= j) + (N - t.keep) * t.cumulative[j] for j in range(k - 1)]
            for i in range(k)]


def randomize_many(true_options: np.ndarray, t: Thresholds,
                   rng: np.random.Generator) -> np.ndarray:
    """Randomized reports for an array of true option indices, with the client's distribution."""
    exact = report_cumulative(t)
    k = len(exact)
    u = rng.random(true_options.size)
    is_true = [true_options == i for i in range(k)]
    output = np.zeros(true_options.size, dtype=np.int8)
    for i, row in enumerate(exact):
        for q in row:  # report = the number of j with V >= Q_ij
            top = q >> EXTRA_BITS  # < 2^53, so top / N is exact
            output += (u >= top / N) & is_true[i]
            for index in np.flatnonzero((u == top / N) & is_true[i]):  # a tie: 53 more bits
                rest = int(rng.integers(0, N))
                output[index] -= rest < q & (N - 1)
    return output
