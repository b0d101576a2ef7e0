"""OUE and OLH side by side at n reports (default 10^6), k = 10 options, eps = ln 3: our
vectorized simulation randomizer and our estimator (shared/mechanisms/oue.py, olh.py, support.py) beside
pure-LDP (UEServer/LHServer aggregating our very reports, one call per report) and
multi-freq-ldpy (its own clients and MI aggregators, one call per report); then, for every
mechanism of shared/ at a fixed epsilon, the variance of its estimates over repeated simulated
surveys against its formula (n Var at the truth used); and for number questions, at several
epsilons, the worst-case variance of one report of Duchi's mechanism, the Piecewise and the
Hybrid mechanisms (shared/mechanisms/numeric.py, piecewise.py): Wang et al.'s (ICDE 2019) continuous
formula, our discretized mechanism's exact value, and our simulation at the answers 0, 1/2 and 1
of the range (the largest of the three sample variances of the decoded reports).

    pip install -e '.[sim,bench]'
    python bench/mechanisms.py [--n 1000000] [--repeats 200] [--skip-peers]

pure-LDP 1.2.0 and multi-freq-ldpy call xxhash.xxh32 on a str, which xxhash 3 refuses; they get
the UTF-8 bytes of it here (what earlier xxhash hashed).
"""

import argparse
import math
import time

import numpy as np

from ldpsurvey.shared import parse_definition
from ldpsurvey.shared.mechanisms.piecewise import duchi_decoding, worst_variance
from ldpsurvey.shared.mechanisms.protocol import Settings
from ldpsurvey.shared.sim.simulation import hashed_many

EPSILON = math.log(3)
K = 10
SHARES = np.array([0.3, 0.2, 0.15, 0.1, 0.08, 0.07, 0.05, 0.03, 0.02, 0.0])


class Utf8Xxhash:
    """xxhash as the peers call it (a str), hashing its UTF-8 bytes."""

    def __init__(self, xxhash):
        self.xxhash = xxhash

    def xxh32(self, data, seed=0):
        return self.xxhash.xxh32(data.encode() if isinstance(data, str) else data, seed=int(seed))


def question(**fields):
    return parse_definition({"title": "b", "questions": [
        {"id": "q", "text": "Q?", **fields}]}).questions[0].scheme


def vector_counts(scheme, reports) -> list[int]:
    """The aggregator's counters of these reports, computed in bulk (as tally would)."""
    if scheme.name == "oue":
        bits = np.asarray(reports)
        return [*bits.sum(axis=0).tolist(), len(bits)]
    seeds, values = np.asarray(reports, dtype=np.int64).T
    return [int(np.count_nonzero(hashed_many(np.full(len(seeds), j), seeds.astype(np.uint64),
                                             scheme.g) == values)) for j in range(K)] + [len(seeds)]


def timed(work, *args):
    start = time.perf_counter()
    value = work(*args)
    return time.perf_counter() - start, value


def ours(name: str, n: int, rng) -> dict:
    scheme = question(type="choice", options=[str(j) for j in range(K)], mechanism=name,
                      epsilon=EPSILON)
    answers = rng.choice(K, size=n, p=SHARES)
    seconds, reports = timed(scheme.simulate, answers, rng)
    count_seconds, counts = timed(vector_counts, scheme, reports)
    estimate_seconds, summary = timed(scheme.summary, counts, Settings(0.95, "wilson"))
    p_hat = np.array([o["p_hat"] for o in summary["options"]])
    return {"scheme": scheme, "reports": reports, "answers": answers,
            "randomize_s": seconds, "count_s": count_seconds, "estimate_s": estimate_seconds,
            "p_hat": p_hat}


