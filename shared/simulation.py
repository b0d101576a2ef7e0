"""Vectorized simulation with NumPy (the `sim` extra), for mock surveys and benchmarks.

NumPy's generator is for simulation only: respondents' devices draw from the operating
system's CSPRNG. This module is not imported by `ldpsurvey.shared` itself, so the core math
never loads NumPy.

The randomizer (see `randomizer`) reports option j for a true option i with probability
exactly P(j | i) = (T*N*[i = j] + (N - T)*w_j) / N^2, N = 2^53, from its integer thresholds.
Here the whole report is decided by one uniform V in [0, 1) against the exact cumulative
probabilities Q_ij = (T*N*[i <= j] + (N - T)*C_j) / N^2: report the first j with V < Q_ij.
That is the client's distribution exactly. V is built lazily: a 64-bit draw R gives its top
64 bits, which decide unless R equals the top 64 bits of Q_ij (probability 2^-64 per
comparison); then 42 further bits decide. One 64-bit draw per answer, instead of two 53-bit ones.
"""

from collections.abc import Sequence

import numpy as np

from .randomizer import N, Thresholds

EXTRA_BITS = 106 - 64  # Q_ij has 106 bits of precision; R supplies the top 64


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
    high = np.array([[q >> EXTRA_BITS for q in row] for row in exact], dtype=np.uint64)
    r = rng.bit_generator.random_raw(true_options.size)
    output = np.zeros(true_options.size, dtype=np.int8)
    for j in range(high.shape[1]):  # report = number of j with V >= Q_ij
        bound = np.take(high[:, j], true_options)
        output += r >= bound
        for index in np.flatnonzero(r == bound):  # a tie on the top 64 bits: 42 more decide
            low = int(rng.integers(0, 2**EXTRA_BITS))
            row = exact[true_options[index]][j]
            output[index] -= low < row & (2**EXTRA_BITS - 1)
    return output
