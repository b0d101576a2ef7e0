"""`ldp-survey mock` scenarios of issue 28: a share of non-compliers under a cheating-detection
question (shared/examples/honesty*.toml), true coefficients of a logistic model fitted as
`results --regress` fits it (shared/examples/regression*.toml), and a biased sample weighted to
the population's margins of an openly answered question (shared/examples/weights*.toml)."""

import json
import re
from importlib import resources

import pytest
from click.testing import CliRunner
from scipy import stats

from ldpsurvey.cli import main
from ldpsurvey.cli.mock import EXAMPLES, embedded_aggregator, run_mock
from ldpsurvey.shared import read_definition

from helpers import run_mock as run_mock_cli

REGRESSION = {"title": "r", "questions": [
    {"id": "smoked", "text": "Smoked?", "type": "yes_no", "epsilon": 1.0},
    {"id": "sleep", "text": "Sleep?", "type": "choice", "options": ["a", "b", "c"],
     "epsilon": 1.0},
    {"id": "cheat", "text": "Cheated?", "type": "yes_no", "design": "cheating_detection",
     "epsilon": 1.0}]}
COEFFICIENTS = '{ Intercept = -1.0, "sleep[T.b]" = 0.5, "sleep[T.c]" = -0.5 }'


def example(name: str, *options: str):
    with resources.as_file(EXAMPLES / f"{name}.toml") as survey, \
            resources.as_file(EXAMPLES / f"{name}_truth.toml") as truth:
        return CliRunner().invoke(main, ["mock", "--survey", str(survey), "--truth", str(truth),
                                         *options])


def many(name: str, respondents: int, seeds: int) -> list:
    with resources.as_file(EXAMPLES / f"{name}.toml") as survey, \
            resources.as_file(EXAMPLES / f"{name}_truth.toml") as truth, \
            embedded_aggregator() as api:
        definition = read_definition(survey)
        return [run_mock(api, definition, truth, respondents, seed, respondents)
                for seed in range(seeds)]


def test_the_cheating_scenario_prints_each_share_beside_its_truth():
    result = example("honesty", "--respondents", "3000", "--seed", "3", "--json")
    assert result.exit_code == 0, result.output
    rows = [r for r in json.loads(result.stdout)["results"] if r["question"] == "took_supplies"]
    assert [(r["option"], r["true_proportion"]) for r in rows] == [
        ("Yes (honest)", 0.3), ("No (honest)", 0.6), ("No regardless (non-compliant)", 0.1)]
    for row in rows:
        assert row["covered"] == (row["ci_low"] <= row["true_proportion"] <= row["ci_high"])
        assert row["ci_method"] == "profile-likelihood"
    table = example("honesty", "--respondents", "3000", "--seed", "3").stdout
    assert "No regardless (non-compliant)  0.1000" in table and "profile-likelihood CI" in table


def test_the_cheating_scenario_covers_the_shares_over_many_seeds():
    """25 mock surveys of 3000 respondents, 10 % non-compliers: each share's 95 % interval may
    miss, but no more often than the 99.9 % binomial quantile of 25 tries at 5 %."""
    results = many("honesty", 3000, 25)
    for index in range(3):
        misses = sum(not r.rows()[index]["covered"] for r in results)
        assert misses <= stats.binom.ppf(0.999, 25, 0.05), (index, misses)
    detected = sum(r.estimates["questions"][0]["noncompliance_detected"] for r in results)
    assert detected >= 20  # 10 % non-compliers are found in most surveys of 3000


def test_the_regression_scenario_prints_each_coefficient_beside_its_truth():
    result = example("regression", "--respondents", "4000", "--seed", "2", "--json")
    assert result.exit_code == 0, result.output
    fit = json.loads(result.stdout)["regression"]
    assert fit["formula"] == "smoked ~ sleep + drinks" and fit["n"] == 4000
    assert [(c["coefficient"], c["true_value"]) for c in fit["coefficients"]] == [
        ("Intercept", -1.0), ("sleep[T.6 to 8]", -0.8), ("sleep[T.Over 8]", -0.5),
        ("drinks[T.Yes]", 1.2)]
    for c in fit["coefficients"]:
        assert c["covered"] == (c["ci_low"] <= c["true_value"] <= c["ci_high"])
    table = example("regression", "--respondents", "4000", "--seed", "2").stdout
    assert "Logistic regression smoked ~ sleep + drinks (n = 4000)" in table
    assert "coefficient intervals cover the truth" in table


