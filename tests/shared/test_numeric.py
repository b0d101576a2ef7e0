"""Number questions (issue 24 c): the discretized Duchi mechanism's exact epsilon by brute force
over answers, its rule in exact arithmetic, the mean's SE against Duchi et al.'s variance and
against simulation, coverage, and the question end to end."""

import csv
import io
import json
import math
from fractions import Fraction
from importlib import resources

import numpy as np
import pytest
from click.testing import CliRunner

from ldpsurvey.cli import main
from ldpsurvey.client import LocalState, fetch_survey, prepare
from ldpsurvey.client.ceilings import Ceilings
from ldpsurvey.shared import SurveyError, parse_definition, parse_manifest
from ldpsurvey.shared.mechanisms.protocol import Settings
from ldpsurvey.shared.mechanisms.randomizer import N

from helpers import published, release_due, respond, run_mock, sent_and_released, tally

VECTORS = json.loads((resources.files("ldpsurvey.shared") / "scheme_vectors.json").read_text())


def scheme(**fields):
    return parse_definition({"title": "t", "questions": [
        {"id": "q", "text": "Q?", "type": "numeric", **fields}]}).questions[0].scheme


@pytest.mark.parametrize("eps", [0.1, 0.61, 1.0, math.log(3), 3.0])
def test_epsilon_is_the_yes_no_randomizers_exactly(eps):
    """Over 400 answers across (and beyond) the range, both reports: the exact largest ratio of
    P(y | x) = (R/N) P(y | 1) + (1 - R/N) P(y | 0), from the integers, is the stated epsilon,
    reached by min against max, and never above the target."""
    s = scheme(min=-3, max=11.5, epsilon=eps)
    t = s.thresholds
    one = [Fraction(t.keep, N) * b + Fraction((N - t.keep) * t.option_weights[1], N * N)
           for b in (0, 1)]

    def probability(y, x):
        up = Fraction(s.rounding_threshold(s.check_truth(x)), N)
        p1 = up * one[1] + (1 - up) * one[0]
        return p1 if y else 1 - p1

    answers = [*np.linspace(-5, 14, 397), -3, 11.5, 4.25]
    worst = max(max(probability(y, a) for a in answers) / min(probability(y, a) for a in answers)
                for y in (0, 1))
    assert math.isclose(math.log(worst), s.realized_epsilon, rel_tol=1e-14)
    assert math.isclose(math.log(probability(1, 11.5) / probability(1, -3)), s.realized_epsilon,
                        rel_tol=1e-14)
    assert s.epsilon <= eps * (1 + 1e-12)


def test_the_vectors_follow_the_rule_in_exact_arithmetic():
    for case in (c for c in VECTORS["cases"] if c["question"].get("mechanism") == "duchi"):
        q = case["question"]
        s = scheme(**{k: v for k, v in q.items() if k != "type"})
        for draw in case["draws"]:
            x = min(q["max"], max(q["min"], draw["true"]))
            r = (x - q["min"]) / (q["max"] - q["min"])  # the double quotient, as specified
            up = int(draw["u"][0] < math.floor(Fraction(r) * N))
            keep, forced = draw["u"][1], draw["u"][2]
            t = s.thresholds
            want = up if keep < t.keep else next(j for j, c in enumerate(t.cumulative)
                                                  if forced < c)
            assert draw["output"] == want


def test_the_standard_error_is_duchis_variance():
    """n Var of the mean in [-1, 1] units is C^2 - (E t)^2 with C = (e^eps + 1)/(e^eps - 1)
    (Duchi et al. 2018: Var(Y | t) = C^2 - t^2, plus Var t); ours, sqrt(lam (1 - lam)/n)/alpha in
    [0, 1] units, is half of it."""
    s = scheme(min=0, max=1, epsilon=1.0)
    n, share = 10_000, 0.3  # E r = 0.3, E t = -0.4
    lam = s.alpha * share + (1 - s.alpha) / 2
    counts = [round(n * (1 - lam)), round(n * lam)]
    entry = s.summary(counts, Settings(0.95, "wilson"))["options"][0]
    c = (math.e + 1) / (math.e - 1)
    duchi = math.sqrt((c * c - (2 * entry["p_hat"] - 1) ** 2) / n) / 2
    assert entry["standard_error"] == pytest.approx(duchi, rel=1e-3)


