import json
import math
import subprocess
import sys

import pytest
from click.testing import CliRunner

from ldpsurvey.cli import main

REL = 1e-9


def run_json(*args: str) -> dict:
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_epsilon_json_matches_reference(reference):
    for case in reference["epsilon"]:
        if not isinstance(case["beta"], float):
            continue
        out = run_json("epsilon", "--alpha", repr(case["alpha"]), "--beta", repr(case["beta"]))
        assert set(out) == {"epsilon", "p_yes_given_yes", "p_yes_given_no",
                            "posterior_max_at_prior_half"}
        assert math.isclose(out["epsilon"], case["epsilon"], rel_tol=REL)
        assert math.isclose(out["p_yes_given_yes"], case["p_report_yes_if_yes"], rel_tol=REL)
        assert math.isclose(out["p_yes_given_no"], case["p_report_yes_if_no"], rel_tol=REL)
    out = run_json("epsilon", "--alpha", "0.5", "--beta", "0.5")
    assert math.isclose(out["posterior_max_at_prior_half"], 0.75, rel_tol=REL)


def test_alpha_json_matches_reference(reference):
    for case in reference["alpha_for_epsilon"]:
        out = run_json("alpha", "--epsilon", repr(case["epsilon"]), "--beta", repr(case["beta"]))
        assert set(out) == {"alpha", "beta", "epsilon"}
        assert math.isclose(out["alpha"], case["alpha"], rel_tol=REL)
        assert out["epsilon"] <= case["epsilon"]


def test_estimate_json_matches_reference(reference):
    for case in reference["estimate_from_counts"]:
        out = run_json("estimate", "--alpha", repr(case["alpha"]), "--beta", repr(case["beta"]),
                       "--n", str(case["n"]), "--yes", str(case["reported_yes"]),
                       "--method", "wilson")
        assert set(out) == {"p_hat", "p_hat_clipped", "p_mle", "standard_error", "ci_low",
                            "ci_high", "ci_method", "confidence", "n", "fit_p_value",
                            "design_consistent", "warning"}
        assert math.isclose(out["p_mle"], case["p_mle"], rel_tol=REL, abs_tol=1e-15)
        assert math.isclose(out["fit_p_value"], case["fit_p_value"], rel_tol=REL)
        assert math.isclose(out["p_hat"], case["p_hat_unbiased"], rel_tol=REL)
        assert math.isclose(out["p_hat_clipped"], case["p_hat_clipped"], rel_tol=REL)
        assert math.isclose(out["standard_error"], case["standard_error"], rel_tol=REL)
        assert out["design_consistent"] is case["design_consistent"]
        assert (out["ci_method"], out["confidence"], out["n"]) == ("wilson", 0.95, case["n"])
        ci = case["ci_95_wilson_mapped_clipped"]
        assert math.isclose(out["ci_low"], ci[0], rel_tol=REL, abs_tol=1e-15)
        assert math.isclose(out["ci_high"], ci[1], rel_tol=REL, abs_tol=1e-15)


def test_estimate_other_methods():
    out = run_json("estimate", "--alpha", "0.5", "--n", "1000", "--yes", "400",
                   "--method", "clopper-pearson", "--confidence", "0.9")
    assert out["ci_method"] == "clopper-pearson" and out["confidence"] == 0.9
    assert out["ci_low"] < out["p_hat"] < out["ci_high"]


def test_plan_json_matches_reference(reference):
    for case in reference["sample_size"]:
        out = run_json("plan", "--epsilon", repr(case["epsilon"]),
                       "--proportion", repr(case["expected_proportion"]),
                       "--margin", repr(case["margin"]), "--confidence", repr(case["confidence"]))
        assert set(out) == {"alpha", "n_required", "n_required_central_laplace"}
        assert math.isclose(out["alpha"], case["alpha"], rel_tol=REL)
        assert out["n_required"] == case["n_required_normal_approx"]
        assert out["n_required_central_laplace"] == case["n_required_central_laplace"]


def test_human_table_by_default():
    result = CliRunner().invoke(main, ["epsilon", "--alpha", "0.5"])
    assert result.exit_code == 0
    assert "epsilon                      1.0986\n" in result.stdout  # 4 decimals, as all
    assert "p_yes_given_yes              0.7500\n" in result.stdout  # fractions in tables