def test_the_regression_scenario_covers_the_coefficients_over_many_seeds():
    """20 mock surveys of 4000 respondents: 80 coefficient intervals, and the outcome's true
    prevalence (the model averaged over the covariates) covered like any proportion."""
    results = many("regression", 4000, 20)
    coefficients = [c for r in results for c in r.regression_rows()]
    misses = sum(not c["covered"] for c in coefficients)
    assert misses <= stats.binom.ppf(0.999, len(coefficients), 0.05), misses
    outcome = [r.rows()[1] for r in results]  # smoked = Yes
    assert outcome[0]["option"] == "Yes"
    assert sum(not row["covered"] for row in outcome) <= stats.binom.ppf(0.999, 20, 0.05)


def test_no_regression_without_a_regression_table():
    result = example("honesty", "--respondents", "500", "--seed", "1", "--json")
    assert json.loads(result.stdout)["regression"] is None
    assert "Logistic regression" not in example("honesty", "--respondents", "500").stdout


@pytest.mark.parametrize("truth, message", [
    ("[truth]\nsleep = [0.3, 0.3, 0.4]\ncheat = { yes = 0.3 }\n[regression]\n"
     f"formula = 'smoked ~ sleep'\ncoefficients = {COEFFICIENTS}\n",
     r"question 'cheat' needs \{ yes = P\(honest Yes\), noncompliant"),
    ("[truth]\nsleep = [0.3, 0.3, 0.4]\ncheat = 0.2\n[regression]\n"
     "formula = 'smoked ~ sleep'\ncoefficients = { Intercept = -1.0 }\n",
     r"coefficients needs a number for each of Intercept, sleep\[T.b\], sleep\[T.c\]"),
    ("[truth]\nsleep = [0.3, 0.3, 0.4]\ncheat = 0.2\nsmoked = 0.1\n[regression]\n"
     f"formula = 'smoked ~ sleep'\ncoefficients = {COEFFICIENTS}\n",
     r"the outcome 'smoked' must be a yes/no question not given under \[truth\]"),
    ("[truth]\ncheat = 0.2\n[regression]\n"
     f"formula = 'smoked ~ sleep'\ncoefficients = {COEFFICIENTS}\n",
     r"give the covariate 'sleep' under \[truth\]"),
    ("[truth]\nsleep = [0.3, 0.3, 0.4]\nsmoked = 0.1\n[regression]\n"
     f"formula = 'cheat ~ sleep'\ncoefficients = {COEFFICIENTS}\n",
     r"'cheat' is not a forced-response question"),
    ("[truth]\nsleep = [0.3, 0.3, 0.4]\ncheat = 0.2\n[regression]\nformula = 'smoked ~ sleep'\n",
     r"\[regression\] needs exactly formula and coefficients"),
    ("[truth]\nsleep = [0.3, 0.3, 0.4]\ncheat = 0.2\n[regression]\n"
     f"formula = 'smoked ~ sleep + __import__'\ncoefficients = {COEFFICIENTS}\n",
     r"'__import__' is not a forced-response question"),
])
def test_bad_scenarios_are_refused_in_one_line(tmp_path, truth, message):
    result = run_mock_cli(tmp_path, REGRESSION, truth, "--respondents", "100")
    assert result.exit_code == 1
    assert re.search(message, result.output), result.output


