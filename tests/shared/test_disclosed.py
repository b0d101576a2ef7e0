"""Openly answered questions (disclosed = true, issue 28.1) and survey weights on the server
(issue 28.3): the definition and manifest /7, the scheme's exact counts, what the server
stores and refuses (public results, small groups), the weighted estimates and regression of
the estimates endpoint equal to the Python API on the export, `results --weights`."""

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner
from openapi_core import OpenAPI
from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest, WerkzeugOpenAPIResponse
from test_hostile_text import evil  # noqa: F401 (a fixture: a server that records posts)

from ldpsurvey.analysis import read_export, weighted_results
from ldpsurvey.cli import main
from ldpsurvey.shared import parse_manifest
from ldpsurvey.shared.mechanisms.disclosed import WORDS
from ldpsurvey.shared.mechanisms.protocol import Settings
from ldpsurvey.shared.survey.manifest import SurveyError, parse_definition

from helpers import published, release_due

OPEN = {
    "title": "Habits by group", "release_batch": 1,
    "questions": [
        {"id": "sex", "text": "Sex?", "type": "choice", "options": ["f", "m"], "disclosed": True},
        {"id": "age", "text": "Age in years?", "type": "numeric", "min": 18, "max": 99,
         "disclosed": True},
        {"id": "smoked", "text": "Smoked?", "type": "yes_no", "epsilon": 1.0},
    ]}
MARGINS = {"sex": {"f": 0.5, "m": 0.5}}


def definition(**changes) -> dict:
    return {**OPEN, **changes}


def test_open_questions_parse_count_in_no_epsilon_and_sign_disclosed_in_format_7():
    survey = replace(parse_definition(OPEN), survey_id="s1", key_id="k", origin="https://a.org")
    assert [q.disclosed for q in survey.questions] == [True, True, False]
    assert survey.total_epsilon == survey.question("smoked").epsilon
    manifest = json.loads(survey.manifest_bytes())
    assert manifest["format"] == "ldp-survey-manifest/7"
    assert manifest["questions"][0] == {"disclosed": True, "id": "sex", "options": ["f", "m"],
                                        "text": "Sex?", "type": "choice"}
    assert "epsilon" not in manifest["questions"][1] and manifest["questions"][1]["min"] == 18
    assert [q.disclosed for q in parse_manifest(survey.manifest_bytes()).questions] == [
        True, True, False]
    plain = {**OPEN, "questions": [OPEN["questions"][2]]}  # no open question: format as before
    assert json.loads(replace(parse_definition(plain), survey_id="s", key_id="k",
                              origin="https://a.org").manifest_bytes())["format"].endswith("/5")
    assert not parse_definition({**plain, "questions": [
        {**OPEN["questions"][2], "disclosed": False}]}).questions[0].disclosed


@pytest.mark.parametrize("change, problem", [
    ({"public_results": True}, "public_results: must be false: question 'sex' is answered"),
    ({"questions": [{"id": "x", "text": "X?", "type": "yes_no", "disclosed": True,
                     "epsilon": 1.0}]}, "does not apply to mechanism 'disclosed'"),
    ({"questions": [{"id": "x", "text": "X?", "type": "multi_select", "options": ["a", "b"],
                     "disclosed": True}]}, "cannot be answered openly"),
    ({"questions": [{"id": "x", "text": "X?", "type": "numeric", "min": 0, "max": 2.5,
                     "disclosed": True}]}, "needs a whole max"),
    ({"questions": [{"id": "x", "text": "X?", "type": "numeric", "min": 2**53 - 5,
                     "max": 2**53 + 5, "disclosed": True}]},
     "max: must be within -9,007,199,254,740,991 to 9,007,199,254,740,991"),
    ({"questions": [{"id": "x", "text": "X?", "type": "numeric", "min": -(2**53),
                     "max": -(2**53) + 9, "disclosed": True}]}, "min: must be within"),
    ({"questions": [{"id": "x", "text": "X?", "type": "yes_no", "disclosed": "yes"}]},
     "disclosed: must be true or false"),
    ({"crosstabs": [["sex", "smoked"]]}, "cross-tabs need forced-response questions"),
])
def test_bad_open_questions_are_named(change, problem):
    with pytest.raises(SurveyError, match=problem):
        parse_definition(definition(**change))


