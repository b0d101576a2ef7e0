"""The symmetric cheating-detection design: RRreg's CDMsym on the same data
(tests/reference_r/cdmsym.json), its epsilon, the constrained fit and simulation."""

import itertools
import json
import math
import random
from pathlib import Path

import pytest

from ldpsurvey.shared import Mechanism
from ldpsurvey.shared.mechanisms.cheating import (
    CheatingDesign,
    estimate_cheating,
    log_likelihood,
    maximum_likelihood,
)

CDMSYM = json.loads((Path(__file__).parents[1] / "reference_r" / "cdmsym.json").read_text())


def from_rrreg(p) -> CheatingDesign:
    """RRreg's p = (yes_1, no_1, yes_2, no_2) as two forced-response mechanisms."""
    groups = []
    for yes, no in ((p[0], p[1]), (p[2], p[3])):
        alpha = 1 - yes - no
        groups.append(Mechanism(alpha, (no / (1 - alpha), yes / (1 - alpha))))
    return CheatingDesign(tuple(groups))


@pytest.mark.parametrize("case", CDMSYM["cases"], ids=lambda c: c["name"])
def test_equals_rrreg_cdmsym(case):
    design = from_rrreg(case["p"])
    assert design.rrreg_p == pytest.approx(case["p"], abs=1e-15)
    # The fixture's counts are its responses' (the data R fitted).
    groups = case["group"]
    yes = [sum(r for r, g in zip(case["response"], groups, strict=True) if g == k) for k in (1, 2)]
    assert yes == case["yes_counts"] and [groups.count(1), groups.count(2)] == case["n"]
    result = estimate_cheating(design, yes, case["n"])
    honest_yes, honest_no, noncompliant = result.shares
    assert honest_yes.p_hat == pytest.approx(case["pi"], abs=1e-9)
    assert honest_no.p_hat == pytest.approx(case["beta"], abs=1e-9)
    assert noncompliant.p_hat == pytest.approx(case["gamma"], abs=1e-9)
    assert honest_yes.standard_error == pytest.approx(case["pi_se"], abs=1e-9)
    assert noncompliant.standard_error == pytest.approx(case["gamma_se"], abs=1e-9)
    assert result.log_likelihood == pytest.approx(case["loglik"], abs=1e-8)
    for share in result.shares:  # interior: the ML point is the closed form
        assert share.p_mle == pytest.approx(share.p_hat, abs=1e-12)
        assert share.ci_low <= share.p_mle <= share.ci_high
    # beta's SE (RRreg gives none): Var(1 - pi - gamma) from the same covariance.
    cov = result.covariance
    assert honest_no.standard_error ** 2 == pytest.approx(
        cov[0][0] + cov[2][2] + 2 * cov[0][2], rel=1e-9)


@pytest.mark.parametrize("eps", [0.25, 0.5, 1.0, math.log(3), 2.0, 3.0, 5.0])
def test_each_group_is_finite_epsilon_and_equal_to_the_question_s(eps):
    """Both groups' mechanisms are at exactly eps (never above), and the pair (group,
    report), the group drawn with probability 1/2 whatever the answer, has epsilon eps:
    the largest log-ratio over every output of P(output | yes) / P(output | no) and back."""
    design = CheatingDesign.from_epsilon(eps)
    for mechanism in design.groups:
        assert math.isfinite(mechanism.epsilon) and mechanism.epsilon <= eps
        assert mechanism.epsilon == pytest.approx(eps, rel=1e-12)
    ratios = [math.log((0.5 * m.probability(t, r)) / (0.5 * m.probability(1 - t, r)))
              for m in design.groups for r in (0, 1) for t in (0, 1)]
    assert max(ratios) == pytest.approx(eps, rel=1e-12) and design.epsilon <= eps
    assert design.determinant != 0.0


def test_the_original_design_forcing_only_yes_has_infinite_epsilon():
    """Clark and Desharnais' original design tells respondents only to say yes: a true yes
    never reports No, so No has probability 0 under yes and > 0 under no (an infinite ratio),
    and the mechanism is refused."""
    told_yes = 0.3
    p_no_given_yes, p_no_given_no = 0.0, 1 - told_yes
    assert p_no_given_yes == 0.0 < p_no_given_no
    with pytest.raises(ValueError, match="beta"):
        Mechanism(1 - told_yes, (0.0, 1.0))


