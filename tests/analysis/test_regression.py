"""rr_logistic against R's rr::rrreg (fixtures made by tests/reference_r/make_fixtures.R),
by simulation, and its refusals."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ldpsurvey.analysis import AnalysisError, ConvergenceError, rr_logistic
from ldpsurvey.analysis.regression import parse_formula
from ldpsurvey.shared import Mechanism

REFERENCE = Path(__file__).parents[1] / "reference_r"
RRREG = json.loads((REFERENCE / "rrreg_forced_known.json").read_text())
YES_NO = ["No", "Yes"]


def forced_known(p: float, p1: float) -> Mechanism:
    """rr's forced-known design (p honest, p1 forced yes) as (alpha, beta)."""
    return Mechanism(p, (1 - p1 / (1 - p), p1 / (1 - p)))


def r_frame(case: dict) -> pd.DataFrame:
    """The fixture's data with R's factor levels and the outcome as a yes/no category."""
    frame = pd.DataFrame(case["data"])
    for column, levels in case["levels"].items():
        frame[column] = pd.Categorical(frame[column], categories=levels)
    frame["smoked"] = pd.Categorical.from_codes(frame["smoked"].astype(int), YES_NO)
    return frame


def r_name(name: str) -> str:
    """formulaic's column name as R's model.matrix spells it: region[T.south] -> regionsouth."""
    return "(Intercept)" if name == "Intercept" else name.replace("[T.", "").rstrip("]")


def test_rrregs_default_standard_errors_are_not_the_observed_informations():
    """What docs/analysis.md says: rrreg's default SEs (outer product of the scores) are not
    the observed information's, which rr_logistic gives and rrreg(optim = TRUE) matches."""
    ratios = [opg / observed for case in RRREG["cases"]
              for opg, observed in zip(case["se_opg"], case["se_observed"], strict=True)]
    assert max(abs(r - 1) for r in ratios) == pytest.approx(0.041, abs=0.0005)


@pytest.mark.parametrize("case", RRREG["cases"], ids=lambda c: c["name"])
def test_equals_rrreg_forced_known(case):
    """Coefficients, observed-information SEs, Wald CIs, log-likelihood and predicted
    prevalence by group equal R's on the same data (1e-4 asked; they agree far closer)."""
    fit = rr_logistic(case["formula"], r_frame(case),
                      {"smoked": forced_known(case["p"], case["p1"])})
    assert [r_name(c.name) for c in fit.coefficients] == case["coefficient_names"]
    np.testing.assert_allclose([c.estimate for c in fit.coefficients], case["coefficients"],
                               atol=1e-6)
    np.testing.assert_allclose([c.standard_error for c in fit.coefficients],
                               case["se_observed"], atol=1e-6)
    # rrreg(optim = TRUE): R's numerical Hessian of the same likelihood.
    np.testing.assert_allclose([c.standard_error for c in fit.coefficients],
                               case["se_optim_hessian"], atol=1e-4)
    np.testing.assert_allclose(fit.covariance, case["vcov_observed"], atol=1e-6)
    np.testing.assert_allclose([c.ci_low for c in fit.coefficients], case["ci_low"], atol=1e-5)
    np.testing.assert_allclose([c.ci_high for c in fit.coefficients], case["ci_high"], atol=1e-5)
    assert fit.log_likelihood == pytest.approx(case["loglik"], abs=1e-6)
    assert fit.variance == "observed information" and fit.effective_n == fit.n == len(case["data"]["smoked"])
    everyone, *groups = fit.predicted
    assert (everyone.variable, everyone.n) == (None, fit.n)
    assert everyone.prevalence == pytest.approx(case["prevalence_all"], abs=1e-6)
    assert len(groups) == len(case["predicted"])
    for ours, theirs in zip(groups, case["predicted"], strict=True):
        assert (ours.variable, ours.level, ours.n) == (theirs["variable"], theirs["level"], theirs["n"])
        assert ours.prevalence == pytest.approx(theirs["prevalence"], abs=1e-6)
        assert ours.standard_error == pytest.approx(theirs["standard_error"], abs=1e-6)
        assert ours.ci_low < ours.prevalence < ours.ci_high


