"""The cheating-detection design of a yes/no question (shared/mechanisms/cheating.py's CheatingDetection,
web/cheating.js) through every layer: the survey file, the manifest (/7), the exact epsilon,
the device, intake, counters, estimates, pages, exports, the codebook and the ledger."""

import csv
import io
import json
import math
import re
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner

from ldpsurvey.cli import main
from ldpsurvey.client import LocalState, fetch_survey, prepare
from ldpsurvey.client.ceilings import Ceilings
from ldpsurvey.client.ledger import device_spent
from ldpsurvey.shared import SurveyError, parse_definition, parse_manifest
from ldpsurvey.shared.mechanisms.budget import EPSILON_TOLERANCE
from ldpsurvey.shared.mechanisms.cheating import HALF, estimate_cheating
from ldpsurvey.shared.mechanisms.protocol import Settings
from ldpsurvey.shared.mechanisms.randomizer import N

from helpers import published, release_due, sent_and_released, tally

LN3 = math.log(3)
EXPLICIT = [{"alpha": 0.6, "beta": [0.3, 0.7]}, {"alpha": 0.3, "beta": [0.7, 0.3]}]
SURVEY = {"title": "Honesty", "release_batch": 1, "public_results": True, "questions": [
    {"id": "shoplifted", "text": "Have you ever shoplifted?", "type": "yes_no",
     "design": "cheating_detection", "epsilon": LN3},
    {"id": "smoked", "text": "Do you smoke?", "type": "yes_no", "epsilon": 1.0}]}
SETTINGS = Settings(0.95, "clopper-pearson")


def scheme(**fields):
    return parse_definition({"title": "t", "questions": [
        {"id": "q", "text": "Q?", "type": "yes_no", "design": "cheating_detection",
         **fields}]}).questions[0].scheme


def feed(values):
    values = iter(values)
    return lambda: next(values)


def exact_epsilon(t) -> float:
    """max over answers x != x' and reports y of ln P(g, y | x) / P(g, y | x'), the exact
    probabilities of the integer randomizer: P(g) = HALF / N (both groups) times
    T/N [x = y] + (N - T)/N w_y/N."""
    weights = t.option_weights
    ratios = []
    for x in (0, 1):
        for other in (0, 1):
            for y in (0, 1):
                if x == other:
                    continue
                p = [Fraction(HALF, N) * (Fraction(t.keep, N) * (a == y)
                                          + Fraction(N - t.keep, N) * Fraction(weights[y], N))
                     for a in (x, other)]
                assert p[1] > 0  # every report is possible from every answer: finite
                ratios.append(p[0] / p[1])
    return math.log(max(ratios))


@pytest.mark.parametrize("fields", [{"epsilon": 0.5}, {"epsilon": LN3}, {"epsilon": 2.0},
                                    {"groups": EXPLICIT}])
def test_each_groups_epsilon_is_finite_and_the_design_charges_the_largest(fields):
    survey = replace(parse_definition({"title": "t", "questions": [
        {"id": "q", "text": "Q?", "type": "yes_no", "design": "cheating_detection",
         **fields}]}), survey_id="s", key_id="k", origin="https://x.org")
    manifest = json.loads(survey.manifest_bytes())
    assert manifest["format"] == "ldp-survey-manifest/7"
    s = parse_manifest(survey.manifest_bytes()).questions[0].scheme
    brute = [exact_epsilon(t) for t in s.thresholds]
    assert all(math.isfinite(e) for e in brute)
    for g, e in enumerate(brute):
        assert math.isclose(e, s.group_epsilon(g), rel_tol=1e-12)
    stated = manifest["questions"][0]["epsilon"]
    assert math.isclose(stated, max(brute), rel_tol=1e-12) and stated == s.epsilon
    assert manifest["total_epsilon"] == s.epsilon
    if "epsilon" in fields:  # both groups at exactly the epsilon asked, never above
        assert all(abs(e - fields["epsilon"]) <= 1e-12 for e in brute)
        assert s.epsilon <= fields["epsilon"] * (1 + EPSILON_TOLERANCE)
    else:
        assert brute[0] > brute[1] + 0.5  # the two groups differ; the larger is charged


def test_the_group_draw_is_exactly_half_and_comes_first():
    s = scheme(groups=EXPLICIT)
    t0, t1 = s.thresholds
    assert s.randomize(1, feed([HALF - 1, 0, 0])) == [0, 1]  # kept: U1 < T
    assert s.randomize(0, feed([HALF, t1.keep, 0])) == [1, 0]  # forced: No first (U2 < C_0)
    assert s.randomize(0, feed([HALF, t1.keep, N - 1])) == [1, 1]
    assert s.randomize(1, feed([0, t0.keep, t0.cumulative[0] - 1])) == [0, 0]
    with pytest.raises(ValueError, match="not one of the question's options"):
        s.randomize(2, feed([0, 0, 0]))