def test_a_format_6_manifest_may_not_carry_disclosed_and_an_open_one_no_epsilon():
    survey = replace(parse_definition(OPEN), survey_id="s1", key_id="k", origin="https://a.org")
    raw = survey.manifest_bytes()
    with pytest.raises(SurveyError, match="unknown field 'disclosed'"):
        parse_manifest(raw.replace(b"manifest/7", b"manifest/6"))
    stated = raw.replace(b'"disclosed":true,"id":"sex"', b'"disclosed":true,"epsilon":0,"id":"sex"')
    with pytest.raises(SurveyError, match="epsilon: does not apply"):
        parse_manifest(stated)


def test_typed_open_numbers_are_read_exactly_up_to_the_largest_a_browser_holds():
    """At the edge of the range (2^53 - 1, the largest whole number a JavaScript number holds
    exactly) a typed answer is read digit for digit; one past it is refused, never rounded."""
    top = 2**53 - 1
    (question,) = parse_definition({"title": "t", "questions": [
        {"id": "x", "text": "X?", "type": "numeric", "min": top - 10, "max": top,
         "disclosed": True}]}).questions
    assert question.scheme.parse_text(f" {top} ") == top
    assert question.scheme.parse_text(f"{top - 1}") == top - 1
    assert question.scheme.parse_text(f"{top - 3}.0") == top - 3  # a whole number as a decimal
    for typed in (f"{top + 2}", f"{top - 11}", "1e300", "nan", f"{top - 1}.5", f"{2 * top - 2}/2"):
        with pytest.raises(ValueError, match="takes a whole number"):
            question.scheme.parse_text(typed)


def test_the_open_scheme_sends_the_answer_as_is_and_counts_exactly():
    survey = parse_definition(OPEN)
    sex, age = survey.question("sex").scheme, survey.question("age").scheme

    def no_draw():
        raise AssertionError("an open answer takes no random draw")

    assert sex.randomize(1, no_draw) == 1 and age.randomize(40, no_draw) == 40
    assert age.check_report(17) and age.check_report(40.5) and sex.check_report(2)
    assert sex.check_report(0) is None and age.parse_text(" 41 ") == 41
    settings = Settings(0.95, "wald")
    shares = sex.summary([3, 1], settings)
    f = shares["options"][0]
    assert (f["p_hat"], f["standard_error"]) == (0.75, math.sqrt(0.75 * 0.25 / 4))
    assert shares["covariance"] == [[0.75 * 0.25 / 4, -0.75 * 0.25 / 4],
                                    [-0.75 * 0.25 / 4, 0.25 * 0.75 / 4]]
    # ages 20, 30, 40: counters n, sum (x - 18), sum (x - 18)^2 = 3, 2 + 12 + 22, 4 + 144 + 484
    counts = [0, 0, 0]
    for x in (20, 30, 40):
        for counter, amount in age.tally(x):
            counts[counter] += amount
    assert counts == [3, 36, 632]
    mean = age.summary(counts, settings)["options"][0]
    assert mean["p_hat"] == 30.0 and mean["standard_error"] == pytest.approx(math.sqrt(100 / 3))
    assert WORDS in sex.note()[0]


def simulated(survey, n: int, seed: int) -> list[dict]:
    """80 % women in the sample, the population half and half; true smoking 0.2 for women and
    0.6 for men (0.4 in the population); smoked randomized by its mechanism (simulation)."""
    rng = np.random.default_rng(seed)
    male = (rng.random(n) < 0.2).astype(int)
    truth = (rng.random(n) < np.where(male, 0.6, 0.2)).astype(int)
    m = survey.question("smoked").reported_mechanism
    reported = np.where(rng.random(n) < m.alpha, truth, rng.choice(2, n, p=m.beta))
    ages = rng.integers(18, 100, n)
    return [{"sex": int(male[i]), "age": int(ages[i]), "smoked": int(reported[i])}
            for i in range(n)]