@pytest.mark.parametrize("args, problem", [
    (["epsilon", "--alpha", "1"], "--alpha"),
    (["epsilon", "--alpha", "-0.1"], "--alpha"),
    (["epsilon", "--alpha", "0.5", "--beta", "0"], "--beta"),
    (["epsilon", "--alpha", "0.5", "--beta", "1"], "--beta"),
    (["alpha", "--epsilon", "0"], "--epsilon"),
    (["alpha", "--epsilon", "-2"], "--epsilon"),
    (["alpha", "--epsilon", "inf"], "--epsilon"),
    (["estimate", "--alpha", "0.5", "--n", "0", "--yes", "0"], "--n"),
    (["estimate", "--alpha", "0.5", "--n", "10", "--yes", "11"], "--yes"),
    (["estimate", "--alpha", "0.5", "--n", "10", "--yes", "-1"], "--yes"),
    (["estimate", "--alpha", "0", "--n", "10", "--yes", "1"], "--alpha"),
    (["estimate", "--alpha", "0.5", "--n", "10", "--yes", "1", "--confidence", "1"],
     "--confidence"),
    (["estimate", "--alpha", "0.5", "--n", "10", "--yes", "1", "--method", "x"], "--method"),
    (["plan", "--epsilon", "1", "--proportion", "2", "--margin", "0.1"], "--proportion"),
    (["plan", "--epsilon", "1", "--proportion", "0.2", "--margin", "0"], "--margin"),
    (["epsilon"], "--alpha"),
    (["shuffle", "--epsilon", "1", "--n", "0"], "--n"),
    (["shuffle", "--epsilon", "1", "--n", "100", "--delta", "1"], "--delta"),
    (["shuffle", "--epsilon", "1", "--n", "100", "--delta", "2"], "--delta"),
    (["shuffle", "--epsilon", "1", "--n", "100", "--delta", "0"], "--delta"),
    (["shuffle", "--epsilon", "1", "--n", "100", "--delta", "nan"], "--delta"),
    (["shuffle", "--epsilon", "-1", "--n", "100"], "--epsilon"),
    (["shuffle", "--epsilon", "0", "--n", "100"], "--epsilon"),
    (["shuffle", "--epsilon", "inf", "--n", "100"], "--epsilon"),
    (["shuffle", "--n", "100"], "--epsilon"),
    (["plan", "--epsilon", "1", "--proportion", "0.3"], "--margin"),
    (["plan", "--epsilon", "1", "--beta", "0.2,0.3", "--margin", "0.03"], "--beta"),
    (["plan", "--epsilon", "1", "--options", "3", "--beta", "0.5", "--margin", "0.03"], "--beta"),
    (["plan", "--epsilon", "1", "--options", "3", "--proportion", "0.5,0.5", "--margin", "0.1"],
     "--proportion"),
    (["plan", "--epsilon", "1", "--proportion", "a,b", "--margin", "0.1"], "--proportion"),
    (["plan", "--epsilon", "1"], "--central-epsilon"),
    (["plan", "--epsilon", "1", "--central-epsilon", "0"], "--central-epsilon"),
    (["plan", "--epsilon", "1", "--central-epsilon", "nan"], "--central-epsilon"),
    (["plan", "--epsilon", "1", "--central-epsilon", "0.1", "--delta", "1"], "--delta"),
    (["plan", "--epsilon", "1", "--proportion", "0.3", "--margin", "0.03", "--delta", "1e-8"],
     "--delta"),
])
def test_bad_arguments_give_one_line_and_exit_2(args, problem):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and problem in lines[0], result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("args", [["estimate", "--alpha", "0.5", "--n", "10", "--yes", "11"],
                                  ["shuffle", "--epsilon", "-1", "--n", "10"]])