def simulate(rng, n: int, b: np.ndarray, mechanism: Mechanism) -> pd.DataFrame:
    """n respondents with an age (numeric) and a sex (category), true answers from the
    logistic model b, randomized by `mechanism`."""
    age = rng.uniform(-2, 2, n)
    male = rng.random(n) < 0.5
    truth = rng.random(n) < 1 / (1 + np.exp(-(b[0] + b[1] * age + b[2] * male)))
    forced = rng.random(n) < mechanism.beta[1]
    reported = np.where(rng.random(n) < mechanism.alpha, truth, forced)
    return pd.DataFrame({"y": pd.Categorical.from_codes(reported.astype(int), YES_NO),
                         "age": age,
                         "sex": pd.Categorical.from_codes(male.astype(int), ["female", "male"])})


def test_recovers_true_coefficients_within_their_standard_errors():
    """Simulated at known coefficients, n = 20,000: every estimate within 4 SEs of its truth
    (a false alarm has probability below 2e-4 per run)."""
    b = np.array([-0.7, 0.8, 0.5])
    mechanism = Mechanism.from_epsilon(1.5)
    fit = rr_logistic("y ~ age + sex", simulate(np.random.default_rng(7), 20_000, b, mechanism),
                      {"y": mechanism})
    for coefficient, truth in zip(fit.coefficients, b, strict=True):
        assert abs(coefficient.estimate - truth) < 4 * coefficient.standard_error


def test_coefficient_intervals_cover_at_their_level():
    """200 simulated surveys of 1,000: each 90 % interval covers its coefficient in 90 % of
    them, within 3.5 binomial SEs (sqrt(0.9 * 0.1 / 200) = 0.021)."""
    b = np.array([-0.4, 0.6, -0.5])
    mechanism = Mechanism(0.6, 0.4)
    rng = np.random.default_rng(11)
    covered = np.zeros(3)
    runs = 200
    for _ in range(runs):
        fit = rr_logistic("y ~ age + sex", simulate(rng, 1000, b, mechanism), {"y": mechanism},
                          confidence=0.9)
        covered += [c.ci_low <= t <= c.ci_high for c, t in zip(fit.coefficients, b, strict=True)]
    assert np.all(np.abs(covered / runs - 0.9) < 3.5 * np.sqrt(0.9 * 0.1 / runs)), covered


def randomize(rng, mechanism: Mechanism, true: np.ndarray) -> np.ndarray:
    forced = rng.choice(mechanism.k, len(true), p=mechanism.beta)
    return np.where(rng.random(len(true)) < mechanism.alpha, true, forced)


def test_randomized_covariates_are_recovered_and_naive_fits_are_attenuated():
    """A randomized yes/no covariate and a randomized 3-option one beside a plain category:
    the joint-table likelihood recovers every coefficient within 4 SEs; fitting the reported
    covariates as if true shrinks the randomized covariate's coefficient well below it."""
    rng = np.random.default_rng(3)
    n = 20_000
    b = np.array([-0.5, 1.0, 0.5, -0.4, 0.6, -0.3])
    region = rng.choice(3, n, p=[0.5, 0.3, 0.2])
    drinks = (rng.random(n) < np.array([0.3, 0.5, 0.7])[region]).astype(int)
    sleep = rng.choice(3, n, p=[0.3, 0.4, 0.3])
    eta = (b[0] + b[1] * drinks + b[2] * (region == 1) + b[3] * (region == 2)
           + b[4] * (sleep == 1) + b[5] * (sleep == 2))
    truth = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    mechanisms = {"y": Mechanism(0.7, 0.4), "drinks": Mechanism(0.75, 0.5),
                  "sleep": Mechanism(0.8, (0.3, 0.3, 0.4))}
    frame = pd.DataFrame({
        "y": pd.Categorical.from_codes(randomize(rng, mechanisms["y"], truth), YES_NO),
        "drinks": pd.Categorical.from_codes(randomize(rng, mechanisms["drinks"], drinks), YES_NO),
        "region": pd.Categorical.from_codes(region, ["north", "south", "west"]),
        "sleep": pd.Categorical.from_codes(randomize(rng, mechanisms["sleep"], sleep),
                                           ["short", "normal", "long"])})
    fit = rr_logistic("y ~ drinks + region + sleep", frame, mechanisms)
    assert fit.randomized_covariates == ("drinks", "sleep")
    for coefficient, truth_b in zip(fit.coefficients, b, strict=True):
        assert abs(coefficient.estimate - truth_b) < 4 * coefficient.standard_error
    naive = rr_logistic("y ~ drinks + region + sleep",
                        frame.assign(drinks=frame.drinks.astype(str), sleep=frame.sleep.astype(str)),
                        {"y": mechanisms["y"]})
    assert naive.randomized_covariates == ()
    assert naive.coefficients[1].estimate < b[1] - 4 * naive.coefficients[1].standard_error
    # The groups of a randomized covariate are the model's: sizes estimated, summing to n.
    sizes = [g.n for g in fit.predicted if g.variable == "sleep"]
    assert sum(sizes) == pytest.approx(n)
    assert [round(s / n, 2) for s in sizes] == pytest.approx([0.3, 0.4, 0.3], abs=0.03)