@pytest.fixture
def open_survey(client, auth):
    survey_id = published(client, auth, OPEN)
    survey = parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    client.post(f"/api/surveys/{survey_id}/responses/batch", headers=auth,
                json={"responses": [{"answers": a} for a in simulated(survey, 3000, 5)]})
    release_due(client.application)
    return survey_id


def estimates(client, auth, survey_id, **query):
    return client.get(f"/api/surveys/{survey_id}/estimates", headers=auth, query_string=query)


def test_the_server_estimates_open_shares_and_claims_no_amplification(client, auth, open_survey):
    body = estimates(client, auth, open_survey).json
    sex = body["questions"][0]
    assert sex["disclosed"] and sex["n"] == 3000 and sex["epsilon"] == 0.0
    assert sex["options"][1]["p_hat"] == pytest.approx(0.2, abs=0.03)
    assert body["central"]["epsilon_whole_survey"] == body["total_epsilon"]
    assert "No shuffle amplification" in body["central"]["assumes"]
    assert body["total_epsilon"] == pytest.approx(1.0)


def test_weighted_estimates_cover_the_population_and_equal_the_python_api(
        client, auth, open_survey, tmp_path):
    body = estimates(client, auth, open_survey, weights=json.dumps(MARGINS),
                     regress="smoked ~ sex").json
    weighted = body["weighted"]
    assert weighted["weights"]["n"] == 3000 and weighted["weights"]["effective_n"] < 3000
    smoked = next(q for q in weighted["questions"] if q["id"] == "smoked")
    yes = smoked["options"][1]
    assert abs(yes["p_hat"] - 0.4) < 4 * yes["standard_error"]  # simulated at 0.4
    unweighted = body["questions"][2]["options"][1]["p_hat"]
    assert abs(unweighted - 0.28) < 4 * body["questions"][2]["options"][1]["standard_error"]
    (tmp_path / "s.csv").write_bytes(client.get(f"/api/surveys/{open_survey}/export.csv",
                                                headers=auth).data)
    (tmp_path / "s.json").write_bytes(client.get(f"/api/surveys/{open_survey}/codebook.json",
                                                 headers=auth).data)
    frame, mechanisms = read_export(tmp_path / "s.csv", tmp_path / "s.json")
    assert set(mechanisms) == {"smoked"} and frame["age"].dtype.kind == "i"
    local = weighted_results(frame, mechanisms, MARGINS, formula="smoked ~ sex")
    assert local["weights"]["effective_n"] == pytest.approx(weighted["weights"]["effective_n"])
    local_yes = next(q for q in local["questions"] if q["id"] == "smoked")["options"][1]
    assert local_yes["p_hat"] == pytest.approx(yes["p_hat"], abs=1e-12)
    assert local_yes["standard_error"] == pytest.approx(yes["standard_error"], rel=1e-9)
    np.testing.assert_allclose(local["regression"]["covariance"],
                               weighted["regression"]["covariance"], rtol=1e-6)
    assert weighted["regression"]["variance"] == "linearization"
    schema = client.get("/api/openapi.json").json  # the reply is as the description says
    request = client.get(f"/api/surveys/{open_survey}/estimates", headers=auth, query_string={
        "weights": json.dumps(MARGINS), "regress": "smoked ~ sex"})
    OpenAPI.from_dict(schema).validate_response(WerkzeugOpenAPIRequest(request.request),
                                                WerkzeugOpenAPIResponse(request))