def test_a_survey_without_a_design_keeps_its_format_and_6_refuses_a_design():
    plain = replace(parse_definition({**SURVEY, "questions": SURVEY["questions"][1:]}),
                    survey_id="s", key_id="k", origin="https://x.org")
    assert json.loads(plain.manifest_bytes())["format"] == "ldp-survey-manifest/5"
    designed = replace(parse_definition(SURVEY), survey_id="s", key_id="k",
                       origin="https://x.org").manifest_bytes()
    older = designed.replace(b"ldp-survey-manifest/7", b"ldp-survey-manifest/6")
    with pytest.raises(SurveyError, match="unknown field 'design'"):
        parse_manifest(older)


@pytest.mark.parametrize("fields, message", [
    ({"type": "choice", "options": ["a", "b"], "epsilon": 1.0}, r"design: a design is for yes/no"),
    ({"design": "forced"}, r"design: must be one of cheating_detection, got 'forced'"),
    ({"mechanism": "forced_response", "epsilon": 1.0}, r"design replaces mechanism"),
    ({}, r"epsilon: give exactly one of epsilon"),
    ({"epsilon": 1.0, "groups": EXPLICIT}, r"epsilon: give exactly one of epsilon"),
    ({"epsilon": 1.0, "concept": "x"}, r"concept: does not apply to mechanism"),
    ({"groups": EXPLICIT[:1]}, r"groups: must be a list of two groups"),
    ({"groups": [EXPLICIT[0], {"alpha": 1.0, "beta": 0.5}]}, r"group 2: alpha must be"),
    ({"groups": [EXPLICIT[0], {"alpha": 0.5}]}, r"group 2 must be \{alpha, beta\}"),
    ({"groups": [EXPLICIT[0], EXPLICIT[0]]}, r"gamma is not identified"),
    ({"groups": [EXPLICIT[0], {"alpha": 0.5, "beta": [0.5, 0.6]}]}, r"beta must sum to 1"),
])
def test_bad_designs_are_refused_naming_the_field(fields, message):
    question = {"id": "q", "text": "Q?", "type": "yes_no", "design": "cheating_detection",
                **fields}
    with pytest.raises(SurveyError, match=message):
        parse_definition({"title": "t", "questions": [question]})


def test_a_numeric_truth_string_or_bool_is_refused_and_yes_no_words_are_read():
    s = scheme(epsilon=1.0)
    assert [s.parse_text(w) for w in ("yes", "N", "1", "false")] == [1, 0, 1, 0]
    with pytest.raises(ValueError, match="takes yes or no"):
        s.parse_text("maybe")
    assert s.check_report([1, 0]) is None
    for bad in (1, [1], [0, 2], [0, 1, 1], [True, 0], [0.0, 1]):
        assert "must be [group, answer]" in s.check_report(bad)


def test_the_summary_is_the_shared_estimator_on_the_groups_counts():
    s = scheme(groups=EXPLICIT)
    counts = [120, 280, 330, 270]  # group 1: 400 reports, 280 yes; group 2: 600, 270 yes
    body = s.summary(counts, SETTINGS)
    fit = estimate_cheating(s.cdm, [280, 270], [400, 600])
    assert [g["n"] for g in body["groups"]] == [400, 600] and body["n"] == 1000
    for entry, share in zip(body["options"], fit.shares, strict=True):
        assert (entry["share"], entry["p_hat"], entry["p_mle"], entry["standard_error"],
                entry["ci_low"], entry["ci_high"]) == (share.name, share.p_hat, share.p_mle,
                                                       share.standard_error, share.ci_low,
                                                       share.ci_high)
        assert entry["ci_method"] == "profile-likelihood" and entry["epsilon"] == s.epsilon
    assert body["covariance"] == [list(row) for row in fit.covariance]
    assert body["noncompliance_detected"] == fit.noncompliance_detected
    assert sum(e["p_hat_clipped"] for e in body["options"]) == pytest.approx(1.0)
    empty = s.summary([1, 0, 5, 5], SETTINGS)  # a group with fewer than 2 reports
    assert empty["n"] == 11 and all(e["p_mle"] is None for e in empty["options"])


