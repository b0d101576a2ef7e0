"""Raking weights, weighted estimates and weighted regression: a case worked by hand, R's
survey package on the same data (tests/reference_r/raking.json) and simulation."""

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ldpsurvey.analysis import (
    AnalysisError,
    ConvergenceError,
    load_margins,
    rake,
    rr_logistic,
    weighted_estimates,
)
from ldpsurvey.analysis.weights import t_quantile
from ldpsurvey.shared import Mechanism
from ldpsurvey.shared.stats.intervals import clopper_pearson

RAKING = json.loads((Path(__file__).parents[1] / "reference_r" / "raking.json").read_text())
YES_NO = ["No", "Yes"]


def test_a_hand_worked_post_stratification():
    """One margin is post-stratification, worked exactly: 3 women and 2 men raked to 50/50
    get weights 5/6 and 5/4; reports yes, no, yes | yes, no give the weighted rate
    (2 * 5/6 + 5/4) / 5 = 7/12; the influence values' residuals within sex are
    (1/3, -2/3, 1/3 | 1/2, -1/2), so the variance is
    5/4 * ((5/6)^2 (1/9 + 4/9 + 1/9) + (5/4)^2 (1/4 + 1/4)) / 5^2 = 5/4 * 2150/1728 / 25,
    divided by alpha^2 for p_hat. Kish's n: 5^2 / (3 (5/6)^2 + 2 (5/4)^2) = 4.8."""
    frame = pd.DataFrame({"sex": ["f", "f", "f", "m", "m"],
                          "q": pd.Categorical.from_codes([1, 0, 1, 1, 0], YES_NO)})
    weights = rake(frame, {"sex": {"f": 0.5, "m": 0.5}})
    np.testing.assert_allclose(weights.values, [5 / 6] * 3 + [5 / 4] * 2, rtol=1e-12)
    assert weights.effective_n == pytest.approx(4.8, rel=1e-12)
    mechanism = Mechanism(0.5, 0.5)
    no, yes = weighted_estimates(frame["q"], mechanism, weights)
    assert yes.reported_rate == pytest.approx(7 / 12, rel=1e-12)
    assert yes.p_hat == pytest.approx((7 / 12 - 0.25) / 0.5, rel=1e-12)
    variance = Fraction(5, 4) * Fraction(2150, 1728) / 25
    assert yes.standard_error == pytest.approx(math.sqrt(variance) / 0.5, rel=1e-12)
    assert no.standard_error == pytest.approx(yes.standard_error, rel=1e-12)
    # Korn and Graubard's interval: Clopper-Pearson at n* = min(Kish's n, rate (1 - rate) /
    # Var(rate)) times
    # (z / t_df)^2, df = min(n - 1, (sum w^2)^2 / sum w^4) = min(4, 4.29).
    assert (3 * (5 / 6) ** 2 + 2 * (5 / 4) ** 2) ** 2 / (3 * (5 / 6) ** 4 + 2 * (5 / 4) ** 4) > 4
    df = 4
    n_star = min(4.8, (7 / 12) * (5 / 12) / float(variance)) * (1.959963984540054
                                                                / t_quantile(0.95, df)) ** 2
    low, high = clopper_pearson(n_star * 7 / 12, n_star, 0.95)
    assert (yes.ci_low, yes.ci_high) == pytest.approx((max(0.0, (low - 0.25) / 0.5),
                                                       min(1.0, (high - 0.25) / 0.5)), rel=1e-12)
    assert (yes.n, yes.effective_n) == (5, weights.effective_n)


def reference_frame() -> pd.DataFrame:
    frame = pd.DataFrame(RAKING["data"])
    for column, levels in RAKING["levels"].items():
        frame[column] = pd.Categorical(frame[column], categories=levels)
    frame["smoked"] = pd.Categorical.from_codes(frame["smoked"].astype(int), YES_NO)
    return frame


def reference_mechanism() -> Mechanism:
    p, p1 = RAKING["p"], RAKING["p1"]
    return Mechanism(p, (1 - p1 / (1 - p), p1 / (1 - p)))