@pytest.mark.parametrize("weights, detail", [
    ({"region": {"n": 0.5, "s": 0.5}}, "'region' is no question of this survey"),
    ({"sex": {"f": 0.5, "m": 0.6}}, "the shares sum to 1.1, not 1"),
    ({"sex": {"f": 0.5, "m": 0.4, "x": 0.1}}, "level 'x': no row has it"),
    ({"smoked": {"No": 0.5, "Yes": 0.5}}, "randomized question"),
])
def test_bad_margins_are_one_4xx_naming_the_problem(client, auth, open_survey, weights, detail):
    response = estimates(client, auth, open_survey, weights=json.dumps(weights))
    assert response.status_code == 400 and detail in response.json["detail"], response.json
    assert estimates(client, auth, open_survey, weights="{").status_code == 400


def test_small_groups_of_open_answers_are_refused(client, auth, app):
    survey_id = client.post("/api/surveys", json=OPEN, headers=auth).json["survey_id"]
    rows = [{"sex": 0, "age": 30, "smoked": i % 2} for i in range(40)]
    rows += [{"sex": 1, "age": 30, "smoked": i % 2} for i in range(9)]  # 9 men: below 10
    client.post(f"/api/surveys/{survey_id}/responses/batch", headers=auth,
                json={"responses": [{"answers": a} for a in rows]})
    release_due(app)
    refused = estimates(client, auth, survey_id, regress="smoked ~ sex")
    assert refused.status_code == 400
    assert "the group sex = m has fewer than 10 respondents" in refused.json["detail"]
    weights = estimates(client, auth, survey_id, weights=json.dumps(MARGINS))
    assert weights.status_code == 400 and "fewer than 10" in weights.json["detail"]
    app.config["MIN_CELL"] = 9  # the setting: 9 men are then enough
    assert estimates(client, auth, survey_id, regress="smoked ~ sex").status_code != 400


REGIONS = {**OPEN, "questions": [
    OPEN["questions"][0],
    {"id": "region", "text": "Region?", "type": "choice", "options": ["n", "s"],
     "disclosed": True},
    OPEN["questions"][2]]}


def test_raking_to_crossed_margins_cannot_single_out_the_one_person_of_a_cell(client, auth, app):
    """The attack: every level of sex and of region holds 10 or more, but one man lives in the
    south; raked to 'nearly all men' and 'nearly all south', his weight carries the whole
    estimate and its reported rate is his own report. Refused: raking checks the cells of all
    margins together, and a weighted regression the cells within its groups too."""
    survey_id = client.post("/api/surveys", json=REGIONS, headers=auth).json["survey_id"]
    rows = ([{"sex": 0, "region": 0, "smoked": i % 2} for i in range(40)]
            + [{"sex": 1, "region": 0, "smoked": i % 2} for i in range(15)]
            + [{"sex": 0, "region": 1, "smoked": i % 2} for i in range(15)]
            + [{"sex": 1, "region": 1, "smoked": 1}])  # the target
    client.post(f"/api/surveys/{survey_id}/responses/batch", headers=auth,
                json={"responses": [{"answers": a} for a in rows]})
    release_due(app)
    crossed = {"sex": {"f": 0.00001, "m": 0.99999}, "region": {"n": 0.00001, "s": 0.99999}}
    for query in ({"weights": json.dumps(crossed)},
                  {"weights": json.dumps(crossed), "regress": "smoked ~ 1"},
                  {"weights": json.dumps({"region": crossed["region"]}),
                   "regress": "smoked ~ sex"}):
        refused = estimates(client, auth, survey_id, **query)
        assert refused.status_code == 400, query
        assert "the group sex = m, region = s has fewer than 10" in refused.json["detail"]
    # each margin alone weights groups of 10 or more: allowed, and no one carries it
    alone = estimates(client, auth, survey_id, weights=json.dumps({"sex": crossed["sex"]}))
    assert alone.status_code == 200
    assert alone.json["weighted"]["weights"]["effective_n"] >= 10
    app.config["MIN_CELL"] = 1  # the setting's other side: the crossed margins then rake
    assert estimates(client, auth, survey_id, weights=json.dumps(crossed)).status_code == 200