def test_the_fit_p_value_is_one_inside_the_simplex_and_small_far_outside():
    s = scheme(groups=EXPLICIT)
    pi, gamma = 0.3, 0.1
    rates = s.cdm.report_rates(pi, gamma)
    inside = s.summary([1000 - round(1000 * r) if j == 0 else round(1000 * r)
                        for r in rates for j in (0, 1)], SETTINGS)
    assert inside["options"][0]["fit_p_value"] == pytest.approx(1.0)
    far = s.summary([999, 1, 1, 999], SETTINGS)  # yes rates the design cannot produce
    assert far["options"][0]["fit_p_value"] < 1e-6 and not far["options"][0]["design_consistent"]


def test_coverage_of_each_share_by_seeded_simulation():
    """400 surveys of 20 000 respondents (30 % honest yes, 10 % non-compliers) under the
    default design at ln 3: each share's 95 % interval covers its truth in 95 % of them, within
    4.5 binomial standard errors of the coverage."""
    s = scheme(epsilon=LN3)
    truth = s.truth_of({"yes": 0.3, "noncompliant": 0.1})
    rng = np.random.default_rng(2028)
    reps, n = 400, 20_000
    covered = np.zeros(3)
    for _ in range(reps):
        reports = s.simulate(s.draw_answers(truth, n, rng), rng)
        body = s.summary(tally(s, reports), SETTINGS)
        covered += [e["ci_low"] <= t <= e["ci_high"] for e, t in zip(body["options"], truth,
                                                                      strict=True)]
    tolerance = 4.5 * math.sqrt(0.95 * 0.05 / reps)
    assert np.all(np.abs(covered / reps - 0.95) <= tolerance), covered / reps


def test_simulated_reports_follow_the_device_distribution():
    """Per group the share of Yes reports is lambda_g = alpha_g pi + (1 - gamma) y_g, and
    half the respondents land in each group, within 5 standard errors."""
    s = scheme(groups=EXPLICIT)
    truth = s.truth_of({"yes": 0.25, "noncompliant": 0.2})
    rng = np.random.default_rng(7)
    n = 200_000
    counts = tally(s, s.simulate(s.draw_answers(truth, n, rng), rng))
    sizes = [counts[0] + counts[1], counts[2] + counts[3]]
    assert abs(sizes[0] / n - 0.5) < 5 * math.sqrt(0.25 / n)
    for g, lam in enumerate(s.cdm.report_rates(0.25, 0.2)):
        assert abs(counts[2 * g + 1] / sizes[g] - lam) < 5 * math.sqrt(lam * (1 - lam) / sizes[g])


@pytest.fixture
def designed_id(client, auth):
    return published(client, auth, SURVEY)


@pytest.mark.parametrize("report", [1, [1], [2, 0], [0, 1, 0], [True, 1], "[0,1]"])
def test_intake_refuses_reports_the_design_cannot_make(client, designed_id, report):
    response = client.post(f"/api/surveys/{designed_id}/responses",
                           json={"answers": {"shoplifted": report, "smoked": 0}})
    assert response.status_code == 422
    assert "shoplifted must be [group, answer]" in response.json["detail"], response.json


def submit(client, auth, survey_id, pi, gamma, n, seed):
    survey = parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    s = survey.question("shoplifted").scheme
    rng = np.random.default_rng(seed)
    reports = s.simulate(s.draw_answers(s.truth_of({"yes": pi, "noncompliant": gamma}), n, rng),
                         rng)
    smoked = survey.question("smoked").scheme.simulate(rng.integers(0, 2, n), rng)
    responses = [{"answers": {"shoplifted": r, "smoked": y}}
                 for r, y in zip(reports, smoked, strict=True)]
    assert client.post(f"/api/surveys/{survey_id}/responses/batch",
                       json={"responses": responses}, headers=auth).status_code == 201
    release_due(client.application)
    return s, reports


