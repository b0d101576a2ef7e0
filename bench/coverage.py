"""Coverage and mean width of the intervals of number questions' means (issue 40, item 3):
every mechanism (Duchi's, piecewise, hybrid, auto) x epsilon x n x population, each cell from
`--repeats` simulated surveys on [0, 1] through the product's own code: the device's exact
report distribution (each scheme's vectorised `simulate`), the aggregator's counters, and the
scheme's `summary` (the interval the product prints). Then the cells of a cross-tab of two
yes/no questions (beta 1/2) at eps 1, 3, 5 and n = 50, 200 over four joints: the lowest
coverage over the four cells and their mean width, for crosstab's interval and for the Wald
interval p_hat -+ z SE (covered to the projected point) it replaced. Then cheating
detection's three shares (default design) at eps 0.5 to 5 and n = 50, 200 over six truths, the
simplex's vertices among them: the profile-likelihood intervals against the Wald ones; the
conditionals of the cross-tabs above; a weighted share of a raked sample; the difference of
two options of a three-option question. Each of these later tables draws from its own
generator seeded --seed.

Populations, as shares of the range: everyone at 0, at 0.25, at 0.5, at 1 (point masses, the
ends included), and half at 0 and half at 1 ("ends").

    python bench/coverage.py [--repeats 1000] [--seed 40] [--square-wave]   # Markdown tables

The fast test (tests/shared/test_coverage.py) samples this grid and holds each cell within binomial
limits of the 0.94 floor.
"""

import argparse
import itertools
import math

import numpy as np
import pandas as pd

from ldpsurvey.analysis.weights import rake, weighted_estimates
from ldpsurvey.shared import Mechanism, crosstab, difference, parse_definition, uniform_beta
from ldpsurvey.shared.mechanisms.cheating import CheatingDesign, estimate_cheating
from ldpsurvey.shared.mechanisms.protocol import Settings
from ldpsurvey.shared.stats.design import alpha_for_epsilon
from ldpsurvey.shared.stats.estimate import clip_unit, cover
from ldpsurvey.shared.stats.intervals import z_value

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


JOINTS = ((1, 0, 0, 0), (0.25, 0.25, 0.25, 0.25), (0.7, 0.1, 0.1, 0.1), (0.9, 0.05, 0.05, 0))


def crosstab_cell(eps: float, n: int, joint: tuple[float, ...], repeats: int,
                  rng: np.random.Generator) -> tuple[float, float, float, float]:
    """(lowest coverage, mean width) over the four cells of crosstab's intervals, then of the
    Wald interval, from multinomial joint report counts at the exact report rates."""
    design = Mechanism(alpha_for_epsilon(eps, 0.5), 0.5)
    p = np.array([[design.alpha * (i == j) + (1 - design.alpha) * 0.5 for j in range(2)]
                  for i in range(2)])
    truth = np.array(joint, dtype=float).reshape(2, 2)
    z = z_value(0.95)
    covered, widths = np.zeros((2, 4)), np.zeros(2)
    for draw in rng.multinomial(n, (p.T @ truth @ p).flatten(), size=repeats):
        table = crosstab(design, design, [[int(x) for x in draw[:2]], [int(x) for x in draw[2:]]])
        for i, c in enumerate(table.cells):
            wald = cover(clip_unit(c.p_hat - z * c.standard_error),
                         clip_unit(c.p_hat + z * c.standard_error), c.p_constrained)
            for k, (low, high) in enumerate(((c.ci_low, c.ci_high), wald)):
                covered[k, i] += low <= truth[c.row, c.col] <= high
                widths[k] += high - low
    return (covered[0].min() / repeats, widths[0] / (4 * repeats),
            covered[1].min() / repeats, widths[1] / (4 * repeats))