def test_intervals_cover_the_mean_and_the_se_matches_the_spread():
    s = scheme(min=0, max=30, epsilon=1.0)
    values, weights = np.array([0, 2, 5, 10, 40]), np.array([0.4, 0.3, 0.15, 0.1, 0.05])
    truth = float(np.minimum(values, 30) @ weights)
    rng = np.random.default_rng(21)
    covered, estimates, errors = 0, [], []
    repeats = 600
    for _ in range(repeats):
        entry = s.summary(tally(s, s.simulate(rng.choice(values, size=2000, p=weights), rng)),
                          Settings(0.95, "clopper-pearson"))["options"][0]
        covered += entry["ci_low"] <= truth <= entry["ci_high"]
        estimates.append(entry["p_hat"])
        errors.append(entry["standard_error"])
        assert 0 <= entry["p_mle"] <= 30 and entry["ci_low"] <= entry["p_mle"] <= entry["ci_high"]
    assert covered / repeats >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / repeats)
    assert np.mean(estimates) == pytest.approx(truth, abs=3 * np.std(estimates) / math.sqrt(repeats))
    assert np.var(estimates, ddof=1) == pytest.approx(np.mean(np.square(errors)), rel=0.18)


@pytest.mark.parametrize("fields, message", [
    ({"min": 5, "max": 5, "epsilon": 1}, r"\.max: must be above min"),
    ({"max": 5, "epsilon": 1}, r"\.min: must be a number"),
    ({"min": 0, "max": 5}, r"\.epsilon: is needed"),
    ({"min": 0, "max": 5, "epsilon": 1, "options": ["a", "b"]}, r"\.options: a numeric question"),
    ({"min": 0, "max": 5, "epsilon": 1, "unit": "\u202e"}, r"\.unit: must be printable"),
    ({"min": 0, "max": 5, "epsilon": 1, "mechanism": "laplace"}, r"\.mechanism: must be one of"),
])
def test_definition_errors_name_the_field(fields, message):
    with pytest.raises(SurveyError, match=message):
        scheme(**fields)


NUMBERS = {"title": "Numbers", "release_batch": 1, "questions": [
    {"id": "drinks", "text": "Drinks last week?", "type": "numeric", "min": 0, "max": 30,
     "unit": "drinks", "epsilon": 1.0},
    {"id": "smoked", "text": "Smoked?", "type": "yes_no", "epsilon": 1.0}]}


@pytest.fixture
def numbers_id(client, auth):
    return published(client, auth, NUMBERS)


@pytest.mark.parametrize("value", [2, -1, True, 0.5, [1], None])
def test_intake_takes_only_a_bit(client, numbers_id, value):
    response = client.post(f"/api/surveys/{numbers_id}/responses",
                           json={"answers": {"drinks": value, "smoked": 0}})
    assert response.status_code == 422
    assert "drinks must be a bit (0 or 1)" in response.json["detail"]


def test_end_to_end_estimates_exports_page(client, auth, numbers_id):
    raw = client.get(f"/api/surveys/{numbers_id}").data
    assert "options" not in json.loads(raw)["questions"][0]
    survey = parse_manifest(raw)
    s = survey.question("drinks").scheme
    rng = np.random.default_rng(4)
    reports = s.simulate(rng.choice([0, 3, 8], size=500), rng)
    responses = [{"answers": {"drinks": r, "smoked": 1}} for r in reports]
    assert client.post(f"/api/surveys/{numbers_id}/responses/batch",
                       json={"responses": responses}, headers=auth).status_code == 201
    release_due(client.application)
    body = client.get(f"/api/surveys/{numbers_id}/estimates", headers=auth).json
    question = body["questions"][0]
    want = s.summary(tally(s, reports), Settings(0.95, "clopper-pearson"))
    assert question["options"] == want["options"] and question["options"][0]["option"] == "mean"
    assert question["scale"] == {"min": 0.0, "max": 30.0, "unit": "drinks"}
    assert question["covariance"] == [[question["options"][0]["standard_error"] ** 2]]
    rows = list(csv.DictReader(io.StringIO(client.get(
        f"/api/surveys/{numbers_id}/export.csv", headers=auth).get_data(as_text=True))))
    values = [float(row["drinks"]) for row in rows]
    assert sum(values) / len(values) == pytest.approx(question["options"][0]["p_hat"], rel=1e-12)
    codes = list(csv.DictReader(io.StringIO(client.get(
        f"/api/surveys/{numbers_id}/export.csv?codes=true", headers=auth).get_data(as_text=True))))
    assert sorted(row["drinks"] for row in codes) == sorted(map(str, reports))
    book = client.get(f"/api/surveys/{numbers_id}/codebook.json", headers=auth).json
    assert book["questions"][0]["unit"] == "drinks" and book["questions"][0]["options"] == []
    markdown = client.get(f"/api/surveys/{numbers_id}/codebook.md", headers=auth)
    assert markdown.status_code == 200 and "duchi" in markdown.get_data(as_text=True)


def test_the_device_clamps_and_sends_one_bit(live_server, client, auth, numbers_id, tmp_path):
    state = LocalState(tmp_path / "client" / "state.json")
    verified = fetch_survey(live_server, numbers_id, state, Ceilings(per_question=2, total=4))
    with pytest.raises(ValueError, match="must be a number"):
        prepare(verified, {"drinks": "four", "smoked": 0}, state)
    submission = prepare(verified, {"drinks": 400, "smoked": 0}, state)  # clamped to 30
    assert submission.answers["drinks"] in (0, 1)
    assert sent_and_released(client, auth, verified, submission, state)[0] == 1