def test_released_reports_reach_estimates_pages_exports_and_the_codebook(client, auth,
                                                                          designed_id):
    s, reports = submit(client, auth, designed_id, 0.3, 0.3, 3000, 11)
    body = client.get(f"/api/surveys/{designed_id}/estimates", headers=auth).json
    question = body["questions"][0]
    assert question == {"id": "shoplifted", "text": "Have you ever shoplifted?",
                        "type": "yes_no", **s.summary(tally(s, reports), SETTINGS)}
    assert question["noncompliance_detected"] and "answer No whatever" in question["warning"]
    page = client.get(f"/s/{designed_id}/results", headers=auth).get_data(as_text=True)
    assert 'role="alert">Warning: some respondents answer No whatever' in page
    assert "design cheating detection (two forced-response groups" in page
    assert "No regardless (non-compliant)" in page
    rows = list(csv.reader(io.StringIO(client.get(f"/api/surveys/{designed_id}/export.csv",
                                                  headers=auth).get_data(as_text=True))))
    assert rows[0] == ["shoplifted_group", "shoplifted", "smoked"] and len(rows) == 3001
    assert sorted(r[:2] for r in rows[1:]) == sorted([str(g + 1), ["No", "Yes"][y]]
                                                     for g, y in reports)
    coded = list(csv.reader(io.StringIO(client.get(
        f"/api/surveys/{designed_id}/export.csv?codes=true", headers=auth).get_data(as_text=True))))
    assert {r[1] for r in coded[1:]} == {"0", "1"} and {r[0] for r in coded[1:]} == {"1", "2"}
    book = client.get(f"/api/surveys/{designed_id}/codebook.json", headers=auth).json
    entry = book["questions"][0]
    assert (entry["design"], entry["columns"]) == ("cheating_detection",
                                                   ["shoplifted_group", "shoplifted"])
    assert entry["groups"] == s.fields()["groups"]
    markdown = client.get(f"/api/surveys/{designed_id}/codebook.md",
                          headers=auth).get_data(as_text=True)
    assert "| shoplifted | Have you ever shoplifted? | yes_no | cheating_detection |" in markdown
    jsonl = client.get(f"/api/surveys/{designed_id}/export.jsonl", headers=auth).get_data(
        as_text=True)
    parameters = json.loads(jsonl.splitlines()[0])["parameters"]["shoplifted"]
    assert parameters["rrreg_cdmsym_p"] == list(s.cdm.rrreg_p)


def test_no_warning_when_everyone_complies(client, auth, designed_id):
    submit(client, auth, designed_id, 0.3, 0.0, 3000, 12)
    question = client.get(f"/api/surveys/{designed_id}/estimates", headers=auth).json[
        "questions"][0]
    assert question["options"][2]["ci_low"] == 0.0 and not question["noncompliance_detected"]
    assert question["warning"] is None
    page = client.get(f"/s/{designed_id}/results", headers=auth).get_data(as_text=True)
    assert 'role="alert"' not in page


def test_crosstabs_regression_and_differences_refuse_the_design(client, auth, designed_id,
                                                                 live_server):
    submit(client, auth, designed_id, 0.3, 0.1, 200, 13)
    response = client.get(f"/api/surveys/{designed_id}/crosstab?rows=shoplifted&cols=smoked",
                          headers=auth)
    assert response.status_code == 400 and "cross-tabs are for forced-response" in (
        response.json["detail"])
    response = client.get(f"/api/surveys/{designed_id}/estimates?regress=smoked~shoplifted",
                          headers=auth)
    assert response.status_code == 400
    assert "'shoplifted' uses cheating_detection" in response.json["detail"]


def test_the_cli_results_show_the_three_shares(client, auth, designed_id, live_server,
                                               researcher_key):
    submit(client, auth, designed_id, 0.3, 0.3, 2000, 14)
    runner = CliRunner(env={"LDP_SURVEY_URL": live_server, "LDP_SURVEY_KEY": researcher_key})
    result = runner.invoke(main, ["results", "--survey", designed_id])
    assert result.exit_code == 0, result.output
    for label in ("Yes (honest)", "No (honest)", "No regardless (non-compliant)",
                  "answer No whatever they are told"):
        assert label in result.stdout
    result = runner.invoke(main, ["results", "--survey", designed_id, "--difference",
                                  "shoplifted:0,shoplifted:1"])
    assert result.exit_code != 0 and "uses cheating_detection" in result.output


def test_the_device_randomizes_and_the_ledger_charges_the_largest_group(
        live_server, client, auth, tmp_path):
    first = {k: v for k, v in SURVEY["questions"][0].items() if k != "epsilon"}
    definition = {**SURVEY, "questions": [{**first, "groups": EXPLICIT}, SURVEY["questions"][1]]}
    survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
    s = parse_manifest(client.get(f"/api/surveys/{survey_id}").data).questions[0].scheme
    state = LocalState(tmp_path / "client" / "state.json")
    with pytest.raises(Exception, match=re.escape("shoplifted")):  # above the ceiling
        fetch_survey(live_server, survey_id, state, Ceilings(per_question=s.epsilon - 0.01,
                                                             total=5))
    verified = fetch_survey(live_server, survey_id, state, Ceilings(per_question=2, total=5))
    submission = prepare(verified, {"shoplifted": 1, "smoked": 0}, state)
    group, answer = submission.answers["shoplifted"]
    assert group in (0, 1) and answer in (0, 1)
    assert sent_and_released(client, auth, verified, submission, state) == [1, 1]
    smoked = verified.survey.question("smoked").epsilon
    assert device_spent(state) == pytest.approx(max(s.realized_epsilon, s.epsilon) + smoked,
                                                rel=1e-9)
    assert s.epsilon > s.group_epsilon(1) + 0.5