def conditional_cell(eps: float, n: int, joint: tuple[float, ...], repeats: int,
                     rng: np.random.Generator) -> tuple[float, float, float, float]:
    """As crosstab_cell for the conditionals P(B | A) of the rows with a positive share
    (a conditional of an empty row is undefined): crosstab's, then the delta-method Wald
    interval r -+ z SE (clipped, covered to the constrained point; [0, 1] when the unbiased
    row share is not positive) they replaced."""
    design = Mechanism(alpha_for_epsilon(eps, 0.5), 0.5)
    p = np.array([[design.alpha * (i == j) + (1 - design.alpha) * 0.5 for j in range(2)]
                  for i in range(2)])
    truth = np.array(joint, dtype=float).reshape(2, 2)
    defined = [(a, b) for a in range(2) for b in range(2) if truth[a].sum() > 0]
    z = z_value(0.95)
    covered, widths = np.zeros((2, len(defined))), np.zeros(2)
    for draw in rng.multinomial(n, (p.T @ truth @ p).flatten(), size=repeats):
        table = crosstab(design, design, [[int(x) for x in draw[:2]], [int(x) for x in draw[2:]]])
        for i, (a, b) in enumerate(defined):
            c = table.conditional[2 * a + b]
            wald = ((0.0, 1.0) if c.p_hat is None else
                    cover(clip_unit(c.p_hat - z * c.standard_error),
                          clip_unit(c.p_hat + z * c.standard_error), c.p_constrained))
            for k, (low, high) in enumerate(((c.ci_low, c.ci_high), wald)):
                covered[k, i] += low <= truth[a, b] / truth[a].sum() <= high
                widths[k] += high - low
    cells = len(defined) * repeats
    return (covered[0].min() / repeats, widths[0] / cells,
            covered[1].min() / repeats, widths[1] / cells)


CHEATING_TRUTHS = {"all honest no": (0.0, 0.0), "all honest yes": (1.0, 0.0),
                   "all non-compliant": (0.0, 1.0), "0.3, 0.1": (0.3, 0.1), "0.5, 0": (0.5, 0.0),
                   "0, 0.2": (0.0, 0.2)}  # (honest yes, non-compliant)
CHEATING_EPSILONS = (0.5, 1.0, 2.0, 5.0)


def cheating_cell(eps: float, n: int, truth: str, repeats: int,
                  rng: np.random.Generator) -> tuple[float, float, float, float]:
    """(lowest coverage over the three shares, their mean width) of estimate_cheating's
    intervals, then of the Wald interval p_hat -+ z SE (clipped, covered to p_mle) they
    replaced, under the default design at eps: each of n respondents in group 1 or 2 with
    probability 1/2, then a binomial count of yes at the group's exact report rate."""
    design = CheatingDesign.from_epsilon(eps)
    pi, gamma = CHEATING_TRUTHS[truth]
    shares = (pi, 1.0 - pi - gamma, gamma)
    rates = design.report_rates(pi, gamma)
    z = z_value(0.95)
    covered, widths = np.zeros((2, 3)), np.zeros(2)
    for _ in range(repeats):
        first = int(rng.binomial(n, 0.5))
        sizes = [first, n - first]
        if min(sizes) < 2:  # the product shows no shares then
            continue
        yes = [int(rng.binomial(size, rate)) for size, rate in zip(sizes, rates, strict=True)]
        fit = estimate_cheating(design, yes, sizes)
        for j, share in enumerate(fit.shares):
            wald = cover(clip_unit(share.p_hat - z * share.standard_error),
                         clip_unit(share.p_hat + z * share.standard_error), share.p_mle)
            for k, (low, high) in enumerate(((share.ci_low, share.ci_high), wald)):
                covered[k, j] += low <= shares[j] <= high
                widths[k] += high - low
    return (covered[0].min() / repeats, widths[0] / (3 * repeats),
            covered[1].min() / repeats, widths[1] / (3 * repeats))


WEIGHTED_TRUTHS = {"0 / 0": (0.0, 0.0), "1 / 1": (1.0, 1.0), "0.6 / 0.2": (0.6, 0.2),
                   "0 / 0.5": (0.0, 0.5), "0.05 / 0.01": (0.05, 0.01)}  # P(yes): men / women


def weighted_cell(eps: float, n: int, truth: str, repeats: int,
                  rng: np.random.Generator) -> tuple[float, float, float, float]:
    """(coverage, mean width) of the weighted share of yes (analysis.weights), then of the
    Wald interval p_hat -+ z SE (clipped) it replaced: a sample of n with 20 % men raked to a
    population of half men, P(yes) per sex from WEIGHTED_TRUTHS, a yes/no question at eps
    (beta 1/2); samples with fewer than 2 of either sex are drawn again."""
    mechanism = Mechanism(alpha_for_epsilon(eps, 0.5), 0.5)
    men, women = WEIGHTED_TRUTHS[truth]
    target, z = (men + women) / 2.0, z_value(0.95)
    covered, widths, done = np.zeros(2), np.zeros(2), 0
    while done < repeats:
        male = rng.random(n) < 0.2
        if min(male.sum(), n - male.sum()) < 2:
            continue
        answers = rng.random(n) < np.where(male, men, women)
        reports = np.where(rng.random(n) < mechanism.alpha, answers,
                           rng.random(n) < mechanism.beta[1])
        frame = pd.DataFrame({"sex": np.where(male, "m", "f"),
                              "q": pd.Categorical.from_codes(reports.astype(int), ["no", "yes"])})
        _, yes = weighted_estimates(frame["q"], mechanism, rake(frame, {"sex": {"f": 0.5, "m": 0.5}}))
        wald = (clip_unit(yes.p_hat - z * yes.standard_error),
                clip_unit(yes.p_hat + z * yes.standard_error))
        for k, (low, high) in enumerate(((yes.ci_low, yes.ci_high), wald)):
            covered[k] += low <= target <= high
            widths[k] += high - low
        done += 1
    return covered[0] / repeats, widths[0] / repeats, covered[1] / repeats, widths[1] / repeats