def test_respond_reads_a_number(live_server, numbers_id, tmp_path):
    result = respond(live_server, numbers_id, "drinks=4.5,smoked=no", tmp_path / "one", "--details")
    assert result.exit_code == 0, result.output
    assert "a number from 0 to 30 (drinks)" in result.stdout
    assert "rounded at random to 30 or 0" in result.stdout and "Sent." in result.stdout
    bad = respond(live_server, numbers_id, "drinks=many,smoked=no", tmp_path / "two")
    assert bad.exit_code != 0 and "takes a number from 0 to 30" in bad.output


def test_mock_reports_the_mean_with_its_true_value(tmp_path):
    result = run_mock(tmp_path, NUMBERS, "[truth]\ndrinks = { values = [0, 2, 5, 10, 40], "
                      "weights = [4, 3, 1.5, 1, 0.5] }\nsmoked = 0.2\n", "--respondents", "3000",
                      "--seed", "9", "--json")
    assert result.exit_code == 0, result.output
    mean = json.loads(result.stdout)["results"][0]
    assert mean["question"] == "drinks" and mean["option"] == "mean"
    assert mean["true_value"] == pytest.approx(3.85)  # 40 counts as 30, as the device clamps
    assert mean["covered"] == (mean["ci_low"] <= 3.85 <= mean["ci_high"])
    failed = run_mock(tmp_path, NUMBERS, "[truth]\ndrinks = [0.5, 0.5]\nsmoked = 0.2\n")
    assert failed.exit_code != 0 and "question 'drinks' needs { values = [...]" in failed.output



def test_negative_values_stay_numbers_in_the_csv_and_formulas_do_not():
    from ldpsurvey.aggregator.services.exports import spreadsheet_safe

    assert [spreadsheet_safe(v) for v in ("-17.25", "-1e-05", "-2.5e+20", "3")] == [
        "-17.25", "-1e-05", "-2.5e+20", "3"]
    assert [spreadsheet_safe(v) for v in ("-1+cmd|' /C calc'!A0", "-", "=1", "-1-1")] == [
        "'-1+cmd|' /C calc'!A0", "'-", "'=1", "'-1-1"]


def test_the_results_page_shows_each_mechanism_and_the_mean_in_its_unit(client, auth):
    definition = {"title": "All kinds", "release_batch": 1, "public_results": True,
                  "questions": [
                      NUMBERS["questions"][0],
                      {"id": "country", "text": "Country?", "type": "choice", "mechanism": "oue",
                       "options": ["Chile", "Peru", "Cuba"], "epsilon": 1.0},
                      {"id": "sports", "text": "Sports?", "type": "multi_select",
                       "options": ["Run", "Swim"], "epsilon": 1.0}]}
    survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
    responses = [{"answers": {"drinks": j % 2, "country": [j % 2, 1, 0], "sports": [1, j % 2]}}
                 for j in range(40)]
    client.post(f"/api/surveys/{survey_id}/responses/batch", json={"responses": responses},
                headers=auth)
    release_due(client.application)
    response = client.get(f"/s/{survey_id}/results")
    assert response.status_code == 200
    text = response.get_data(as_text=True)
    mean = client.get(f"/api/surveys/{survey_id}/estimates").json["questions"][0]["options"][0]
    assert f'{mean["p_mle"]:.4g} drinks' in text
    assert "mechanism stochastic rounding then randomized response (Duchi et al.)" in text
    assert "mechanism optimized unary encoding (OUE)" in text
    assert "Estimated mean: Drinks last week?" in text
    chart = client.get(f"/s/{survey_id}/results/drinks.svg").get_data(as_text=True)
    assert ">30<" in chart and ">0<" in chart and " drinks" in chart


def test_plan_and_check_give_a_means_margin_as_a_share_of_its_range(tmp_path):
    from ldpsurvey.cli.check import plan
    from ldpsurvey.shared.mechanisms.protocol import required_n

    survey = parse_definition(NUMBERS)
    drinks = survey.question("drinks").scheme
    planned = plan(survey, 0.02, 0.95)
    assert planned["questions"][0]["margin_units"] == pytest.approx(0.6)
    n = planned["questions"][0]["n_required"]
    assert n == required_n(drinks, 0.02)
    assert drinks.expected_margin(n) <= 0.02 < drinks.expected_margin(n - 1)
    path = tmp_path / "numbers.json"
    path.write_text(json.dumps(NUMBERS))
    checked = CliRunner().invoke(main, ["survey", "check", str(path)])
    assert "drinks (duchi): epsilon 1;" in checked.output and "of its range" in checked.output