def test_raking_and_weighted_rate_equal_rs_survey_package():
    """Weights equal survey::calibrate(calfun = "raking") and survey::rake; the weighted
    reported rate and its linearization SE equal svymean on the calibrated design."""
    frame = reference_frame()
    weights = rake(frame, RAKING["margins"])
    np.testing.assert_allclose(weights.values, RAKING["weights"], rtol=1e-9)
    np.testing.assert_allclose(weights.values, RAKING["weights_rake"], rtol=1e-9)
    assert weights.effective_n == pytest.approx(RAKING["effective_n"], rel=1e-9)
    alpha = RAKING["p"]
    _, yes = weighted_estimates(frame["smoked"], reference_mechanism(), weights)
    assert yes.reported_rate == pytest.approx(RAKING["rate"], rel=1e-9)
    assert yes.standard_error * alpha == pytest.approx(RAKING["rate_se"], rel=1e-9)


def test_weighted_regression_equals_r_with_its_linearized_sandwich():
    frame = reference_frame()
    fit = rr_logistic("smoked ~ sex + age", frame, {"smoked": reference_mechanism()},
                      weights=rake(frame, RAKING["margins"]))
    assert fit.variance == "linearization"
    np.testing.assert_allclose([c.estimate for c in fit.coefficients], RAKING["coefficients"],
                               atol=1e-6)
    np.testing.assert_allclose(fit.covariance, RAKING["vcov_sandwich"], atol=1e-8)
    assert fit.effective_n == pytest.approx(RAKING["effective_n"], rel=1e-9)


def test_weighted_estimates_correct_a_biased_sample():
    """A population half women (true prevalence 0.2) and half men (0.6), so 0.4 overall;
    samples of 2,000 drawing 80 % women. Unweighted, the estimate centres near 0.28; raked
    to the known 50/50 margin, the 95 % interval covers 0.4 in 95 % of 200 samples, within
    3.5 binomial SEs."""
    rng = np.random.default_rng(8)
    mechanism = Mechanism.from_epsilon(2.0)
    runs, covered, unweighted = 200, 0, []
    for _ in range(runs):
        male = rng.random(2000) < 0.2
        truth = rng.random(2000) < np.where(male, 0.6, 0.2)
        reported = np.where(rng.random(2000) < mechanism.alpha, truth,
                            rng.random(2000) < mechanism.beta[1])
        frame = pd.DataFrame({"sex": np.where(male, "m", "f"),
                              "q": pd.Categorical.from_codes(reported.astype(int), YES_NO)})
        weights = rake(frame, {"sex": {"f": 0.5, "m": 0.5}})
        _, yes = weighted_estimates(frame["q"], mechanism, weights)
        covered += yes.ci_low <= 0.4 <= yes.ci_high
        unweighted.append((reported.mean() - (1 - mechanism.alpha) * mechanism.beta[1])
                          / mechanism.alpha)
    assert abs(covered / runs - 0.95) < 3.5 * math.sqrt(0.95 * 0.05 / runs)
    assert np.mean(unweighted) == pytest.approx(0.28, abs=0.01)


def test_raking_two_margins_meets_both():
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"sex": rng.choice(["f", "m"], 500, p=[0.7, 0.3]),
                          "age": rng.choice(["young", "old"], 500, p=[0.2, 0.8])})
    weights = rake(frame, {"sex": {"f": 51, "m": 49}, "age": {"young": 0.4, "old": 0.6}})
    assert weights.values.sum() == pytest.approx(500)
    assert weights.values[frame.sex == "m"].sum() / 500 == pytest.approx(0.49, abs=1e-9)
    assert weights.values[frame.age == "young"].sum() / 500 == pytest.approx(0.4, abs=1e-9)
    assert weights.columns == ("sex", "age") and weights.iterations > 1


@pytest.mark.parametrize("margins, problem", [
    ({"nope": {"a": 0.5, "b": 0.5}}, "no column 'nope'"),
    ({"q": {"No": 0.5, "Yes": 0.5}}, "randomized question"),
    ({"sex": {"f": 1}}, "at least 2 levels"),
    ({"sex": {"f": 1, "m": 0}}, "positive number"),
    ({"sex": {"f": 0.5, "m": 0.6}}, "sum to 1.1, not 1"),
    ({"sex": {"f": 1, "m": "half"}}, "positive number"),
    ({"sex": {"f": 50, "x": 50}}, "level 'm' with no population margin"),
    ({"sex": {"f": 0.4, "m": 0.4, "x": 0.2}}, "level 'x': no row has it"),
    ({}, "margins must map"),
])
def test_bad_margins_are_named(margins, problem):
    frame = pd.DataFrame({"sex": ["f", "m", "f"], "q": pd.Categorical.from_codes([0, 1, 1], YES_NO)})
    with pytest.raises(AnalysisError, match=problem):
        rake(frame, margins, randomized=["q"])