def pure_ldp(name: str, result: dict) -> tuple[float, np.ndarray]:
    import xxhash
    from pure_ldp.frequency_oracles.local_hashing import LHServer, lh_server
    from pure_ldp.frequency_oracles.unary_encoding import UEServer

    lh_server.xxhash = Utf8Xxhash(xxhash)
    server = UEServer(EPSILON, K, use_oue=True) if name == "oue" else LHServer(EPSILON, K,
                                                                                use_olh=True)
    start = time.perf_counter()
    for report in result["reports"]:
        server.aggregate(np.array(report) if name == "oue" else (report[1], report[0]))
    estimates = np.array([server.estimate(j + 1, suppress_warnings=True) for j in range(K)])
    return time.perf_counter() - start, estimates / len(result["reports"])


def multi_freq_ldpy(name: str, answers: np.ndarray) -> tuple[float, np.ndarray]:
    import xxhash
    from multi_freq_ldpy.pure_frequency_oracles import LH, UE

    LH.xxhash = Utf8Xxhash(xxhash)
    start = time.perf_counter()
    if name == "oue":
        reports = [UE.UE_Client(int(v), K, EPSILON, True) for v in answers]
        estimates = UE.UE_Aggregator_MI(np.array(reports), EPSILON, True)
    else:
        reports = [LH.LH_Client(int(v), K, EPSILON, True) for v in answers]
        estimates = LH.LH_Aggregator_MI(reports, K, EPSILON, True)
    return time.perf_counter() - start, np.asarray(estimates)


MECHANISMS = [
    ("forced_response (k=10)", dict(type="choice", options=[str(j) for j in range(K)],
                                    epsilon=EPSILON)),
    ("oue (k=10)", dict(type="choice", options=[str(j) for j in range(K)], mechanism="oue",
                        epsilon=EPSILON)),
    ("olh (k=10)", dict(type="choice", options=[str(j) for j in range(K)], mechanism="olh",
                        epsilon=EPSILON)),
    ("bits (k=10, m=2)", dict(type="multi_select", options=[str(j) for j in range(K)],
                              mechanism="bits", max_selected=2, epsilon=EPSILON)),
    ("padding (k=10, l=2)", dict(type="multi_select", options=[str(j) for j in range(K)],
                                 mechanism="padding", max_selected=2, epsilon=EPSILON)),
    ("duchi (0..30)", dict(type="numeric", min=0, max=30, epsilon=EPSILON)),
    ("piecewise (0..30)", dict(type="numeric", min=0, max=30, epsilon=EPSILON,
                               mechanism="piecewise")),
    ("hybrid (0..30)", dict(type="numeric", min=0, max=30, epsilon=EPSILON, mechanism="hybrid")),
]


def answers_for(scheme, n: int, rng):
    if scheme.quantity == "mean":
        return rng.choice([0.0, 2.0, 5.0, 10.0, 30.0], size=n, p=[0.4, 0.3, 0.15, 0.1, 0.05])
    if hasattr(scheme, "limit"):  # a set: at most two of the ten
        bits = np.zeros((n, K), dtype=np.int8)
        bits[np.arange(n), rng.choice(K, size=n, p=SHARES)] = 1
        bits[np.arange(n), rng.choice(K, size=n, p=SHARES[::-1] / SHARES.sum())] = 1
        return bits
    return rng.choice(K, size=n, p=SHARES)


def counters(scheme, reports) -> list[int]:
    if scheme.name in ("oue", "olh"):
        return vector_counts(scheme, reports)
    counts = [0] * scheme.counters
    for report in reports:
        for counter, amount in scheme.tally(report):
            counts[counter] += amount
    return counts


def variances(n: int, repeats: int, rng) -> None:
    print(f"\nVariance at eps = ln 3 over {repeats} simulated surveys of n = {n:,} (first "
          "estimated quantity): empirical, the mean stated SE^2, their ratio")
    for label, fields in MECHANISMS:
        scheme = question(**fields)
        estimates, stated = [], []
        for _ in range(repeats):
            summary = scheme.summary(counters(scheme, scheme.simulate(answers_for(
                scheme, n, rng), rng)), Settings(0.95, "wilson"))
            first = summary["options"][0]
            estimates.append(first["p_hat"])
            stated.append(first["standard_error"] ** 2)
        empirical, formula = np.var(estimates, ddof=1), np.mean(stated)
        print(f"  {label:24} {empirical:.3e}  {formula:.3e}  {empirical / formula:.3f}")


