"""Nothing shown outside its range (issue 40, item 2): every point and interval end of every
estimate lies in [0, 1] (numbers: [min, max]), and the point shown inside its interval, at the
extreme counts where rounding used to carry them an ulp past an end."""

import math

import pandas as pd
import pytest

from ldpsurvey.analysis import rake, weighted_estimates
from ldpsurvey.cli.output import p_phrase, p_text
from ldpsurvey.shared import Mechanism, estimate, fit_p_value, parse_definition
from ldpsurvey.shared.mechanisms.protocol import Settings
from ldpsurvey.shared.stats.design import alpha_for_epsilon
from ldpsurvey.shared.stats.distributions import P_FLOOR, reported_p

from helpers import tally

SETTINGS = Settings(0.95, "clopper-pearson")
EPSILONS = (0.1, 0.5, 1.0, math.log(3), 2.0, 3.0, 5.0)


def in_order(entry, low=0.0, high=1.0):
    """low <= ci_low <= p_mle <= ci_high <= high and p_hat_clipped in [low, high]."""
    return (low <= entry["ci_low"] <= entry["p_mle"] <= entry["ci_high"] <= high
            and low <= entry["p_hat_clipped"] <= high)


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("confidence", [0.9, 0.99])
def test_choice_estimates_stay_in_0_1_at_every_count(eps, confidence):
    """Every count of every n up to 40, yes/no and three options (the issue's example: alpha
    0.2449..., 5 yes of 5, gave p_mle = ci_high = 1 + 2e-16)."""
    alpha = alpha_for_epsilon(eps, (0.5, 0.5))
    designs = [Mechanism(alpha, (0.5, 0.5)), Mechanism(0.24491866240370913, (0.5, 0.5)),
               Mechanism(alpha, (0.2, 0.3, 0.5))]
    for design in designs:
        for n in range(1, 41):
            counts = ([[n - c, c] for c in range(n + 1)] if design.k == 2
                      else [[n, 0, 0], [0, n, 0], [0, 0, n], [n - 1, 1, 0]])
            for c in counts:
                for e in estimate(design, c, confidence=confidence):
                    assert in_order(e.as_dict()), (design, c, e)


def question(**fields):
    return parse_definition({"title": "t", "questions": [
        {"id": "q", "text": "Q?", **fields}]}).questions[0].scheme


@pytest.mark.parametrize("mechanism", ["duchi", "piecewise", "hybrid"])
@pytest.mark.parametrize("eps", EPSILONS)
def test_number_means_stay_in_min_max(mechanism, eps):
    """Everyone reporting the lowest or the highest value (the issue: a Duchi mean of
    99.00000000000001 on [18, 99])."""
    s = question(type="numeric", min=18, max=99, epsilon=eps, mechanism=mechanism)
    lowest = 0 if mechanism != "hybrid" or s.share else s.piecewise.outputs
    for report in (lowest, s.largest_report()):
        for n in (1, 2, 5, 20, 50):
            entry = s.summary(tally(s, [report] * n), SETTINGS)["options"][0]
            assert in_order(entry, 18, 99), (report, n, entry)


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("max_selected", [None, 2])
def test_multi_select_shares_stay_in_0_1(eps, max_selected):
    """Every bit set or none (the issue: a bit's share at 1.0000000000000007)."""
    fields = {} if max_selected is None else {"max_selected": max_selected}
    s = question(type="multi_select", options=["a", "b", "c", "d"], epsilon=eps, **fields)
    for n in (1, 5, 20, 50):
        for reports in ([s.largest_report()] * n, [0 if max_selected else [0] * 4] * n):
            for entry in s.summary(tally(s, reports), SETTINGS)["options"]:
                assert in_order(entry), (reports[0], n, entry)


def test_a_weighted_share_below_0_is_shown_clipped_with_the_unbiased_one_labelled():
    """All five report no under alpha 0.5: the unbiased weighted share is (0 - 0.25)/0.5 =
    -0.5; the point shown (p_hat_clipped) is 0, inside the interval, and `results --weights`
    prints it as the weighted estimate and -0.5 under "unbiased"."""
    frame = pd.DataFrame({"sex": ["f", "f", "f", "m", "m"],
                          "q": pd.Categorical.from_codes([0] * 5, ["No", "Yes"])})
    _, yes = weighted_estimates(frame["q"], Mechanism(0.5, 0.5),
                                rake(frame, {"sex": {"f": 0.5, "m": 0.5}}))
    assert yes.p_hat == pytest.approx(-0.5)
    assert yes.ci_low <= yes.p_hat_clipped == 0.0 <= yes.ci_high


def test_p_values_are_never_0():
    """A count far below the design's floor: the binomial tail underflows double precision,
    reported as the floor (read: p < 1e-300) and printed as that bound."""
    design = Mechanism(0.5, (0.5, 0.5))
    assert fit_p_value(design, [0, 100000]) == P_FLOOR
    assert fit_p_value(Mechanism(0.5, (0.2, 0.3, 0.5)), [0, 0, 100000]) == P_FLOOR
    assert estimate(design, [0, 100000])[0].fit_p_value == P_FLOOR
    assert p_text(P_FLOOR) == "< 1e-300" and p_phrase(P_FLOOR) == "p < 1e-300"
    assert p_text(1.3e-28) == "1.3e-28" and p_phrase(0.00123) == "p = 0.0012"
    assert reported_p(0.0) == P_FLOOR and reported_p(0.5) == 0.5