def test_explicit_minority_and_the_default_choice():
    design = CheatingDesign.from_epsilon(1.0, minority=0.25)
    assert design.groups[0].beta == (0.25, 0.75) and design.groups[1].beta == (0.75, 0.25)
    best = CheatingDesign.from_epsilon(1.0)
    assert best.reference_variance() <= design.reference_variance()
    assert all(best.reference_variance() <= CheatingDesign.from_epsilon(1.0, m / 100)
               .reference_variance() for m in range(1, 50))


def test_the_constrained_fit_is_the_best_point_of_the_simplex():
    """Few no answers in group 2 put the closed form's gamma below 0: the fit then lies on
    the boundary, at least as likely as every point of a fine grid over the simplex, and
    the interval of each share contains its fitted point."""
    design = CheatingDesign.from_epsilon(1.0, minority=0.2)
    yes, n = (720, 240), (1000, 1000)
    _, gamma = design.solve([c / m for c, m in zip(yes, n, strict=True)])
    assert gamma < 0
    best = maximum_likelihood(design, yes, n)
    assert best[1] == pytest.approx(0.0, abs=1e-9) and 0 <= best[0] <= 1
    top = log_likelihood(design, yes, n, *best)
    grid = [(i / 400, j / 400) for i, j in itertools.product(range(401), repeat=2) if i + j <= 400]
    assert top >= max(log_likelihood(design, yes, n, *point) for point in grid) - 1e-9
    result = estimate_cheating(design, list(yes), list(n))
    for share in result.shares:
        assert share.ci_low <= share.p_mle <= share.ci_high
    assert result.shares[2].p_mle == pytest.approx(0.0, abs=1e-9)


def simulate(design: CheatingDesign, shares, n: int, rng: random.Random) -> tuple[list, list]:
    """Each of n respondents per group is honest yes, honest no or non-compliant with
    `shares`; compliers answer through their group's mechanism, non-compliers say No."""
    yes = []
    for mechanism in design.groups:
        told_no, told_yes = ((1 - mechanism.alpha) * b for b in mechanism.beta)
        count = 0
        for _ in range(n):
            kind = rng.choices(("yes", "no", "cheat"), weights=shares)[0]
            u = rng.random()
            if kind != "cheat":
                count += u < told_yes or (u >= told_yes + told_no and kind == "yes")
        yes.append(count)
    return yes, [n, n]


def test_intervals_cover_and_non_compliance_is_flagged():
    """200 simulated surveys of 2 x 1,500 at pi = 0.3, gamma = 0.1: each share's 95 % interval
    covers its truth in 95 % of them (within 3.5 binomial SEs), and with 15 % non-compliers
    in 2 x 5,000 the results flag them."""
    rng = random.Random(1998)
    design = CheatingDesign.from_epsilon(2.0)
    truth = (0.3, 0.6, 0.1)
    covered = [0, 0, 0]
    runs = 200
    for _ in range(runs):
        result = estimate_cheating(design, *simulate(design, truth, 1500, rng))
        for j, share in enumerate(result.shares):
            covered[j] += share.ci_low <= truth[j] <= share.ci_high
    tolerance = 3.5 * math.sqrt(0.95 * 0.05 / runs)
    assert all(abs(c / runs - 0.95) < tolerance for c in covered), covered
    flagged = estimate_cheating(design, *simulate(design, (0.3, 0.55, 0.15), 5000, rng))
    assert flagged.noncompliance_detected and "No whatever they are told" in flagged.warning
    expected = [round(3000 * rate) for rate in design.report_rates(0.3, 0.0)]
    honest = estimate_cheating(design, expected, [3000, 3000])  # exactly as compliers report
    assert honest.shares[2].ci_low == 0.0
    assert not honest.noncompliance_detected and honest.warning is None


@pytest.mark.parametrize("yes, n, problem", [
    ([1], [10], "two groups"), ([1, 2], [1, 10], "at least 2"), ([11, 2], [10, 10], "at least 2"),
    ([1.0, 2], [10, 10], "integers"), ([True, 2], [10, 10], "integers")])
def test_bad_counts_are_refused(yes, n, problem):
    with pytest.raises(ValueError, match=problem):
        estimate_cheating(CheatingDesign.from_epsilon(1.0), yes, n)


def test_designs_that_cannot_identify_cheating_are_refused():
    same = Mechanism(0.5, 0.5)
    with pytest.raises(ValueError, match="not identified"):
        CheatingDesign((same, same))
    with pytest.raises(ValueError, match="two yes/no"):
        CheatingDesign((same, Mechanism(0.5, (0.2, 0.3, 0.5))))