def test_margins_no_row_combination_can_meet_fail_loudly():
    """Everyone young is a woman and everyone old a man: 50/50 by sex and 90/10 by age
    cannot both hold."""
    frame = pd.DataFrame({"sex": ["f", "f", "m", "m"], "age": ["young", "young", "old", "old"]})
    with pytest.raises(ConvergenceError, match="did not meet the margins"):
        rake(frame, {"sex": {"f": 0.5, "m": 0.5}, "age": {"young": 0.9, "old": 0.1}},
             max_iterations=50)


def test_margins_load_from_csv_and_json(tmp_path):
    (tmp_path / "m.csv").write_text("column,level,share\nsex,f,51\nsex,m,49\nage,young,0.4\n"
                                    "age,old,0.6\n")
    (tmp_path / "m.json").write_text(json.dumps({"sex": {"f": 51, "m": 49},
                                                 "age": {"young": 0.4, "old": 0.6}}))
    expected = {"sex": {"f": 0.51, "m": 0.49}, "age": {"young": 0.4, "old": 0.6}}
    for name in ("m.csv", "m.json"):
        loaded = load_margins(tmp_path / name)
        assert list(loaded) == list(expected)
        for column, shares in expected.items():
            assert loaded[column] == pytest.approx(shares)
    (tmp_path / "bad.csv").write_text("variable,value\nsex,f\n")
    (tmp_path / "nan.csv").write_text("column,level,share\nsex,f,half\nsex,m,1\n")
    (tmp_path / "bad.json").write_text("{")
    for name, problem in (("bad.csv", "header column,level,share"), ("nan.csv", "line 2"),
                          ("bad.json", "not JSON")):
        with pytest.raises(AnalysisError, match=problem):
            load_margins(tmp_path / name)


def test_weights_with_randomized_covariates():
    """Margins equal to the sample's own shares give weights of 1: the weighted fit with a
    randomized covariate then has the unweighted coefficients, and its linearized SEs are
    close to the observed-information ones (the same variance, estimated two ways)."""
    rng = np.random.default_rng(12)
    n = 8000
    region = rng.choice(["north", "south"], n, p=[0.6, 0.4])
    truth_x = (rng.random(n) < np.where(region == "south", 0.6, 0.3)).astype(int)
    truth_y = rng.random(n) < 1 / (1 + np.exp(-(-0.4 + truth_x + 0.5 * (region == "south"))))
    mx, my = Mechanism(0.7, 0.5), Mechanism(0.6, 0.4)
    frame = pd.DataFrame({
        "region": pd.Categorical(region, categories=["north", "south"]),
        "x": pd.Categorical.from_codes(np.where(rng.random(n) < mx.alpha, truth_x,
                                                rng.random(n) < 0.5).astype(int), YES_NO),
        "y": pd.Categorical.from_codes(np.where(rng.random(n) < my.alpha, truth_y,
                                                rng.random(n) < 0.4).astype(int), YES_NO)})
    shares = frame["region"].value_counts(normalize=True).to_dict()
    weights = rake(frame, {"region": shares}, randomized=["x", "y"])
    np.testing.assert_allclose(weights.values, 1.0, atol=1e-12)
    plain = rr_logistic("y ~ x + region", frame, {"y": my, "x": mx})
    weighted = rr_logistic("y ~ x + region", frame, {"y": my, "x": mx}, weights=weights)
    assert weighted.variance == "linearization"
    np.testing.assert_allclose([c.estimate for c in weighted.coefficients],
                               [c.estimate for c in plain.coefficients], atol=1e-8)
    np.testing.assert_allclose([c.standard_error for c in weighted.coefficients],
                               [c.standard_error for c in plain.coefficients], rtol=0.1)
