"""Every surface, every type (issues 39 and 41): one survey holding every question type,
mechanism and design the registry offers (helpers.EVERY_TYPE; tests/conformance/mechanisms.py),
answered and released once per module, on SQLite and PostgreSQL, through the published epsilon,
intake, the dashboard and the results page, the exports and codebooks (each response checked
against the OpenAPI description as it arrives: helpers.conforms), read_export, the regression
and the weights, which use each question or refuse it in one line naming it. The tests named
after an entry run once per registry entry, on its example question."""

import csv
import io
import json
import re

import pytest

from helpers import EVERY_TYPE, EVERY_TYPE_ANSWERS, every_type_answered, published, released_n
from mechanisms import each_entry, registered

pytest.importorskip("pandas")

EXPORTS = {"labels.csv": "export.csv", "codes.csv": "export.csv?codes=true",
           "rr.csv": "export.csv?format=rr", "export.jsonl": "export.jsonl"}
FILES = {**EXPORTS, "codebook.json": "codebook.json", "codebook.md": "codebook.md"}
IDS = [q["id"] for q in EVERY_TYPE["questions"]]
MARGINS = {"region": dict.fromkeys(["North", "South", "East", "West"], 0.25)}
NUMBERS = {q["id"] for q in EVERY_TYPE["questions"] if q["type"] == "numeric"}
REGISTERED = registered()
# Reports no scheme can produce (each also refused past a scheme's largest report: malformed).
MALFORMED = [None, True, "0", -1, 0.5, {}, [], [[]], 2**64]


def malformed(scheme) -> list:
    """MALFORMED, and one past the scheme's largest report (one more, or one element more)."""
    largest = scheme.largest_report()
    return [*MALFORMED, [*largest, 0] if isinstance(largest, list) else largest + 1]


def log_in(client, researcher_key):
    """Log the client in at the dashboard (its session then opens every survey's results)."""
    client.get("/researcher")
    with client.session_transaction() as session:
        token = session["csrf"]
    assert client.post("/researcher/login", data={"csrf": token, "key": researcher_key}
                       ).status_code == 302


@pytest.fixture(scope="module")
def answered(app, auth):
    """The survey's id (EVERY_TYPE with 240 responses released), the module's to read only."""
    return every_type_answered(app.test_client(), auth)


@pytest.fixture(scope="module")
def exported(app, auth, answered, tmp_path_factory):
    """A folder holding every export and codebook of the answered survey as served (read
    unbuffered: the recording client checks them in test_every_surface_is_served_as_described,
    so that each test here fails for its own reason)."""
    folder = tmp_path_factory.mktemp("exports")
    client = app.test_client()
    for name, path in FILES.items():
        response = client.get(f"/api/surveys/{answered}/{path}", headers=auth, buffered=False)
        (folder / name).write_bytes(response.get_data())
        response.close()
    return folder


def test_the_dashboards_results_button_shows_every_question(client, auth, researcher_key,
                                                           answered):
    """The dashboard's Results button led to a 500 for any survey with an openly answered
    question ('dict object' has no attribute 'alpha'); an open question is said to be answered
    openly, and the page does not blame the release size for what the open questions cause."""
    log_in(client, researcher_key)
    dashboard = client.get("/researcher")
    assert dashboard.status_code == 200
    button = re.search(rf'href="(/s/{answered}/results)">Results',
                       dashboard.get_data(as_text=True)).group(1)
    response = client.get(button)
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    assert page.count("answered openly: not randomized") == 3
    assert "openly answered questions can tell one response" in page
    assert "No release has been large enough" not in page
    assert "right with probability at most 100 %" not in page
    assert "(Clopper-Pearson)" in page and "Clopper-pearson" not in page
    rows = client.get(f"/s/{answered}/results/estimates.csv").get_data(as_text=True)
    assert {row["question_id"] for row in csv.DictReader(io.StringIO(rows))} == set(IDS)
    for qid in IDS:  # each question's chart, as the page links it
        chart = client.get(f"/s/{answered}/results/{qid}.svg")
        assert chart.status_code == 200 and chart.mimetype == "image/svg+xml", qid


@pytest.mark.parametrize("path", [*FILES.values(), "estimates", "estimates?simultaneous=true"])
def test_every_surface_is_served_as_described(client, auth, answered, path):
    """200, and the body as /api/openapi.json describes it (the recording client checks each
    response as it arrives): the codebook of a piecewise or hybrid question broke the schema;
    the Markdown codebook was a 500 for a multi_select question under bits, and has one row
    per question."""
    response = client.get(f"/api/surveys/{answered}/{path}", headers=auth)
    assert response.status_code == 200, response.data[:300]
    if path == "codebook.md":
        for qid in IDS:
            assert f"| {qid} |" in response.get_data(as_text=True)