DIFFERENCE_TRUTHS = {"1, 0, 0": (1.0, 0.0, 0.0), "0, 0, 1": (0.0, 0.0, 1.0),
                     "0.5, 0.5, 0": (0.5, 0.5, 0.0), "0.3, 0.1, 0.6": (0.3, 0.1, 0.6),
                     "0.05, 0, 0.95": (0.05, 0.0, 0.95)}


def difference_cell(eps: float, n: int, truth: str, repeats: int,
                    rng: np.random.Generator) -> tuple[float, float, float, float]:
    """(coverage, mean width) of the interval of pi_0 - pi_1 (shared.difference), twice (the
    comparison is with the code before: Agresti and Min's without the continuity correction),
    for a three-option question at eps with uniform beta, from multinomial counts at the
    exact report rates."""
    beta = uniform_beta(3)
    mechanism = Mechanism(alpha_for_epsilon(eps, beta), beta)
    shares = DIFFERENCE_TRUTHS[truth]
    rates = [mechanism.alpha * p + (1 - mechanism.alpha) * b for p, b in zip(shares, beta,
                                                                             strict=True)]
    covered, width = 0, 0.0
    for counts in rng.multinomial(n, rates, size=repeats):
        d = difference(mechanism, [int(c) for c in counts], 0, 1)
        covered += d.ci_low <= shares[0] - shares[1] <= d.ci_high
        width += d.ci_high - d.ci_low
    return covered / repeats, width / repeats, covered / repeats, width / repeats


SQUARE_WAVE_POPULATIONS = {**POPULATIONS, "spread": None}  # spread: answers (i + 1/2)/n


def square_wave_truths(population: str, n: int) -> np.ndarray:
    """The n answers (shares of the range) of a population: POPULATIONS' alternating pair, or
    evenly spread over [0, 1]."""
    if population == "spread":
        return (np.arange(n) + 0.5) / n
    first, second = POPULATIONS[population]
    return np.where(np.arange(n) % 2, second, first)