def test_a_nearly_exact_covariate_fits_as_a_plain_one():
    """A randomized covariate reported truthfully with probability 1 - 1e-9 gives the plain
    fit's coefficients: the latent sum reduces to the reported value."""
    rng = np.random.default_rng(5)
    mechanism = Mechanism(0.6, 0.5)
    frame = simulate(rng, 3000, np.array([-0.3, 0.5, 0.8]), mechanism)
    exact = Mechanism(1 - 1e-9, 0.5)
    plain = rr_logistic("y ~ sex", frame, {"y": mechanism})
    latent = rr_logistic("y ~ sex", frame, {"y": mechanism, "sex": exact})
    np.testing.assert_allclose([c.estimate for c in latent.coefficients],
                               [c.estimate for c in plain.coefficients], atol=1e-5)
    np.testing.assert_allclose([c.standard_error for c in latent.coefficients],
                               [c.standard_error for c in plain.coefficients], atol=1e-4)


def test_a_coefficient_at_infinity_fails_loudly():
    """Every man reported no: the MLE of P(yes | male) is 0, the sex coefficient runs to
    minus infinity, and the fit says so instead of returning a number."""
    rng = np.random.default_rng(2)
    mechanism = Mechanism(0.6, 0.5)
    frame = simulate(rng, 2000, np.array([0.0, 0.5, 0.0]), mechanism)
    frame.loc[frame.sex == "male", "y"] = "No"
    with pytest.raises(ConvergenceError, match="infinity"):
        rr_logistic("y ~ sex", frame, {"y": mechanism})


@pytest.mark.parametrize("formula", [
    "y ~ I(__import__('os').system('true'))", "y ~ log(age)", "y ~ age +", "~ age", "y ~ age - 1",
    "y", 5])
def test_only_names_joined_by_plus_colon_star_are_formulas(formula):
    with pytest.raises(AnalysisError, match="formula"):
        rr_logistic(formula, pd.DataFrame({"y": []}), {})


def test_formula_terms():
    assert parse_formula("y ~ a + b:c + d * e") == ("y", ["a", "b", "c", "d", "e"])
    assert parse_formula(" y~1 ") == ("y", [])


@pytest.mark.parametrize("formula, mechanisms, problem", [
    ("y ~ nothing", {"y": Mechanism(0.6, 0.5)}, "no column 'nothing'"),
    ("age ~ sex", {"y": Mechanism(0.6, 0.5)}, "must be a randomized yes/no question"),
    ("y ~ y", {"y": Mechanism(0.6, 0.5)}, "cannot be a covariate too"),
    ("y ~ age + sex", {"y": Mechanism(0.6, 0.5), "sex": Mechanism(0.6, 0.5)},
     "categorical covariates only, not age"),
    ("y ~ sex", {"y": Mechanism(0.6, 0.5), "sex": Mechanism(0.6, (0.2, 0.3, 0.5))},
     "must be categorical with its 3 options"),
])
def test_bad_input_is_named(formula, mechanisms, problem):
    frame = simulate(np.random.default_rng(1), 200, np.zeros(3), Mechanism(0.6, 0.5))
    with pytest.raises(AnalysisError, match=problem):
        rr_logistic(formula, frame, mechanisms)


