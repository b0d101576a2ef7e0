import math

import numpy as np
import pytest

from ldpsurvey.shared import Mechanism
from ldpsurvey.shared.randomizer import N, randomize, thresholds
from ldpsurvey.shared.simulation import (
    EXTRA_BITS,
    randomize_many,
    report_cumulative,
    true_answers,
)


@pytest.mark.parametrize("alpha, beta", [(0.5, (0.5, 0.5)), (0.75, (0.7, 0.3)),
                                         (0.4, (0.5, 0.3, 0.2))])
def test_vectorized_frequencies_match_the_mechanism(alpha, beta):
    rng = np.random.default_rng(7)
    t, m, n = thresholds(alpha, beta), Mechanism(alpha, beta), 1_000_000
    for true in range(len(beta)):
        reports = randomize_many(np.full(n, true, dtype=np.int8), t, rng)
        for j, count in enumerate(np.bincount(reports, minlength=len(beta))):
            p = m.probability(true, j)
            assert abs(count / n - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_report_cumulative_is_the_exact_client_distribution():
    t = thresholds(0.4, (0.5, 0.3, 0.2))
    weights = t.option_weights
    for i, row in enumerate(report_cumulative(t)):
        for j, q in enumerate(row):
            # the client's P(report <= j | i), summed from its two-draw rule, times N^2
            exact = sum(t.keep * N * (i == jj) + (N - t.keep) * weights[jj] for jj in range(j + 1))
            assert q == exact


class ScriptedGenerator:
    """Stands in for numpy's Generator: uniforms U / 2^53 and extra low bits from lists."""

    def __init__(self, top, low):
        self._top, self._low = top, iter(low)

    def random(self, size):
        return np.array(self._top[:size], dtype=np.int64) / N

    def integers(self, low, high):
        return next(self._low)


def test_ties_on_the_top_53_bits_are_decided_exactly():
    t = thresholds(0.1, (0.1, 0.9))  # odd thresholds: Q_00 is not a multiple of 2^53
    q = report_cumulative(t)[0][0]  # true = No: report Yes iff V >= Q_00
    top, rest = q >> EXTRA_BITS, q & (2**EXTRA_BITS - 1)
    assert rest > 0  # a real tie case: Q is not a multiple of 2^42
    rng = ScriptedGenerator([top - 1, top, top, top + 1], [rest - 1, rest])
    reports = randomize_many(np.zeros(4, dtype=np.int8), t, rng)
    assert reports.tolist() == [0, 0, 1, 1]


def test_true_answers_follow_the_proportions():
    rng = np.random.default_rng(3)
    answers = true_answers([0.2, 0.5, 0.3], 500_000, rng)
    frequencies = np.bincount(answers) / answers.size
    assert np.all(np.abs(frequencies - [0.2, 0.5, 0.3]) < 5 * math.sqrt(0.25 / answers.size))


def test_scalar_and_vectorized_agree_in_distribution():
    """Both paths against each other: a two-sample check on 200,000 reports each."""
    rng = np.random.default_rng(11)
    t = thresholds(0.3, (0.2, 0.5, 0.3))
    n = 200_000
    vectorized = np.bincount(randomize_many(np.full(n, 1, dtype=np.int8), t, rng), minlength=3)
    scalar = np.zeros(3)
    for _ in range(n):
        scalar[randomize(1, t, lambda: int(rng.integers(0, N)))] += 1
    for a, b in zip(vectorized / n, scalar / n, strict=True):
        assert abs(a - b) < 5 * math.sqrt(2 * 0.25 / n)
