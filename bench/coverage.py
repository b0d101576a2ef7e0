"""Coverage and mean width of the intervals of number questions' means (issue 40, item 3):
every mechanism (Duchi's, piecewise, hybrid, auto) x epsilon x n x population, each cell from
`--repeats` simulated surveys on [0, 1] through the product's own code: the device's exact
report distribution (each scheme's vectorised `simulate`), the aggregator's counters, and the
scheme's `summary` (the interval the product prints).

Populations, as shares of the range: everyone at 0, at 0.25, at 0.5, at 1 (point masses, the
ends included), and half at 0 and half at 1 ("ends").

    python bench/coverage.py [--repeats 1000] [--seed 40]   # writes a Markdown table

The fast test (tests/test_coverage.py) samples this grid and holds each cell within binomial
limits of the 0.94 floor.
"""

import argparse
import math

import numpy as np

from ldpsurvey.shared import parse_definition
from ldpsurvey.shared.scheme import Settings

MECHANISMS = ("duchi", "piecewise", "hybrid", "auto")
EPSILONS = (0.5, 1.0, 2.0, 5.0, 8.0, 10.0)
SIZES = (20, 50, 200)
POPULATIONS = {"0": (0.0, 0.0), "0.25": (0.25, 0.25), "0.5": (0.5, 0.5), "1": (1.0, 1.0),
               "ends": (0.0, 1.0)}  # each respondent alternately at the first and the second
SETTINGS = Settings(0.95, "clopper-pearson")


def number_scheme(mechanism: str, eps: float):
    return parse_definition({"title": "t", "questions": [
        {"id": "q", "text": "Q?", "type": "numeric", "min": 0, "max": 1, "epsilon": eps,
         "mechanism": mechanism}]}).questions[0].scheme


def counters(scheme, reports: np.ndarray) -> np.ndarray:
    """The aggregator's counters (scheme.tally summed) of each row of reports, vectorised:
    Duchi's [#0, #1]; piecewise [n, sum j, sum j^2]; hybrid the piecewise three over its
    reports below M, then Duchi's #0, #1 (reports M, M + 1)."""
    reports = reports.astype(np.int64)
    if scheme.counters == 2:
        ones = reports.sum(axis=1)
        return np.column_stack([reports.shape[1] - ones, ones])
    if scheme.counters == 3:
        return np.column_stack([np.full(len(reports), reports.shape[1]), reports.sum(axis=1),
                                (reports * reports).sum(axis=1)])
    outputs = scheme.piecewise.outputs
    pm = reports < outputs
    j = np.where(pm, reports, 0)
    return np.column_stack([pm.sum(axis=1), j.sum(axis=1), (j * j).sum(axis=1),
                            (reports == outputs).sum(axis=1),
                            (reports == outputs + 1).sum(axis=1)])


def cell(mechanism: str, eps: float, n: int, population: str, repeats: int,
         rng: np.random.Generator) -> tuple[float, float]:
    """(coverage, mean width) of the printed 95 % interval of the mean over `repeats` surveys."""
    scheme = number_scheme(mechanism, eps)
    first, second = POPULATIONS[population]
    truths = np.tile(np.where(np.arange(n) % 2, second, first), repeats)
    true_mean = float(np.mean(truths[:n]))
    reports = np.asarray(scheme.simulate(truths, rng)).reshape(repeats, n)
    covered, width = 0, 0.0
    for row in counters(scheme, reports):
        entry = scheme.summary([int(c) for c in row], SETTINGS)["options"][0]
        covered += entry["ci_low"] <= true_mean <= entry["ci_high"]
        width += entry["ci_high"] - entry["ci_low"]
    return covered / repeats, width / repeats


def binomial_floor(level: float, repeats: int, sds: float = 3.0) -> float:
    """The lowest observed coverage consistent with a true coverage of `level`: level - sds
    binomial standard deviations."""
    return level - sds * math.sqrt(level * (1 - level) / repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=40)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"Coverage / mean width (share of the range) of the 95 % interval of the mean, "
          f"{args.repeats} surveys a cell (below {binomial_floor(0.94, args.repeats):.3f}: "
          f"under 0.94 beyond 3 binomial SDs).\n")
    print("| mechanism | epsilon | n | " + " | ".join(POPULATIONS) + " | lowest |")
    print("|---|---|---|" + "---|" * (len(POPULATIONS) + 1))
    for mechanism in MECHANISMS:
        for eps in EPSILONS:
            for n in SIZES:
                results = [cell(mechanism, eps, n, p, args.repeats, rng) for p in POPULATIONS]
                print(f"| {mechanism} | {eps:g} | {n} | "
                      + " | ".join(f"{c:.3f} / {w:.3f}" for c, w in results)
                      + f" | {min(c for c, _ in results):.3f} |", flush=True)


if __name__ == "__main__":
    main()