def scipy_reported_bounds(counts, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """deconvolution.reported_bounds from SciPy's beta quantiles, vectorised (the same one-sided
    Clopper-Pearson bounds on P(report <= s); tests/test_coverage.py checks they agree)."""
    from scipy.stats import beta

    below = np.cumsum(counts)
    n = below[-1]
    with np.errstate(all="ignore"):
        low = np.where(below == 0, 0.0, beta.ppf(delta, below, n - below + 1))
        high = np.where(below == n, 1.0, beta.ppf(1 - delta, below + 1, n - below))
    return low, high


def true_quantile(truths: np.ndarray, q: float) -> float:
    """The least x with (answers <= x)/n >= q."""
    ordered = np.sort(truths)
    return float(ordered[math.ceil(q * len(ordered) - 1e-9) - 1])


def square_wave_cell(eps: float, n: int, population: str, repeats: int,
                     rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    """(coverage, mean width) of square_wave's 95 % intervals over `repeats` surveys: the mean,
    the median, the lower and upper quartiles, and the bins' shares (the lowest coverage over
    the bins, their mean width), through the scheme's own code (its device distribution,
    counters and intervals; the reported CDF's bounds from SciPy)."""
    scheme = number_scheme("square_wave", eps)
    truths = square_wave_truths(population, n)
    step = scheme.grid // scheme.bins
    edges = np.arange(scheme.bins + 1) * step / scheme.grid
    true_bins = np.array([np.mean((truths >= lo) & ((truths < hi) if hi < 1 else True))
                          for lo, hi in itertools.pairwise(edges)])
    targets = {"mean": float(np.mean(truths)), "median": true_quantile(truths, 0.5),
               "lower quartile": true_quantile(truths, 0.25),
               "upper quartile": true_quantile(truths, 0.75)}
    covered = dict.fromkeys(targets, 0)
    widths = dict.fromkeys([*targets, "bins"], 0.0)
    bins_covered = np.zeros(scheme.bins)
    reports = np.asarray(scheme.simulate(np.tile(truths, repeats), rng)).reshape(repeats, n)
    for row in reports:
        counts = np.bincount(row, minlength=scheme.counters)
        mean = scheme.mean([int(c) for c in counts], SETTINGS)
        quartiles, bins = scheme.intervals(counts, SETTINGS.confidence, scipy_reported_bounds)
        found = {"mean": (mean["ci_low"], mean["ci_high"]), "lower quartile": quartiles[0],
                 "median": quartiles[1], "upper quartile": quartiles[2]}
        for name, (low, high) in found.items():
            covered[name] += low <= targets[name] <= high
            widths[name] += high - low
        lows, highs = np.array(bins).T
        bins_covered += (lows <= true_bins) & (true_bins <= highs)
        widths["bins"] += float(np.mean(highs - lows))
    result = {name: (covered[name] / repeats, widths[name] / repeats) for name in targets}
    result["bins"] = (float(bins_covered.min()) / repeats, widths["bins"] / repeats)
    return result


def square_wave_table(repeats: int, rng: np.random.Generator) -> None:
    """The square_wave table: each interval's coverage / mean width per epsilon, n and
    population."""
    print(f"\nsquare_wave (16 bins, grid 256): coverage / mean width (share of the range; the bins': "
          f"the lowest over the 16) of the 95 % intervals, {repeats} surveys a cell.\n")
    names = ("mean", "lower quartile", "median", "upper quartile", "bins")
    print("| epsilon | n | population | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for eps in EPSILONS:
        for n in SIZES:
            for population in SQUARE_WAVE_POPULATIONS:
                result = square_wave_cell(eps, n, population, repeats, rng)
                print(f"| {eps:g} | {n} | {population} | "
                      + " | ".join(f"{result[k][0]:.3f} / {result[k][1]:.3f}" for k in names)
                      + " |", flush=True)


def binomial_floor(level: float, repeats: int, sds: float = 3.0) -> float:
    """The lowest observed coverage consistent with a true coverage of `level`: level - sds
    binomial standard deviations."""
    return level - sds * math.sqrt(level * (1 - level) / repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument("--square-wave", action="store_true",
                        help="only the square_wave table (distributions of number questions)")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.square_wave:
        square_wave_table(args.repeats, rng)
        return
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
    square_wave_table(args.repeats, rng)
    comparisons = (
        ("Cross-tab cells of two yes/no questions: lowest coverage over the cells",
         ("joint", "crosstab's interval", "Wald (before)"), crosstab_cell, (1.0, 3.0, 5.0),
         {", ".join(map(str, joint)): joint for joint in JOINTS}),
        ("Cross-tab conditionals P(B | A) of the same tables (rows of positive share): lowest "
         "coverage", ("joint", "crosstab's interval", "delta-method Wald (before)"),
         conditional_cell, (1.0, 3.0, 5.0),
         {", ".join(map(str, joint)): joint for joint in JOINTS}),
        ("Cheating detection's three shares (default design): lowest coverage over the shares",
         ("honest yes, non-compliant", "profile likelihood", "Wald (before)"), cheating_cell,
         CHEATING_EPSILONS, {truth: truth for truth in CHEATING_TRUTHS}),
        ("A weighted share of yes (20 % men in the sample raked to half; P(yes) men / women)",
         ("P(yes) men / women", "Korn-Graubard", "Wald (before)"), weighted_cell,
         CHEATING_EPSILONS, {truth: truth for truth in WEIGHTED_TRUTHS}),
        ("The difference pi_0 - pi_1 of a three-option question (beta uniform): coverage",
         ("shares", "difference's interval", "the same"), difference_cell, CHEATING_EPSILONS,
         {truth: truth for truth in DIFFERENCE_TRUTHS}))
    for title, columns, measure, epsilons, truths in comparisons:
        if measure is not crosstab_cell:  # each later table from its own generator at --seed
            rng = np.random.default_rng(args.seed)
        print(f"\n{title} / mean width.\n")
        print("| epsilon | n | " + " | ".join(columns) + " |")
        print("|---|---|---|---|---|")
        for eps in epsilons:
            for n in (20, 50, 200) if measure is difference_cell else (50, 200):
                for name, truth in truths.items():
                    c, w, old_c, old_w = measure(eps, n, truth, args.repeats, rng)
                    print(f"| {eps:g} | {n} | {name} | {c:.3f} / {w:.3f} | "
                          f"{old_c:.3f} / {old_w:.3f} |", flush=True)

if __name__ == "__main__":
    main()