def test_results_weights_prints_and_refuses_a_bad_file(live_server, open_survey, researcher_key,
                                                      monkeypatch, tmp_path):
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    (tmp_path / "m.csv").write_text("column,level,share\nsex,f,0.5\nsex,m,0.5\n")
    args = ["results", "--url", live_server, "--survey", open_survey]
    shown = CliRunner().invoke(main, [*args, "--weights", str(tmp_path / "m.csv")])
    assert shown.exit_code == 0, shown.output
    assert "effective sample size" in shown.stdout and "sex (open)" in shown.stdout
    as_json = CliRunner().invoke(main, [*args, "--weights", str(tmp_path / "m.csv"),
                                        "--regress", "smoked ~ sex", "--json"])
    document = json.loads(as_json.stdout)
    assert document["regression"]["variance"] == "linearization"
    unweighted = CliRunner().invoke(main, [*args, "--json"])
    assert "weighted" not in json.loads(unweighted.stdout)
    (tmp_path / "bad.csv").write_text("column,level,share\nsex,f,0.5\nsex,m,0.6\n")
    bad = CliRunner().invoke(main, [*args, "--weights", str(tmp_path / "bad.csv")])
    assert bad.exit_code != 0 and "sum to 1.1, not 1" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    (tmp_path / "q.json").write_text(json.dumps({"region": {"n": 1, "s": 1}}))
    unknown = CliRunner().invoke(main, [*args, "--weights", str(tmp_path / "q.json")])
    assert unknown.exit_code != 0 and len(unknown.stderr.strip().splitlines()) == 1


def test_a_difference_of_an_open_question_is_refused_in_one_line(live_server, open_survey,
                                                                   researcher_key, monkeypatch):
    """--difference is for forced-response questions: an open one is refused by name (it
    failed with a KeyError on the missing design), a randomized one still answers."""
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    args = ["results", "--url", live_server, "--survey", open_survey, "--difference"]
    refused = CliRunner().invoke(main, [*args, "sex:0,sex:1"])
    assert refused.exit_code == 2 and "question 'sex' answered openly" in refused.stderr
    assert "Traceback" not in refused.output
    assert CliRunner().invoke(main, [*args, "smoked:0,smoked:1"]).exit_code == 0


def test_codebook_marks_open_questions(client, auth, open_survey):
    book = client.get(f"/api/surveys/{open_survey}/codebook.json", headers=auth).json
    assert book["questions"][0]["disclosed"] is True and "epsilon" not in book["questions"][0]
    markdown = client.get(f"/api/surveys/{open_survey}/codebook.md", headers=auth).data.decode()
    assert "answered openly (disclosed)" in markdown


# --- the size of a response with an open number (the report is its digits) ------------------

INCOME = {"title": "Income", "release_batch": 1, "questions": [
    {"id": "income", "text": "Your income?", "type": "numeric", "min": -5, "max": 999990,
     "disclosed": True},
    {"id": "smoked", "text": "Smoked?", "type": "yes_no", "epsilon": 1.0}]}
INCOMES = (7, -5, 0, 999990, 99999)


def test_an_open_number_of_any_length_is_sent_in_one_size(evil, tmp_path):  # noqa: F811
    """The attack on the wire: open answers of 1 to 7 characters, each sent by the Python client
    with its own idempotency key: the whole request (line, headers, body) has one length."""
    import secrets

    from ldpsurvey.client import Ceilings, LocalState, fetch_survey, submit
    from ldpsurvey.client.respondent import Submission
    from ldpsurvey.shared.survey.manifest import key_id, web_origin

    evil.serve_survey(INCOME)  # then signed again with its origin (format /7 names one)
    manifest = replace(parse_definition(INCOME), survey_id="S", key_id=key_id(evil.public),
                       origin=web_origin(evil.url)).manifest_bytes()
    evil.pages[("GET", "/api/surveys/S")] = (200, manifest)
    evil.pages[("GET", "/api/surveys/S/manifest.sig")] = (200, evil.key.sign(manifest))
    evil.serve_json("POST", "/api/surveys/S/responses", {"survey_id": "S", "accepted": 1}, 201)
    state = LocalState(tmp_path / "state.json")
    verified = fetch_survey(evil.url, "S", state, Ceilings(10.0, 100.0, 1000.0))
    for income in INCOMES:
        submit(verified, Submission("S", {"income": income, "smoked": 1},
                                    secrets.token_urlsafe(24), False), state)
    assert len({len(line) + len(headers) + len(body) for line, headers, body in evil.posts}) == 1
    assert [json.loads(body)["answers"]["income"] for _, _, body in evil.posts] == list(INCOMES)


