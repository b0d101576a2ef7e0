"""The intervals of number questions' means and of cheating detection's shares cover (issue
40, items 1 and 3): cells of bench/coverage.py's grids (mechanism x epsilon x n x population,
point masses at the ends included; epsilon x n x shares, the simplex's vertices included),
each held at or above 0.94 within 3 binomial standard deviations, measured through the
product's own code."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from helpers import tally

SPEC = importlib.util.spec_from_file_location(
    "bench_coverage", Path(__file__).parents[1] / "bench" / "coverage.py")
bench = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench)

REPEATS = 1000
# The failing settings, then cells drawn from the rest of the grid (seeded).
NAMED = [("auto", 8.0, 50, "0.25"), ("auto", 10.0, 20, "0.25"), ("auto", 5.0, 50, "0.5"),
         ("hybrid", 0.5, 20, "0.5"), ("piecewise", 1.0, 50, "0.5"), ("piecewise", 2.0, 20, "ends"),
         ("piecewise", 10.0, 20, "0"), ("duchi", 10.0, 20, "1")]
GRID = [(m, e, n, p) for m in bench.MECHANISMS for e in bench.EPSILONS for n in bench.SIZES
        for p in bench.POPULATIONS]
DRAWN = [GRID[i] for i in np.random.default_rng(40).choice(len(GRID), 6, replace=False)]


@pytest.mark.parametrize("mechanism, eps, n, population", NAMED + DRAWN)
def test_a_cell_of_the_grid_covers(mechanism, eps, n, population):
    rng = np.random.default_rng([ord(c) for c in f"{mechanism} {eps} {n} {population}"])
    coverage, width = bench.cell(mechanism, eps, n, population, REPEATS, rng)
    assert coverage >= bench.binomial_floor(0.94, REPEATS), (coverage, width)
    assert 0 < width <= 1


@pytest.mark.parametrize("mechanism", bench.MECHANISMS)
def test_the_bench_counts_as_the_aggregator_does(mechanism):
    """bench.counters (vectorised) equals each survey's scheme.tally summed."""
    scheme = bench.number_scheme(mechanism, 3.0)
    rng = np.random.default_rng(1)
    reports = np.asarray(scheme.simulate(rng.random(4 * 30), rng)).reshape(4, 30)
    for row, counted in zip(reports, bench.counters(scheme, reports), strict=True):
        assert [int(c) for c in counted] == tally(scheme, [int(r) for r in row])


CHEATING_REPEATS = 400
# The vertex where the chi^2_1 cut under-covered, the Wald interval's worst cells, then others.
CHEATING = [(1.0, 50, "all honest no"), (0.5, 200, "all honest no"), (1.0, 50, "0.5, 0"),
            (0.5, 200, "0.5, 0"), (5.0, 50, "0, 0.2"), (2.0, 200, "all honest yes")]


@pytest.mark.parametrize("eps, n, truth", CHEATING)
def test_the_cheating_shares_cover(eps, n, truth):
    """Each of the three shares' profile-likelihood interval covers at 0.94 within binomial
    limits, the simplex's vertices and edges included (bench.cheating_cell)."""
    rng = np.random.default_rng([round(10 * eps), n, len(truth)])
    coverage, width, _, _ = bench.cheating_cell(eps, n, truth, CHEATING_REPEATS, rng)
    assert coverage >= bench.binomial_floor(0.94, CHEATING_REPEATS), (coverage, width)
    assert 0 < width <= 1


# The cross-tab conditionals where the delta-method Wald interval covered 0.90 to 0.92.
CONDITIONALS = [(5.0, 50, (0.7, 0.1, 0.1, 0.1)), (5.0, 50, (0.9, 0.05, 0.05, 0)),
                (3.0, 50, (0.25, 0.25, 0.25, 0.25)), (5.0, 200, (0.9, 0.05, 0.05, 0)),
                (1.0, 50, (1, 0, 0, 0))]


@pytest.mark.parametrize("eps, n, joint", CONDITIONALS)
def test_the_crosstab_conditionals_cover(eps, n, joint):
    """Every defined conditional P(B | A) of a 2 x 2 cross-tab covers at 0.94 within binomial
    limits (bench.conditional_cell)."""
    rng = np.random.default_rng([round(10 * eps), n, round(100 * joint[0])])
    coverage, width, _, _ = bench.conditional_cell(eps, n, joint, REPEATS, rng)
    assert coverage >= bench.binomial_floor(0.94, REPEATS), (coverage, width)
    assert 0 < width <= 1


# Where the Wald interval of a weighted share covered 0.66 to 0.92.
WEIGHTED = [(5.0, 50, "0.05 / 0.01"), (5.0, 50, "0.6 / 0.2"), (2.0, 50, "0 / 0.5"),
            (0.5, 50, "0.6 / 0.2"), (5.0, 200, "0.6 / 0.2")]


@pytest.mark.parametrize("eps, n, truth", WEIGHTED)
def test_a_weighted_share_covers(eps, n, truth):
    """A raked sample's weighted share of yes covers at 0.94 within binomial limits
    (bench.weighted_cell)."""
    rng = np.random.default_rng([round(10 * eps), n, len(truth)])
    coverage, width, _, _ = bench.weighted_cell(eps, n, truth, CHEATING_REPEATS, rng)
    assert coverage >= bench.binomial_floor(0.94, CHEATING_REPEATS), (coverage, width)
    assert 0 < width <= 1