def test_the_codebook_explains_every_cell(exported):
    """Every column of every CSV belongs to a question of the codebook (its `columns`), each
    question says what its cells and reports hold, and a cell of an option column is one of
    the options' csv_value (labels) or code (codes): padding's placeholders included."""
    book = json.loads((exported / "codebook.json").read_text())
    questions = {q["id"]: q for q in book["questions"]}
    for name, codes in (("labels.csv", False), ("codes.csv", True)):
        rows = list(csv.DictReader(io.StringIO((exported / name).read_text())))
        columns = {column: q for q in questions.values()
                   for column in q.get("columns", [q["id"]])}
        assert set(rows[0]) == set(columns)
        for column, question in columns.items():
            assert question["cells"] and question["report"]
            values = {row[column] for row in rows}
            if column == question["id"] and question["options"]:  # an answer: an option's
                assert values <= {str(o["code"]) if codes else o["csv_value"]
                                  for o in question["options"]}, (name, column)
            else:  # bits, seeds, hash values, groups, numbers
                assert all(float(value) == float(value) for value in values), column
    padding = questions["drinks"]["options"]
    assert [o["label"] for o in padding[4:]] == ["(placeholder 1)", "(placeholder 2)"]


@pytest.mark.parametrize("export", list(EXPORTS))
def test_read_export_reads_every_export(exported, export):
    """read_export stopped with KeyError 'alpha' (cheating detection) and errors on OUE,
    padding and numeric columns; it reads every column of every export now, and only the
    forced-response questions get a mechanism."""
    from ldpsurvey.analysis import read_export
    from ldpsurvey.analysis.data import Unsupported
    from ldpsurvey.shared import Mechanism

    frame, mechanisms = read_export(exported / export, exported / "codebook.json",
                                    codes=export == "codes.csv")
    assert len(frame) == 240
    usable = {name for name, m in mechanisms.items() if isinstance(m, Mechanism)}
    assert usable == {"smoked", "ever", "sleep", "travel"}
    refused = {m.question for m in mechanisms.values() if isinstance(m, Unsupported)}
    assert refused == {"fruit", "bread", "sports", "drinks",
                       "games", "glasses", "steps", "screen",
                       "commute", "income", "shoplifted"}
    assert frame["age"].dtype.kind == "i" and frame["steps"].dtype.kind in "if"
    assert list(frame["region"].cat.categories) == ["North", "South", "East", "West"]
    labels, _ = read_export(exported / "labels.csv", exported / "codebook.json")
    for column in labels.columns:  # the same frame, but where codes hold a randomized number's
        if column not in NUMBERS:  # report and labels its unbiased value
            assert list(frame[column].astype(str)) == list(labels[column].astype(str)), column


@pytest.mark.parametrize("qid", IDS[1:])
def test_a_regression_uses_each_question_or_refuses_it_naming_it(exported, qid):
    """smoked ~ QID on the export: a forced-response or open question is fitted (or fails as
    a fit does); any other is refused in one line naming it, as the outcome too."""
    from ldpsurvey.analysis import AnalysisError, ConvergenceError, read_export, rr_logistic
    from ldpsurvey.analysis.data import Unsupported

    frame, mechanisms = read_export(exported / "labels.csv", exported / "codebook.json")
    if isinstance(mechanisms.get(qid), Unsupported):
        for formula in (f"smoked ~ {qid}", f"{qid} ~ smoked"):
            with pytest.raises(AnalysisError) as refused:
                rr_logistic(formula, frame, mechanisms)
            assert repr(qid) in str(refused.value) and "\n" not in str(refused.value)
        return
    try:
        fit = rr_logistic(f"smoked ~ {qid}", frame, mechanisms)
    except ConvergenceError:
        return  # the data's maximum at infinity: a fit's own failure, said as such
    assert fit.n == 240


def test_weights_say_which_questions_they_leave_out_and_why(exported):
    """results --weights left cheating-detection and OUE questions out in silence: the
    document lists each question it does not weight, with the reason."""
    from ldpsurvey.analysis import read_export, weighted_results

    frame, mechanisms = read_export(exported / "labels.csv", exported / "codebook.json")
    body = weighted_results(frame, mechanisms, MARGINS)
    weighted = {q["id"] for q in body["questions"]}
    assert weighted == {"smoked", "ever", "sleep", "travel", "region", "member"}
    left_out = {entry["id"]: entry["reason"] for entry in body["left_out"]}
    assert set(left_out) == set(IDS) - weighted - {"age"}
    assert "cheating detection" in left_out["shoplifted"]
    assert "(OUE)" in left_out["fruit"]