def number_formulas(eps: float) -> dict[str, float]:
    """Worst-case Var of one report as a share of the range (the [-1, 1] formulas over 4):
    Duchi C_D^2 (t = 0); PM 1/(z-1) + (z+3)/(3(z-1)^2) (t = 1, Lemma 1); HM (z+3)/(3z(z-1))
    + C_D^2/z above eps* (Lemma 4), Duchi's below it."""
    z, cd = math.exp(eps / 2), (math.exp(eps) + 1) / (math.exp(eps) - 1)
    hybrid = (z + 3) / (3 * z * (z - 1)) + cd * cd / z if eps > 0.61 else cd * cd
    return {"duchi": cd * cd / 4, "piecewise": (1 / (z - 1) + (z + 3) / (3 * (z - 1) ** 2)) / 4,
            "hybrid": hybrid / 4}


def decoded(scheme, reports) -> np.ndarray:
    """The reports' unbiased values as shares of the range (duchi: (y - c)/(A/N))."""
    if scheme.name == "duchi":
        keep, forced = (float(x) for x in duchi_decoding(scheme))
        return (np.asarray(reports) - forced) / keep
    table = np.array([float(scheme.decode(j)) for j in range(scheme.largest_report() + 1)])
    return table[np.asarray(reports)]


def number_variances(n: int, rng) -> None:
    print(f"\nNumber questions: worst-case Var of one report (share of the range squared): "
          f"formula, ours exact, ours simulated ({n:,} reports at each of 0, 1/2, 1)")
    for eps in (0.5, 1.0, math.log(3), 2.0, 4.0):
        formulas = number_formulas(eps)
        for name in ("duchi", "piecewise", "hybrid"):
            scheme = question(type="numeric", min=0, max=1, epsilon=eps, mechanism=name)
            simulated = max(np.var(decoded(scheme, scheme.simulate(np.full(n, x), rng)), ddof=1)
                            for x in (0.0, 0.5, 1.0))
            print(f"  eps {eps:.3f} {name:10} {formulas[name]:.5f}  "
                  f"{float(worst_variance(scheme)):.5f}  {simulated:.5f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--variance-n", type=int, default=2000)
    parser.add_argument("--skip-peers", action="store_true")
    parser.add_argument("--number-n", type=int, default=10**6)
    parser.add_argument("--only-numbers", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(2024)
    number_variances(args.number_n, rng)
    if args.only_numbers:
        return
    print(f"n = {args.n:,} reports, k = {K}, eps = ln 3; seconds, then max |p_hat - truth|")
    for name in ("oue", "olh"):
        result = ours(name, args.n, rng)
        truth = np.bincount(result["answers"], minlength=K) / args.n
        print(f"{name}: ours randomize {result['randomize_s']:.2f} s, count "
              f"{result['count_s']:.2f} s, estimate {result['estimate_s']:.4f} s; max error "
              f"{np.abs(result['p_hat'] - truth).max():.4f}")
        if args.skip_peers:
            continue
        seconds, theirs = pure_ldp(name, result)
        print(f"  pure-LDP on the same reports: {seconds:.2f} s; max |ours - theirs| = "
              f"{np.abs(result['p_hat'] - theirs).max():.2e}")
        seconds, estimates = multi_freq_ldpy(name, result["answers"])
        print(f"  multi-freq-ldpy (its own randomizer, MI): {seconds:.2f} s; max error "
              f"{np.abs(estimates - truth).max():.4f}")
    variances(args.variance_n, args.repeats, rng)


if __name__ == "__main__":
    main()