def test_collinear_covariates_are_refused():
    frame = simulate(np.random.default_rng(1), 500, np.zeros(3), Mechanism(0.6, 0.5))
    frame["twice"] = 2 * frame["age"]
    with pytest.raises(AnalysisError, match="collinear"):
        rr_logistic("y ~ age + twice", frame, {"y": Mechanism(0.6, 0.5)})


def test_missing_values_drop_their_rows():
    mechanism = Mechanism(0.6, 0.5)
    frame = simulate(np.random.default_rng(4), 1000, np.array([0.0, 0.5, 0.0]), mechanism)
    holed = frame.copy()
    holed.loc[:99, "age"] = np.nan
    fit = rr_logistic("y ~ age", holed, {"y": mechanism})
    assert fit.n == 900
    assert fit.coefficients[1].estimate == rr_logistic(
        "y ~ age", frame.iloc[100:], {"y": mechanism}).coefficients[1].estimate


def test_tallied_patterns_fit_as_their_rows():
    """A table of distinct rows with their counts (what the server tallies) gives the fit of
    the rows themselves, with randomized covariates and without."""
    rng = np.random.default_rng(6)
    mechanism = Mechanism(0.6, 0.5)
    frame = simulate(rng, 2000, np.array([-0.3, 0.5, 0.8]), mechanism)
    frame["sex_reported"] = frame["sex"]
    tally = frame.groupby(["y", "sex"], observed=True).size().rename("n").reset_index()
    for mechanisms in ({"y": mechanism}, {"y": mechanism, "sex": Mechanism(0.7, 0.5)}):
        rows = rr_logistic("y ~ sex", frame, mechanisms)
        tallied = rr_logistic("y ~ sex", tally, mechanisms, counts="n")
        assert tallied.n == rows.n == 2000
        np.testing.assert_allclose([c.estimate for c in tallied.coefficients],
                                   [c.estimate for c in rows.coefficients], atol=1e-8)
        np.testing.assert_allclose(tallied.covariance, rows.covariance, atol=1e-8)
        assert [g.n for g in tallied.predicted] == pytest.approx([g.n for g in rows.predicted])


@pytest.mark.parametrize("counts, problem", [("nope", "non-negative integers"),
                                             ("age", "non-negative integers")])
def test_counts_must_be_a_column_of_counts(counts, problem):
    frame = simulate(np.random.default_rng(1), 100, np.zeros(3), Mechanism(0.6, 0.5))
    with pytest.raises(AnalysisError, match=problem):
        rr_logistic("y ~ sex", frame, {"y": Mechanism(0.6, 0.5)}, counts=counts)


def test_a_randomized_covariate_equals_rs_direct_maximization():
    """Neither rr nor RRreg takes a randomized covariate: R's optim maximized the same
    likelihood (the true covariate summed over, its share free per region) on this data, and
    optimHess gave its SEs; ours agree to 1e-4."""
    case = json.loads((REFERENCE / "latent_covariate.json").read_text())
    frame = pd.DataFrame(case["data"])
    frame["region"] = pd.Categorical(frame["region"], categories=case["levels"]["region"])
    for column in ("y", "x"):
        frame[column] = pd.Categorical.from_codes(frame[column].astype(int), YES_NO)
    mechanisms = {"y": Mechanism(case["ay"], case["by"]), "x": Mechanism(case["ax"], case["bx"])}
    fit = rr_logistic("y ~ x + region", frame, mechanisms)
    assert fit.randomized_covariates == ("x",)
    np.testing.assert_allclose([c.estimate for c in fit.coefficients], case["parameters"][:3],
                               atol=1e-4)
    np.testing.assert_allclose([c.standard_error for c in fit.coefficients], case["se"][:3],
                               atol=1e-4)
    assert fit.log_likelihood == pytest.approx(case["loglik"], abs=1e-6)