def test_an_open_number_of_any_length_is_stored_in_one_size_and_only_as_an_integer(
        app, client, auth):
    """The attack at rest: a copy of the files shows each pending row's sealed length, one
    whatever the open number (padded to the survey's longest row: the longest of min and max).
    A whole number written as 7.0 (one a client never sends, but a longer row and a float in
    integer counters) is refused."""
    import base64

    from ldpsurvey.aggregator.web.request_connection import get_db

    survey_id = client.post("/api/surveys", json=INCOME, headers=auth).json["survey_id"]
    url = f"/api/surveys/{survey_id}/responses"
    for income in INCOMES:
        assert client.post(url, json={"answers": {"income": income, "smoked": 0}}).status_code \
            == 201
    refused = client.post(url, json={"answers": {"income": 999990.0, "smoked": 0}})
    assert refused.status_code == 422
    assert "answers.income must be a whole number" in refused.json["detail"]
    with app.app_context():
        lengths = {len(base64.b64decode(sealed)) for (sealed,) in get_db().query(
            "SELECT answers FROM pending WHERE survey_id = ?", (survey_id,))}
    assert len(lengths) == 1
    release_due(app)
    exported = client.get(f"/api/surveys/{survey_id}/export.jsonl", headers=auth).text
    assert sorted(json.loads(line)["answers"]["income"] for line in exported.splitlines()[1:]) \
        == sorted(INCOMES)


def test_an_open_level_below_min_cell_is_counted_exactly_only_for_readers_of_the_export(
        app, client, auth):
    """Why a level of an open question held by fewer than MIN_CELL respondents is not
    suppressed in the estimates (docs/privacy.md): every key that may read them (the owner, a
    researcher it is shared with) may read the export too, which holds each open answer as
    given; anyone else reads neither (public results are refused for such a survey)."""
    from test_accounts import key_for, name_of

    survey_id = client.post("/api/surveys", json=OPEN, headers=auth).json["survey_id"]
    rows = [{"sex": 0, "age": 30, "smoked": i % 2} for i in range(40)]
    rows += [{"sex": 1, "age": 30 + i, "smoked": i % 2} for i in range(3)]  # 3 men: below 10
    client.post(f"/api/surveys/{survey_id}/responses/batch", headers=auth,
                json={"responses": [{"answers": a} for a in rows]})
    release_due(app)
    shared, stranger = key_for(app, name="bob"), key_for(app, name="carol")
    assert client.put(f"/api/surveys/{survey_id}/shares/{name_of(app, shared)}",
                      headers=auth).status_code == 200
    for reader in (auth, shared):
        men = estimates(client, reader, survey_id).json["questions"][0]["options"][1]
        assert men["reported_count"] == 3 and men["p_hat"] == 3 / 43
        export = client.get(f"/api/surveys/{survey_id}/export.jsonl", headers=reader)
        assert export.status_code == 200
        assert sum(json.loads(line)["answers"]["sex"] == 1
                   for line in export.text.splitlines()[1:]) == 3
    for outsider in (stranger, {}):
        assert estimates(client, outsider, survey_id).status_code in (401, 404)
        assert client.get(f"/api/surveys/{survey_id}/export.jsonl",
                          headers=outsider).status_code in (401, 404)
