"""Vectorized simulation with NumPy (the `sim` extra), for mock surveys and benchmarks.

NumPy's generator is for simulation only: respondents' devices draw from the operating
system's CSPRNG. This module is not imported by `ldpsurvey.shared` itself, so the core math
never loads NumPy.

One uniform per answer, exactly the client's distribution. The client (see `randomizer`)
reports option j for the true option i with probability
    P(j | i) = T/N [i = j] + (N - T)/N * w_j/N,   N = 2^53, w_j = C_j - C_{j-1}, C_{-1} = 0.
Here W = U*N + L is one uniform integer in [0, N^2) (U, L independent uniform in [0, N)), and
    report i                                    if W < T*N            (that is, U < T)
    otherwise the number of j <= k-2 with W >= R_j,   R_j = T*N + (N - T)*C_j.
Proof that this is the client's distribution: the bounds T*N = R_{-1} < R_0 < ... < R_{k-1} =
N^2 cut [0, N^2) into a keep interval of T*N integers and, for each j, a forced interval of
R_j - R_{j-1} = (N - T)*w_j integers. W is uniform, so P(keep) = T*N/N^2 = T/N and P(forced j)
= (N - T)*w_j/N^2; the report is i with probability T/N + (N - T)w_i/N^2 and j != i with
probability (N - T)w_j/N^2, the formula above for every i and j, with no rounding.

The forced option does not depend on i, so the work per answer is k - 1 comparisons on one
array plus one blend with the true options: O(k), no per-option masks or gathers.

U is NumPy's `random()` times N: its doubles are 53-bit integers over 2^53, so u = U/N, and
top_j / N (top_j = R_j div N < N) are exact doubles. W >= R_j iff U > top_j, or U = top_j and
L >= R_j mod N; only on that tie (probability 2^-53 per bound) is L drawn (it is independent
of U, so drawing it late changes nothing).
"""

from collections.abc import Sequence
from typing import Protocol

import numpy as np

CHUNK = 2**17  # answers per pass: the working arrays (1.3 MB) stay in cache
# The specification this module vectorizes, as the JavaScript twins restate it (the mechanisms
# import this module, not the other way round; test_simulation checks they agree):
N = 2**53  # randomizer.N: every draw is uniform in [0, 2^53)
PRIME32 = (0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1)  # xxHash32's (olh.py)
MASK = 0xFFFFFFFF


class Thresholds(Protocol):
    """randomizer.Thresholds: keep the truth iff U1 < keep; forced option j iff U2 < C_j."""

    keep: int
    cumulative: tuple[int, ...]


def true_answers(proportions: Sequence[float], size: int,
                 rng: np.random.Generator) -> np.ndarray:
    """`size` true option indices drawn i.i.d. from the given population proportions, in
    chunks of CHUNK (memory: one byte per answer, int8, up to 128 options; int32 beyond, as
    for the cells of a large joint table)."""
    cumulative = np.cumsum(proportions)
    cumulative[-1] = 1.0
    output = np.empty(size, dtype=np.int8 if len(proportions) <= 128 else np.int32)
    for start in range(0, size, CHUNK):
        output[start:start + CHUNK] = np.searchsorted(
            cumulative, rng.random(min(CHUNK, size - start)), side="right")
    return output


def forced_bounds(t: Thresholds) -> list[int]:
    """R_j = T*N + (N - T)*C_j for j = 0..k-2: W >= R_j means a forced report above j."""
    return [t.keep * N + (N - t.keep) * c for c in t.cumulative[:-1]]


def forced_reports(bounds: list[int], draws: np.ndarray, reports: np.ndarray,
                   rng: np.random.Generator) -> None:
    """reports[:] = the number of j with W >= R_j, W = U*N + L, U = draws*N, L drawn on a tie."""
    reports.fill(0)
    above = np.empty(draws.size, dtype=bool)
    tie_tops = {r // N for r in bounds if r % N}  # a bound that is a multiple of N never ties
    for r in bounds:
        np.greater_equal(draws, (r // N) / N, out=above)  # U >= top_j, exact in doubles
        reports += above.view(np.int8)
    if not any(np.equal(draws, top / N, out=above).any() for top in tie_tops):
        return
    for index in np.flatnonzero(np.isin(draws, [top / N for top in tie_tops])):
        w = int(draws[index] * N) * N + int(rng.integers(0, N))  # U, then the 53 bits of L
        reports[index] = sum(w >= r for r in bounds)


def randomize_many(true_options: np.ndarray, t: Thresholds,
                   rng: np.random.Generator) -> np.ndarray:
    """Randomized reports (int8; int32 past 127 options, as OLH's hash values can be) of an
    array of true option indices, with the client's distribution (see the module docstring),
    one uniform per answer, in chunks of CHUNK."""
    kind = np.int8 if len(t.cumulative) <= 127 else np.int32
    true_options = np.asarray(true_options, dtype=kind)
    bounds, keep = forced_bounds(t), t.keep / N
    output = np.empty(true_options.size, dtype=kind)
    draws, kept, change = np.empty(CHUNK), np.empty(CHUNK, dtype=bool), np.empty(CHUNK, kind)
    for start in range(0, true_options.size, CHUNK):
        size = min(CHUNK, true_options.size - start)
        u, reports, truth = draws[:size], output[start:start + size], true_options[start:start + size]
        rng.random(out=u)
        forced_reports(bounds, u, reports, rng)
        # reports += (truth - reports) * [U < T]: the blend without a branch per answer
        np.less(u, keep, out=kept[:size])
        np.subtract(truth, reports, out=change[:size])
        change[:size] *= kept[:size].view(np.int8)
        reports += change[:size]
    return output


def xxh32_many(data: bytes, seeds: np.ndarray) -> np.ndarray:
    """olh.xxh32(data, seed) of fewer than 16 bytes for an array of seeds at once (uint32
    arithmetic, every product taken mod 2^32 in uint64 so nothing overflows): the same steps,
    vectorized over seeds."""
    p1, p2, p3, p4, p5 = (np.uint64(p) for p in PRIME32)
    mask = np.uint64(MASK)

    def rotl(x: np.ndarray, r: int) -> np.ndarray:
        return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & mask

    acc = (np.asarray(seeds, dtype=np.uint64) + p5 + np.uint64(len(data))) & mask
    whole = len(data) - len(data) % 4
    for i in range(0, whole, 4):
        lane = np.uint64(int.from_bytes(data[i:i + 4], "little"))
        acc = (rotl((acc + lane * p3) & mask, 17) * p4) & mask
    for byte in data[whole:]:
        acc = (rotl((acc + np.uint64(byte) * p5) & mask, 11) * p1) & mask
    acc ^= acc >> np.uint64(15)
    acc = (acc * p2) & mask
    acc ^= acc >> np.uint64(13)
    acc = (acc * p3) & mask
    return acc ^ (acc >> np.uint64(16))


def hashed_many(options: np.ndarray, seeds: np.ndarray, g: int) -> np.ndarray:
    """olh.hashed(option, seed, g) elementwise: each distinct option's digits hashed with
    xxh32_many over the seeds of the reports that hold it."""
    options = np.asarray(options)
    out = np.empty(len(options), dtype=np.int64)
    for option in np.unique(options):
        rows = options == option
        out[rows] = (xxh32_many(str(int(option)).encode("ascii"), seeds[rows])
                     % np.uint64(g)).astype(np.int64)
    return out