def test_errors_have_no_traceback_as_a_process(args):
    proc = subprocess.run([sys.executable, "-m", "ldpsurvey.cli", *args], capture_output=True,
                          text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


SHUFFLE_KEYS = {"epsilon_local", "n", "delta", "epsilon_closed_form", "epsilon_numerical",
                "epsilon_central"}


def test_shuffle_json_matches_the_library():
    from ldpsurvey.shared import central_epsilon, closed_form_epsilon, numerical_epsilon

    out = run_json("shuffle", "--epsilon", "4", "--n", "100000")
    assert set(out) == SHUFFLE_KEYS
    assert (out["epsilon_local"], out["n"], out["delta"]) == (4.0, 100000, 1e-6)
    assert out["epsilon_closed_form"] == closed_form_epsilon(4.0, 100000, 1e-6)
    assert math.isclose(out["epsilon_closed_form"], 0.5378040242374512, rel_tol=1e-12)
    assert out["epsilon_numerical"] == numerical_epsilon(4.0, 100000, 1e-6)
    assert out["epsilon_central"] == central_epsilon(4.0, 100000, 1e-6)


def test_shuffle_closed_form_is_null_for_a_small_release():
    from ldpsurvey.shared import central_epsilon, numerical_epsilon

    eps0 = math.log(3)
    out = run_json("shuffle", "--epsilon", repr(eps0), "--n", "100", "--delta", "1e-8")
    assert set(out) == SHUFFLE_KEYS and out["delta"] == 1e-8
    assert out["epsilon_closed_form"] is None
    assert out["epsilon_numerical"] == numerical_epsilon(eps0, 100, 1e-8)
    assert out["epsilon_central"] == central_epsilon(eps0, 100, 1e-8) <= eps0


def test_shuffle_table_shows_null_as_a_dash():
    result = CliRunner().invoke(main, ["shuffle", "--epsilon", "1", "--n", "100"])
    assert result.exit_code == 0
    assert "epsilon_closed_form  -" in result.stdout


def test_plan_with_central_epsilon_alone():
    from ldpsurvey.shared import Mechanism, release_batch_required

    out = run_json("plan", "--epsilon", "1", "--central-epsilon", "0.1")
    assert set(out) == {"alpha", "release_batch_required"}
    assert out["alpha"] == Mechanism.from_epsilon(1.0).alpha
    assert out["release_batch_required"] == release_batch_required(1.0, 0.1, 1e-6)


def test_plan_with_margin_and_central_epsilon():
    from ldpsurvey.shared import release_batch_required

    out = run_json("plan", "--epsilon", "1", "--proportion", "0.3", "--margin", "0.03",
                   "--central-epsilon", "0.1", "--delta", "1e-8")
    assert set(out) == {"alpha", "n_required", "n_required_central_laplace",
                        "release_batch_required"}
    assert (out["n_required"], out["n_required_central_laplace"]) == (4827, 906)
    assert out["release_batch_required"] == release_batch_required(1.0, 0.1, 1e-8)


def test_plan_release_batch_is_null_when_out_of_reach():
    out = run_json("plan", "--epsilon", "1", "--central-epsilon", "1e-6")
    assert out["release_batch_required"] is None




@pytest.mark.parametrize("args, beta, proportions", [
    (["--margin", "0.03"], (0.5, 0.5), None),                                  # worst case
    (["--options", "4", "--margin", "0.05"], (0.25,) * 4, None),
    (["--beta", "0.2,0.3,0.5", "--proportion", "0.1,0.6,0.3", "--margin", "0.05"],
     (0.2, 0.3, 0.5), [0.1, 0.6, 0.3]),
    (["--beta", "0.3", "--proportion", "0.4,0.6", "--margin", "0.04"], (0.7, 0.3), [0.4, 0.6]),
])
def test_plan_for_k_options_any_beta_and_the_worst_case(args, beta, proportions):
    """plan gives the shared planner's n for every option, and says the margin is an expected
    half-width."""
    from ldpsurvey.shared import Mechanism, n_required_question

    result = CliRunner().invoke(main, ["plan", "--epsilon", "1.5", *args, "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    mechanism = Mechanism.from_epsilon(1.5, beta)
    assert out["alpha"] == mechanism.alpha
    assert out["n_required"] == n_required_question(mechanism, proportions, float(args[-1]))
    assert "expected half-width" in result.stderr
