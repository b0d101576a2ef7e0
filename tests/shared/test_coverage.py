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
    "bench_coverage", Path(__file__).parents[2] / "bench" / "coverage.py")
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


# Cells of bench/coverage.py's later grids (measure, epsilon, n, truth): each where the
# interval it replaced covered least (cheating detection's, Wald: the vertices and a half of
# honest yes; the conditionals', delta-method Wald: 0.90 to 0.92; the weighted share's, Wald:
# 0.66 to 0.92; the difference's, Agresti-Min uncorrected: 0.922 to 0.939), then others.
COMPARISONS = [
    *[("cheating_cell", *c) for c in [(1.0, 50, "all honest no"), (0.5, 200, "all honest no"),
                                      (1.0, 50, "0.5, 0"), (0.5, 200, "0.5, 0"),
                                      (5.0, 50, "0, 0.2"), (2.0, 200, "all honest yes")]],
    *[("conditional_cell", *c) for c in [(5.0, 50, (0.7, 0.1, 0.1, 0.1)),
                                         (5.0, 50, (0.9, 0.05, 0.05, 0)),
                                         (3.0, 50, (0.25, 0.25, 0.25, 0.25)),
                                         (5.0, 200, (0.9, 0.05, 0.05, 0)), (1.0, 50, (1, 0, 0, 0))]],
    *[("weighted_cell", *c) for c in [(5.0, 50, "0.05 / 0.01"), (5.0, 50, "0.6 / 0.2"),
                                      (2.0, 50, "0 / 0.5"), (0.5, 50, "0.6 / 0.2"),
                                      (5.0, 200, "0.05 / 0.01")]],
    *[("difference_cell", *c) for c in [(2.0, 20, "0.5, 0.5, 0"), (0.5, 20, "0.3, 0.1, 0.6"),
                                        (1.0, 200, "0.5, 0.5, 0"), (5.0, 50, "0.05, 0, 0.95"),
                                        (0.5, 200, "0.3, 0.1, 0.6")]]]
COMPARISON_REPEATS = 400


@pytest.mark.parametrize("measure, eps, n, truth", COMPARISONS)
def test_a_cell_of_each_comparison_covers(measure, eps, n, truth):
    """Cheating detection's three shares, every defined conditional of a 2 x 2 cross-tab, a
    raked sample's weighted share and the difference of two options: each interval covers at
    0.94 within binomial limits (the lowest over the cell's estimates)."""
    rng = np.random.default_rng([ord(c) for c in f"{measure} {eps} {n} {truth}"])
    coverage, width, _, _ = getattr(bench, measure)(eps, n, truth, COMPARISON_REPEATS, rng)
    assert coverage >= bench.binomial_floor(0.94, COMPARISON_REPEATS), (coverage, width)
    assert 0 < width <= 2


# square_wave's intervals (the mean, the quartiles, the bins' shares): the point masses at
# either end, the ends together, a spread population, epsilon 1 to 10, n = 20 to 200.
SQUARE_WAVE_CELLS = [(10.0, 20, "0"), (10.0, 200, "1"), (5.0, 50, "ends"), (2.0, 200, "spread"),
                     (1.0, 20, "0.25"), (8.0, 50, "0.5")]


@pytest.mark.parametrize("eps, n, population", SQUARE_WAVE_CELLS)
def test_a_square_wave_cell_covers(eps, n, population):
    """Each of square_wave's intervals covers at 0.94 within binomial limits (bins: the
    lowest over the 16)."""
    rng = np.random.default_rng([ord(c) for c in f"square_wave {eps} {n} {population}"])
    result = bench.square_wave_cell(eps, n, population, COMPARISON_REPEATS, rng)
    for name, (coverage, width) in result.items():
        assert coverage >= bench.binomial_floor(0.94, COMPARISON_REPEATS), (name, coverage)
        assert 0 < width <= 1, (name, width)


def test_the_bench_bounds_are_the_products():
    """bench.scipy_reported_bounds (vectorised) equals deconvolution.reported_bounds, the
    product's Clopper-Pearson bounds on the reported CDF."""
    from ldpsurvey.shared.stats.deconvolution import reported_bounds

    scheme = bench.number_scheme("square_wave", 2.0)
    rng = np.random.default_rng(4)
    counts = np.bincount(scheme.simulate(rng.random(60), rng), minlength=scheme.counters)
    for delta in (0.0125, 0.025):
        for ours, theirs in zip(reported_bounds([int(c) for c in counts], delta),
                                bench.scipy_reported_bounds(counts, delta), strict=True):
            assert np.allclose(ours, theirs, rtol=0, atol=1e-9)