def test_the_cli_says_what_weights_leave_out_and_why_shuffling_does_not_help(
        live_server, answered, researcher_key, monkeypatch, tmp_path):
    """`results --weights` (the estimates endpoint's weights) names each question it does not
    weight and why, one line each (it left cheating-detection and OUE questions out in
    silence); `results` says the open questions, not the release size, keep shuffling from
    lowering the epsilon."""
    from click.testing import CliRunner

    from ldpsurvey.cli import main

    survey_id = answered
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    (tmp_path / "m.json").write_text(json.dumps(MARGINS))
    args = ["results", "--url", live_server, "--survey", survey_id]
    weighted = CliRunner().invoke(main, [*args, "--weights", str(tmp_path / "m.json")])
    assert weighted.exit_code == 0, weighted.output
    lines = [line for line in weighted.stdout.splitlines() if line.startswith("Not weighted: ")]
    assert [line.split("'")[1] for line in lines] == [
        "shoplifted", "fruit", "bread", "sports", "drinks", "games",
        "glasses", "steps", "screen", "commute", "income"]
    assert "cheating detection" in lines[0] and "(OUE)" in lines[1]
    document = json.loads(CliRunner().invoke(
        main, [*args, "--weights", str(tmp_path / "m.json"), "--json"]).stdout)
    assert len(document["left_out"]) == 11
    shown = CliRunner().invoke(main, args)
    assert shown.exit_code == 0, shown.output
    assert "openly answered questions can tell one response" in shown.stdout
    assert "no release has been large enough" not in shown.stdout


def test_the_servers_regression_and_weights_use_or_refuse_each_question(client, auth,
                                                                        answered):
    """The estimates endpoint's regress and weights, over every question: a forced-response or
    open question is fitted (or its fit fails as a fit does: 422), any other refused in a 400
    whose one line names it; a margin on one was a 500 (its list reports tallied)."""
    from urllib.parse import quote

    from ldpsurvey.shared import parse_definition

    survey_id = answered
    schemes = {q.id: q.scheme.name for q in parse_definition(EVERY_TYPE).questions}
    for qid in IDS[1:]:
        response = client.get(f"/api/surveys/{survey_id}/estimates?regress="
                              f"{quote(f'smoked ~ {qid}')}", headers=auth)
        if schemes[qid] in ("forced_response", "disclosed"):
            assert response.status_code in (200, 422), (qid, response.json)
        else:
            assert response.status_code == 400, qid
            assert repr(qid) in response.json["detail"] and "\n" not in response.json["detail"]
        margins = quote(json.dumps({qid: {"No": 0.5, "Yes": 0.5}}))
        raked = client.get(f"/api/surveys/{survey_id}/estimates?weights={margins}",
                           headers=auth)
        if qid != "member":  # the one open yes/no: raked
            assert raked.status_code == 400 and repr(qid) in raked.json["detail"], qid


def test_the_survey_holds_every_entry_the_registry_offers(client, auth):
    """Every choice mechanism, every type's mechanisms, every design, and an open question of
    each type that takes one (REGISTERED, auto's choices aside): a mechanism added to the
    registry and not to EVERY_TYPE fails, here and in test_registry.py."""
    from ldpsurvey.shared import parse_definition, parse_manifest
    from ldpsurvey.shared.mechanisms import multi_select, numeric

    offered = {entry for entry in REGISTERED if entry[1] != "auto"}
    assert offered <= {(q.type, q.scheme.name) for q in parse_definition(EVERY_TYPE).questions}
    assert {"concept", "mechanism"} <= {key for q in EVERY_TYPE["questions"] for key in q}
    survey = parse_manifest(client.get(f"/api/surveys/{published(client, auth, EVERY_TYPE)}"
                                       ).data)
    assert {(q.type, q.scheme.name) for q in survey.questions} == offered
    assert any(q.concept for q in survey.questions)
    limited = {q.scheme.name for q in survey.questions if q.type == multi_select.TYPE}
    assert limited == {"bits", "padding"} and all(
        q.scheme.max_selected == 2 for q in survey.questions if q.type == multi_select.TYPE)
    assert {q.scheme.name for q in survey.questions if q.type == numeric.TYPE} >= {
        "duchi", "piecewise", "hybrid"}


