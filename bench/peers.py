"""Randomize n answers at eps = ln 3 with our vectorized path, yes/no (k = 2) and five options
(k = 5), beside NumPy drawing n uniforms alone (what bounds any randomizer: ours draws one
uniform per answer), both into one reused 2^17 buffer (the generator's speed, the reference)
and into one n-sized array; and beside pure-ldp (DEClient/DEServer, d = 2) and multi-freq-ldpy
(GRR_Client/GRR_Aggregator_MI, k = 2), timed with their estimates. Our estimate (from k - 1
counting passes and O(k) math) is checked against the truth but not timed.

    pip install -e '.[sim,bench]'
    python bench/peers.py [--sizes 1000000 10000000] [--skip-peers-above N]
"""

import argparse
import math
import time
from collections.abc import Callable

import numpy as np

from ldpsurvey.shared import Mechanism, estimate
from ldpsurvey.shared.mechanisms.randomizer import thresholds
from ldpsurvey.shared.sim.simulation import CHUNK, randomize_many, true_answers

EPSILON = math.log(3)
TRUE_P = 0.3  # the true proportion of option 1, the one estimated
PROPORTIONS = {2: (0.7, TRUE_P), 5: (0.1, TRUE_P, 0.25, 0.2, 0.15)}


def timed(work: Callable[..., object], args: tuple, repeats: int) -> tuple[float, object]:
    """Best wall-clock seconds of work(*args) over `repeats` runs, and the last run's value."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        value = work(*args)
        best = min(best, time.perf_counter() - start)
    return best, value


def raw_uniforms(n: int, rng: np.random.Generator) -> float:
    rng.random(n)
    return math.nan


def raw_uniforms_in_chunks(n: int, rng: np.random.Generator) -> float:
    """The generator's own speed: n uniforms into one reused buffer of CHUNK (no n-sized array
    to allocate and fault in, which costs raw_uniforms more than drawing at n = 10^7)."""
    buffer = np.empty(CHUNK)
    for start in range(0, n, CHUNK):
        rng.random(out=buffer[:min(CHUNK, n - start)])
    return math.nan


def option_1_estimate(m: Mechanism, reports: np.ndarray) -> float:
    """p_hat of option 1 from our reports (not timed: O(k) passes, then O(k) math)."""
    counts = [int(np.count_nonzero(reports == j)) for j in range(1, m.k)]
    return estimate(m, [reports.size - sum(counts), *counts])[1].p_hat


def pure_ldp(data: np.ndarray) -> float:
    from pure_ldp.frequency_oracles.direct_encoding import DEClient, DEServer

    client, server = DEClient(EPSILON, 2), DEServer(EPSILON, 2)
    for value in data.tolist():
        server.aggregate(client.privatise(value + 1))  # pure-ldp's items are 1..d
    return server.estimate(2, suppress_warnings=True) / data.size


def multi_freq_ldpy(data: np.ndarray) -> float:
    from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_MI, GRR_Client

    reports = [GRR_Client(value, 2, EPSILON) for value in data.tolist()]
    return float(GRR_Aggregator_MI(reports, 2, EPSILON)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**6, 10**7])
    parser.add_argument("--skip-peers-above", type=int, default=10**7,
                        help="run the (per-answer Python loop) peers only up to this n")
    args = parser.parse_args()
    rng = np.random.default_rng(2026)
    mechanisms = {k: Mechanism.from_epsilon(EPSILON, k=k) for k in PROPORTIONS}
    warm_up = np.zeros(1000, dtype=np.int8)  # imports and numba's JIT compile are not timed
    randomize_many(warm_up, thresholds(0.5, (0.5, 0.5)), rng)
    if min(args.sizes) <= args.skip_peers_above:
        pure_ldp(warm_up), multi_freq_ldpy(warm_up)
    print(f"eps = ln 3, beta uniform; true proportion of option 1: {TRUE_P}")
    header = f"{'n':>10}  {'method':<32} {'seconds':>9} {'answers/s':>14} {'vs raw':>8}  estimate"
    print(header)
    print("-" * len(header))
    for n in args.sizes:
        runs = [("numpy: uniforms, 2^17 at a time", raw_uniforms_in_chunks, (n, rng), 5,
                 math.nan, float),
                ("numpy: n uniforms in one array", raw_uniforms, (n, rng), 5, math.nan, float)]
        for k, m in mechanisms.items():
            data = true_answers(PROPORTIONS[k], n, rng)
            lam = m.alpha * TRUE_P + (1 - m.alpha) * m.beta[1]
            se = math.sqrt(lam * (1 - lam) / n) / m.alpha
            runs.append((f"ldp-survey (vectorized) k={k}", randomize_many,
                         (data, thresholds(m.alpha, m.beta), rng), 5, se,
                         lambda reports, m=m: option_1_estimate(m, reports)))
            if k == 2 and n <= args.skip_peers_above:
                runs += [("pure-ldp 1.2.0 DE", pure_ldp, (data,), 1, se, float),
                         ("multi-freq-ldpy GRR (MI)", multi_freq_ldpy, (data,), 1, se, float)]
        raw_rate = None
        for name, work, work_args, repeats, se, estimate_of in runs:
            seconds, result = timed(work, work_args, repeats)
            value = estimate_of(result)
            rate = n / seconds
            raw_rate = raw_rate or rate
            shown = "-" if math.isnan(value) else (
                f"{value:.5f} ({(value - TRUE_P) / se:+.2f} SE)")
            print(f"{n:>10}  {name:<32} {seconds:>9.3f} {rate:>14,.0f} {rate / raw_rate:>7.1%}"
                  f"  {shown}")
            if not math.isnan(value):
                assert abs(value - TRUE_P) < 5 * se, f"{name} disagrees: {value} vs {TRUE_P}"
    print("\nall estimates within 5 SE of the truth")


if __name__ == "__main__":
    main()