def test_the_weights_scenario_prints_weighted_and_unweighted_beside_the_population_truth():
    result = example("weights", "--respondents", "3000", "--seed", "4", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    weights = document["weights"]
    assert weights["margins"] == {"sex": {"Female": 0.5, "Male": 0.5}}
    assert 1000 < weights["effective_n"] < 3000  # 80 % women weighted to half: n_eff < n
    assert [(r["question"], r["option"], r["estimate"], r["true_proportion"])
            for r in weights["results"]] == [
        ("smoked", "No", "weighted", 0.6), ("smoked", "Yes", "weighted", 0.4),
        ("smoked", "No", "unweighted", 0.6), ("smoked", "Yes", "unweighted", 0.4)]
    for row in weights["results"]:
        assert row["covered"] == (row["ci_low"] <= row["true_proportion"] <= row["ci_high"])
    sample = {(r["question"], r["option"]): r["true_proportion"] for r in document["results"]}
    assert sample[("sex", "Female")] == 0.8 and sample[("smoked", "Yes")] == 0.28
    table = example("weights", "--respondents", "3000", "--seed", "4").stdout
    assert "smoked, weighted to the population's sex (Female 0.5, Male 0.5; effective n" in table
    assert "the server saw only randomized answers, and the open ones (sex) as given" in table
    assert re.search(r"Yes +unweighted +0\.4000", table)


def test_the_weights_scenario_covers_the_population_only_when_weighted():
    """20 mock surveys of 3000 respondents, 80 % women in the sample and half in the
    population: the weighted 95 % interval of P(smoked) covers the population's 40 % but for
    at most the 99.9 % binomial quantile of 20 tries at 5 %; the unweighted one, 12 points
    (about 7 SE) off at the sample's 28 %, covers it in none (P about 1e-6 each)."""
    results = many("weights", 3000, 20)
    rows = [[r for r in result.weights_rows() if r["option"] == "Yes"] for result in results]
    weighted = [w for w, _ in rows]
    unweighted = [u for _, u in rows]
    assert {w["estimate"] for w in weighted} == {"weighted"}
    assert sum(not w["covered"] for w in weighted) <= stats.binom.ppf(0.999, 20, 0.05)
    assert not any(u["covered"] for u in unweighted)
    sample = [next(r for r in result.rows() if r["question"] == "smoked" and
                   r["option"] == "Yes") for result in results]  # the sample's 28 %
    assert sum(not r["covered"] for r in sample) <= stats.binom.ppf(0.999, 20, 0.05)


def test_no_weights_without_a_weights_table():
    result = example("regression", "--respondents", "500", "--seed", "1", "--json")
    assert json.loads(result.stdout)["weights"] is None
    assert "weighted to the population" not in example("regression", "--respondents",
                                                       "500").stdout


WEIGHTS = {"title": "w", "questions": [
    {"id": "sex", "text": "Sex?", "type": "choice", "options": ["f", "m"], "disclosed": True},
    {"id": "age", "text": "Age?", "type": "numeric", "min": 18, "max": 99, "disclosed": True},
    {"id": "smoked", "text": "Smoked?", "type": "yes_no", "epsilon": 1.0},
    {"id": "sleep", "text": "Sleep?", "type": "choice", "options": ["a", "b"], "epsilon": 1.0}]}
WEIGHTED = ("covariate = 'sex'\npopulation = [0.5, 0.5]\nsample = [0.8, 0.2]\n"
            "outcome = 'smoked'\nprevalence = [0.2, 0.6]\n")


@pytest.mark.parametrize("truth, message", [
    ("[truth]\nsleep = [0.5, 0.5]\nage = 40\n[weights]\n" + WEIGHTED.replace("'sex'", "'sleep'"),
     r"covariate 'sleep' is not an openly answered yes/no or choice question"),
    ("[truth]\nsleep = [0.5, 0.5]\nsex = [0.5, 0.5]\n[weights]\n" + WEIGHTED.replace(
        "'sex'", "'age'"), r"covariate 'age' is not an openly answered yes/no or choice"),
    ("[truth]\nsex = [0.5, 0.5]\nage = 40\n[weights]\n" + WEIGHTED.replace("'smoked'", "'sleep'"),
     r"outcome 'sleep' is not a randomized yes/no question"),
    ("[truth]\nsleep = [0.5, 0.5]\nsex = [0.5, 0.5]\nage = 40\n[weights]\n" + WEIGHTED,
     r"'sex' is given elsewhere too"),
    ("[truth]\nsleep = [0.5, 0.5]\nage = 40\n[weights]\n" + WEIGHTED.replace(
        "[0.5, 0.5]", "[0.5, 0.6]"), r"population needs 2 proportions summing to 1"),
    ("[truth]\nsleep = [0.5, 0.5]\nage = 40\n[weights]\n" + WEIGHTED.replace(
        "[0.2, 0.6]", "[0.2, 1.6]"), r"prevalence needs 2 probabilities"),
    ("[truth]\nsleep = [0.5, 0.5]\nage = 40\n[weights]\ncovariate = 'sex'\n",
     r"\[weights\] needs exactly covariate, outcome, population, prevalence, sample"),
])
def test_bad_weights_scenarios_are_refused_in_one_line(tmp_path, truth, message):
    result = run_mock_cli(tmp_path, WEIGHTS, truth, "--respondents", "100")
    assert result.exit_code == 1
    assert re.search(message, result.output), result.output