@each_entry
def test_the_manifest_states_the_exact_epsilon(client, answered, question):
    """The epsilon the published manifest states is its scheme's exact epsilon, recomputed from
    the manifest's own fields and from the definition, to the last bit; an open question
    states none and costs none."""
    from ldpsurvey.shared import parse_definition, parse_manifest

    raw = client.get(f"/api/surveys/{answered}").data
    stated = next(q for q in json.loads(raw)["questions"] if q["id"] == question["id"])
    exact = parse_manifest(raw).question(question["id"]).scheme.epsilon
    assert exact == stated.get("epsilon", 0.0)
    assert exact == parse_definition(EVERY_TYPE).question(question["id"]).scheme.epsilon
    assert ("epsilon" in stated) == (not question.get("disclosed", False))


@pytest.fixture(scope="module")
def intake_survey(app, auth):
    """EVERY_TYPE published again (its responses are this module's intake tests' own) and
    each question's report of its EVERY_TYPE_ANSWERS answer."""
    from ldpsurvey.shared import parse_definition
    from ldpsurvey.shared.mechanisms.randomizer import secure_draw

    reports = {}
    for q in parse_definition(EVERY_TYPE).questions:
        answer = EVERY_TYPE_ANSWERS[q.id]
        truth = q.scheme.parse_text(answer if isinstance(answer, str) else ";".join(answer))
        reports[q.id] = q.scheme.randomize(truth, secure_draw)
    return published(app.test_client(), auth, EVERY_TYPE), reports


@each_entry
def test_intake_takes_its_reports_and_refuses_malformed_ones(client, auth, intake_survey,
                                                            question):
    """Each malformed report (MALFORMED, one past the largest) is a 422 whose JSON names the
    question, and nothing is stored; a report its scheme produced is taken and counted."""
    from ldpsurvey.shared import parse_definition

    survey_id, reports = intake_survey
    scheme = parse_definition(EVERY_TYPE).question(question["id"]).scheme
    before = released_n(client, auth, survey_id)
    for value in malformed(scheme):
        response = client.post(f"/api/surveys/{survey_id}/responses",
                               json={"answers": {**reports, question["id"]: value}})
        assert response.status_code == 422, (value, response.json)
        assert response.json["error"] == "invalid_answers"
        assert f"answers.{question['id']} " in response.json["detail"], value
    assert released_n(client, auth, survey_id) == before
    response = client.post(f"/api/surveys/{survey_id}/responses", json={"answers": reports})
    assert response.status_code == 201, response.json
    assert released_n(client, auth, survey_id) == before + 1


@each_entry
def test_the_results_page_and_the_estimates_show_it(client, auth, researcher_key, answered,
                                                    question):
    """The results page (reached from the dashboard's login) asks the question, its chart is
    an SVG, the page's estimates CSV has its rows, and the API's estimates count its 240
    reports with an interval for each quantity."""
    from html import escape

    log_in(client, researcher_key)
    page = client.get(f"/s/{answered}/results")
    assert page.status_code == 200
    assert escape(question["text"]) in page.get_data(as_text=True)
    chart = client.get(f"/s/{answered}/results/{question['id']}.svg")
    assert chart.status_code == 200 and chart.mimetype == "image/svg+xml"
    rows = client.get(f"/s/{answered}/results/estimates.csv").get_data(as_text=True)
    assert question["id"] in {row["question_id"] for row in csv.DictReader(io.StringIO(rows))}
    body = client.get(f"/api/surveys/{answered}/estimates", headers=auth).json
    estimated = next(q for q in body["questions"] if q["id"] == question["id"])
    assert estimated["n"] == 240
    assert all(o["ci_low"] <= o["ci_high"] for o in estimated["options"])


@each_entry
def test_every_export_and_the_codebook_hold_it(exported, question):
    """The codebook says what the question's cells and report hold; its columns head both
    plain CSVs and read_export reads them back; each JSON line holds its report."""
    from ldpsurvey.analysis import read_export

    book = json.loads((exported / "codebook.json").read_text())
    described = next(q for q in book["questions"] if q["id"] == question["id"])
    assert described["cells"] and described["report"]
    columns = described.get("columns", [question["id"]])
    for name in ("labels.csv", "codes.csv"):
        header = next(csv.reader(io.StringIO((exported / name).read_text())))
        assert set(columns) <= set(header), name
        frame, _ = read_export(exported / name, exported / "codebook.json",
                               codes=name == "codes.csv")
        assert set(columns) <= set(frame.columns) and frame[columns].notna().all().all(), name
    lines = (exported / "export.jsonl").read_text().splitlines()[1:]
    assert len(lines) == 240
    assert all(question["id"] in json.loads(line)["answers"] for line in lines)
