import json
import math
import random
from fractions import Fraction
from importlib import resources

import pytest

from ldpsurvey.shared import Mechanism, epsilon
from ldpsurvey.shared.mechanisms.budget import exceeds
from ldpsurvey.shared.mechanisms.randomizer import (
    N,
    randomize,
    realized_epsilon,
    secure_draw,
    thresholds,
)

VECTORS = json.loads((resources.files("ldpsurvey.shared") / "testvectors.json").read_text())


def feed(values):
    values = iter(values)
    return lambda: next(values)


@pytest.mark.parametrize("case", VECTORS["cases"], ids=[c["name"] for c in VECTORS["cases"]])
def test_vectors(case):
    t = thresholds(case["alpha"], case["beta"])
    assert t.keep == case["keep_threshold"]
    assert list(t.cumulative) == case["cumulative_thresholds"]
    assert realized_epsilon(t) == case["realized_epsilon"]
    for draw in case["draws"]:
        assert randomize(draw["true"], t, feed(draw["u"])) == draw["output"]


@pytest.mark.parametrize("case", VECTORS["cases"], ids=[c["name"] for c in VECTORS["cases"]])
def test_vectors_follow_the_definition_in_exact_arithmetic(case):
    """Recompute the thresholds with exact rationals, independently of the float code."""
    assert case["keep_threshold"] == math.floor(Fraction(case["alpha"]) * N)
    running = 0.0
    for j, b in enumerate(case["beta"]):
        running += b  # the definition's left-to-right double sum
        expected = N if j == len(case["beta"]) - 1 else math.floor(Fraction(running) * N)
        assert case["cumulative_thresholds"][j] == expected
    # the realized epsilon, as an exact rational before the logarithm
    weights = [c - p for c, p in zip(case["cumulative_thresholds"],
                                     [0, *case["cumulative_thresholds"][:-1]], strict=True)]
    t = case["keep_threshold"]
    ratio = 1 + Fraction(t * N, (N - t) * min(weights))
    assert math.isclose(case["realized_epsilon"], math.log(ratio), rel_tol=1e-15)
    # and the outputs, straight from the rule
    for draw in case["draws"]:
        u1, u2 = draw["u"]
        want = draw["true"] if u1 < t else next(
            j for j, c in enumerate(case["cumulative_thresholds"]) if u2 < c)
        assert draw["output"] == want


def test_vectors_cover_the_required_shapes():
    shapes = {(len(c["beta"]), len(set(c["beta"])) > 1) for c in VECTORS["cases"]}
    assert (2, True) in shapes and (3, True) in shapes and any(k > 2 for k, _ in shapes)


@pytest.mark.parametrize("alpha, beta", [(0.5, [0.5, 0.5]), (0.75, [0.7, 0.3]),
                                         (0.4, [0.5, 0.3, 0.2]), (0.9, [0.05, 0.95])])
def test_realized_epsilon_is_the_nominal_one_within_tolerance(alpha, beta):
    realized = realized_epsilon(thresholds(alpha, beta))
    assert math.isclose(realized, epsilon(alpha, beta), rel_tol=1e-12)
    assert not exceeds(realized, epsilon(alpha, beta))


def test_at_the_ceiling_is_not_above_it():
    m = Mechanism.from_epsilon(math.log(3), [1 / 3] * 3)
    assert not exceeds(realized_epsilon(thresholds(m.alpha, m.beta)), math.log(3))


NO_PRIVACY = (r"^these parameters leave an option with no chance of being forced "
              r"\(or alpha rounds to 1\): no privacy$")


def test_degenerate_parameters_are_refused():
    with pytest.raises(ValueError, match=NO_PRIVACY):
        thresholds(0.5, [1e-300, 1 - 1e-300])


def test_alpha_that_rounds_to_one_is_refused():
    """alpha = 1 gives T = 2^53: a randomizer that always tells the truth."""
    with pytest.raises(ValueError, match=NO_PRIVACY):
        thresholds(1.0, [0.5, 0.5])


def test_the_extreme_but_private_parameters_are_accepted():
    """alpha = 0 (pure noise) and the largest alpha below 1 are valid, and so is an option forced
    with the smallest probability there is, 2^-53."""
    assert thresholds(0.0, [0.5, 0.5]).keep == 0
    assert thresholds(1 - 2**-53, [0.5, 0.5]).keep == N - 1
    assert thresholds(0.5, [1 - 2**-53, 2**-53]).option_weights == (N - 1, 1)


def test_an_option_index_outside_the_question_is_refused():
    t = thresholds(0.5, [0.2, 0.3, 0.5])
    for option in (-1, 3):
        with pytest.raises(ValueError, match=r"^the answer is not one of the question's options$"):
            randomize(option, t, draw=lambda: 0)


def test_error_never_contains_the_answer():
    t = thresholds(0.5, [0.5, 0.5])
    with pytest.raises(ValueError) as info:
        randomize(7, t)
    assert "7" not in str(info.value)


@pytest.mark.parametrize("alpha, beta", [(0.5, (0.5, 0.5)), (0.3, (0.2, 0.5, 0.3))])
def test_output_frequencies_match_the_mechanism(alpha, beta):
    """10^5 randomizations per true option (seeded draws), within 5 standard errors."""
    rng = random.Random(1121)
    t = thresholds(alpha, beta)
    m = Mechanism(alpha, beta)
    draws = 100_000
    for true in range(len(beta)):
        counts = [0] * len(beta)
        for _ in range(draws):
            counts[randomize(true, t, lambda: rng.getrandbits(53))] += 1
        for j, count in enumerate(counts):
            p = m.probability(true, j)
            assert abs(count / draws - p) < 5 * math.sqrt(p * (1 - p) / draws)


def test_secure_draw_is_53_bits():
    values = [secure_draw() for _ in range(2000)]
    assert all(0 <= v < N for v in values)
    assert max(values) > N // 2 > min(values)
    assert len(set(values)) == len(values)
