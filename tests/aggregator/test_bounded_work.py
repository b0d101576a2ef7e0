"""Attacks on the work and reply size a caller can choose: cross-tabs of many-option questions
(a 64 x 64 one made a 367 MiB reply and took 1.4 GB of server memory). A cross-tab has at most
crosstab.MAX_CELLS cells: declared pairs are refused at publish and by `survey check`, any other
request before any work, and the largest allowed reply stays under crosstab.reply_bound."""

import contextlib
import json
import secrets
import threading
import time

import pytest
from click.testing import CliRunner

from ldpsurvey.cli import main
from ldpsurvey.shared.stats.crosstab import MAX_CELLS, reply_bound

from helpers import OPEN_AND_HIDDEN, release_due


def question(qid: str, k: int) -> dict:
    return {"id": qid, "text": f"{qid}?", "type": "choice",
            "options": [f"option {j}" for j in range(k)], "epsilon": 1.0}


def definition(k_rows: int, k_cols: int, declared: bool) -> dict:
    return {"title": "Wide", "public_results": True, "release_batch": 1,
            "questions": [question("wide_a", k_rows), question("wide_b", k_cols)],
            **({"crosstabs": [["wide_a", "wide_b"]]} if declared else {})}


def published(client, auth, k_rows: int, k_cols: int, declared: bool) -> str:
    """A public-results survey of two questions with 200 responses released."""
    response = client.post("/api/surveys", json=definition(k_rows, k_cols, declared), headers=auth)
    assert response.status_code == 201, response.json
    survey_id = response.json["survey_id"]
    answers = [{"answers": {"wide_a": secrets.randbelow(k_rows), "wide_b": secrets.randbelow(k_cols)}}
               for _ in range(200)]
    stored = client.post(f"/api/surveys/{survey_id}/responses/batch", json={"responses": answers},
                         headers=auth)
    assert stored.status_code == 201, stored.json
    assert release_due(client.application) == 200
    return survey_id


def test_a_64_by_64_crosstab_declaration_is_refused_at_creation_naming_the_limit(client, auth):
    """The attacker's survey cannot be published: 422 naming the pair, its cells and the
    limit, and nothing is stored."""
    response = client.post("/api/surveys", json=definition(64, 64, declared=True), headers=auth)
    assert response.status_code == 422
    assert response.json["error"] == "invalid_survey"
    assert response.json["detail"] == (
        f"survey.crosstabs[0]: a cross-tab of 64 x 64 options has 4096 cells, above the limit "
        f"of {MAX_CELLS} cells per cross-tab")
    assert client.get("/api/surveys", headers=auth).json["surveys"] == []


@pytest.mark.parametrize("k_rows, k_cols, accepted", [(16, 16, True), (64, 4, True),
                                                      (17, 16, False), (64, 64, False)])
def test_survey_check_applies_the_same_limit(tmp_path, k_rows, k_cols, accepted):
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(definition(k_rows, k_cols, declared=True)))
    checked = CliRunner().invoke(main, ["survey", "check", str(path), "--json"])
    if accepted:
        assert checked.exit_code == 0, checked.output
        return
    assert checked.exit_code != 0
    message = checked.output.strip()
    assert "\n" not in message
    assert f"{k_rows} x {k_cols} options has {k_rows * k_cols} cells" in message
    assert f"the limit of {MAX_CELLS} cells" in message


@pytest.mark.parametrize("k_rows, k_cols", [(17, 16), (64, 64)])
@pytest.mark.parametrize("where", ["api", "page"])
def test_an_anonymous_crosstab_above_the_limit_is_refused_before_any_work(client, auth, k_rows,
                                                                          k_cols, where):
    """The attack: anonymous, on a public-results survey, a cross-tab of two undeclared wide
    questions (tallied from every response). The attacker gets a 400 naming the limit and
    nothing of the table."""
    survey_id = published(client, auth, k_rows, k_cols, declared=False)
    query = "rows=wide_a&cols=wide_b"
    if where == "api":
        response = client.get(f"/api/surveys/{survey_id}/crosstab?{query}")
        assert response.status_code == 400
        assert response.json == {"error": "invalid_parameter", "detail": (
            f"a cross-tab of {k_rows} x {k_cols} options has {k_rows * k_cols} cells, above "
            f"the limit of {MAX_CELLS} cells per cross-tab")}
    else:
        response = client.get(f"/s/{survey_id}/results?{query}")
        assert response.status_code == 400
        assert f"the limit of {MAX_CELLS} cells per cross-tab" in response.get_data(as_text=True)
    assert len(response.data) < 10_000


@pytest.mark.parametrize("k_rows, k_cols, declared", [(16, 16, True), (64, 4, True),
                                                      (4, 64, False)])
def test_the_largest_allowed_crosstab_reply_stays_under_its_bound(client, auth, k_rows, k_cols,
                                                                  declared):
    """Every allowed cross-tab, anonymous, has at most MAX_CELLS cells and a reply of at most
    reply_bound(MAX_CELLS) bytes, under 2 MiB."""
    assert k_rows * k_cols == MAX_CELLS
    survey_id = published(client, auth, k_rows, k_cols, declared)
    response = client.get(f"/api/surveys/{survey_id}/crosstab?rows=wide_a&cols=wide_b")
    assert response.status_code == 200
    body = response.json
    assert body["n"] == 200 and len(body["covariance"]) == MAX_CELLS
    assert len(response.data) <= reply_bound(MAX_CELLS) < 2 * 2**20
    page = client.get(f"/s/{survey_id}/results?rows=wide_a&cols=wide_b")
    assert page.status_code == 200


# Analyses (issue 38): a regression or weighting a request can start is bounded before any work
# (parameters and latent rows, budgets.Budget), tighter for the public of a public-results
# survey, and runs in a process of its own under a budget of seconds and memory that stops it.
# The attack: on 3,000 responses of 10 yes/no questions, `regress=a~b*c*d*e*f*g` (127
# parameters) took 46.9 s, with eight interacted covariates more than 15 minutes and 1.58 GB.

YES_NO = "abcdefghij"
SIX_WAY = "a~b*c*d*e*f*g"  # 127 parameters, 128 units x 64 latent combinations
EIGHT_WAY = "a~b*c*d*e*f*g*h*i"  # 511 parameters, 512 units x 256 latent combinations


@contextlib.contextmanager
def analysis_app(database_url: str, folder, **config):
    """The aggregator with these settings, and a researcher's key."""
    from ldpsurvey.aggregator import close_app, create_api_key, create_app

    application = create_app({"DATABASE_URL": database_url, **config},
                             instance_path=folder / "instance")
    try:
        yield application, {"Authorization": f"Bearer {create_api_key(application).key}"}
    finally:
        close_app(application)


def yes_no_survey(client, auth, n: int = 3000) -> str:
    """A public-results survey of 10 yes/no questions with n random responses released."""
    definition = {"title": "Ten", "public_results": True, "release_batch": 1, "questions": [
        {"id": q, "text": f"{q}?", "type": "yes_no", "epsilon": 1.0} for q in YES_NO]}
    survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
    answers = [{"answers": {q: secrets.randbelow(2) for q in YES_NO}} for _ in range(n)]
    stored = client.post(f"/api/surveys/{survey_id}/responses/batch",
                         json={"responses": answers}, headers=auth)
    assert stored.status_code == 201, stored.json
    assert release_due(client.application) == n
    return survey_id


def regress(client, survey_id: str, formula: str, headers=None):
    return client.get(f"/api/surveys/{survey_id}/estimates", query_string={"regress": formula},
                      headers=headers or {})


@pytest.mark.parametrize("keyed, formula, value, limit, setting", [
    (False, SIX_WAY, 127, 64, "ANALYSIS_PARAMETERS_ANONYMOUS"),
    (True, EIGHT_WAY, 511, 256, "ANALYSIS_PARAMETERS"),
])
def test_a_regression_above_its_callers_bound_is_refused_before_any_work(
        database_url, tmp_path, keyed, formula, value, limit, setting):
    """422 naming the cost and the limit, anonymous and with a key; no analysis started (a
    memory budget of 1 MiB would stop any that did with another error)."""
    with analysis_app(database_url, tmp_path, ANALYSIS_MEMORY_MIB=1,
                      ANALYSIS_MEMORY_MIB_ANONYMOUS=1) as (app, auth):
        client = app.test_client()
        survey_id = yes_no_survey(client, auth)
        response = regress(client, survey_id, formula, auth if keyed else None)
        assert response.status_code == 422
        assert response.json == {"error": "analysis_too_large", "detail": (
            f"regress: this model has {value} parameters, above the limit of {limit} "
            f"({setting}): fit fewer covariates or interactions")}


def test_the_public_bound_is_tighter_than_a_researchers(database_url, tmp_path):
    """Both sides of the caller: the six-way interaction is refused to the public before any
    work, and started for the survey's researcher (who meets the 1 MiB memory budget)."""
    with analysis_app(database_url, tmp_path, ANALYSIS_MEMORY_MIB=1) as (app, auth):
        client = app.test_client()
        survey_id = yes_no_survey(client, auth)
        assert regress(client, survey_id, SIX_WAY).json["error"] == "analysis_too_large"
        keyed = regress(client, survey_id, SIX_WAY, auth)
        assert keyed.status_code == 422 and keyed.json["error"] == "analysis_stopped"
        assert "limit of 1 MiB (ANALYSIS_MEMORY_MIB)" in keyed.json["detail"]


@pytest.mark.parametrize("setting, value, what", [
    ("ANALYSIS_LATENT_ROWS_ANONYMOUS", 127, "128 latent rows"),
    ("ANALYSIS_PARAMETERS_ANONYMOUS", 10, "11 parameters"),
])
def test_each_bound_is_a_setting(database_url, tmp_path, setting, value, what):
    """a ~ b + c + d: 4 coefficients and the 7 logits of P(t) over the 8 combinations of b, c
    and d; at most 16 units (the patterns of a, b, c, d among 16 responses) times those 8
    combinations. One below either is refused."""
    with analysis_app(database_url, tmp_path, **{setting: value}) as (app, auth):
        client = app.test_client()
        survey_id = yes_no_survey(client, auth, n=16)
        response = regress(client, survey_id, "a ~ b + c + d")
        assert response.json["error"] == "analysis_too_large"
        assert f"has {what}" in response.json["detail"]
        assert f"above the limit of {value} ({setting})" in response.json["detail"]


def test_a_weighted_regression_is_bounded_too(database_url, tmp_path):
    with analysis_app(database_url, tmp_path, ANALYSIS_PARAMETERS=1) as (app, auth):
        client = app.test_client()
        survey_id = client.post("/api/surveys", json=OPEN_AND_HIDDEN,
                                headers=auth).json["survey_id"]
        response = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth, query_string={
            "weights": json.dumps({"sex": {"Female": 0.5, "Male": 0.5}}),
            "regress": "smoked ~ sex"})
        assert response.status_code == 422
        assert response.json["detail"].startswith("regress: this model has 2 parameters, "
                                                  "above the limit of 1 (ANALYSIS_PARAMETERS)")


def test_the_iteration_cap_reaches_the_solver(database_url, tmp_path):
    with analysis_app(database_url, tmp_path, ANALYSIS_ITERATIONS_ANONYMOUS=1) as (app, auth):
        client = app.test_client()
        survey_id = yes_no_survey(client, auth, n=400)
        response = regress(client, survey_id, "a ~ b")
        assert response.json["error"] == "regression_failed"
        assert "after 1 iterations" in response.json["detail"]
        assert regress(client, survey_id, "a ~ b", auth).status_code == 200


def test_the_budget_stops_an_overrunning_analysis(database_url, tmp_path):
    """The eight-way interaction, allowed here, needs far more than one second of CPU (one
    Hessian alone is 34 billion products): it is stopped at one, the request answered with a
    422 naming the limit, no process left, and the service answers as before."""
    with analysis_app(database_url, tmp_path, ANALYSIS_PARAMETERS=1024,
                      ANALYSIS_LATENT_ROWS=2**20, ANALYSIS_SECONDS=1) as (app, auth):
        client = app.test_client()
        survey_id = yes_no_survey(client, auth)
        response = regress(client, survey_id, EIGHT_WAY, auth)
        assert response.status_code == 422
        assert response.json == {"error": "analysis_stopped", "detail": (
            "the analysis was stopped at its limit of 1 s (ANALYSIS_SECONDS): fit fewer "
            "covariates or interactions")}
        assert not app.extensions["ldp_analyses"].processes
        assert client.get("/healthz").status_code == 200


def test_intake_and_healthz_answer_while_the_heaviest_analyses_run(database_url, tmp_path):
    """Four of the heaviest analyses a researcher may start run at once (ANALYSES_AT_ONCE = 4)
    behind a threaded server; meanwhile /healthz and a submission answer, and a fifth analysis
    is refused at once with a 503. Waits on conditions only."""
    from werkzeug.serving import make_server

    from processes import request

    with analysis_app(database_url, tmp_path, ANALYSES_AT_ONCE=4, ANALYSIS_SECONDS=3600,
                      RATE_LIMITS_ENABLED=False) as (app, auth):
        survey_id = yes_no_survey(app.test_client(), auth)
        server = make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01},
                         daemon=True).start()
        base = f"http://127.0.0.1:{server.server_port}/api/surveys/{survey_id}"
        runner = app.extensions["ldp_analyses"]
        answers = []
        heavy = [threading.Thread(target=lambda: answers.append(request(
            "GET", f"{base}/estimates?regress={SIX_WAY}", headers=auth, timeout=3600)))
            for _ in range(4)]
        try:
            for thread in heavy:
                thread.start()
            while len(runner.processes) < 4:
                assert not answers, answers  # none may end before all four have started
                time.sleep(0.05)
            healthz = request("GET", f"http://127.0.0.1:{server.server_port}/healthz")
            submitted = request("POST", f"{base}/responses",
                                {"answers": {q: 1 for q in YES_NO}})
            fifth = request("GET", f"{base}/estimates?regress={SIX_WAY}", headers=auth)
            assert len(runner.processes) == 4  # all four still running meanwhile
        finally:
            for process in list(runner.processes):
                process.kill()
            for thread in heavy:
                thread.join()
            server.shutdown()
        assert healthz[0] == 200 and submitted[0] == 201
        assert fifth[0] == 503 and fifth[1]["error"] == "analyses_busy"
        assert [status for status, _ in answers] == [422] * 4


@pytest.mark.parametrize("formula", ["a ~ b", "a ~ b * c", "a ~ b:c + d", "a ~ s * b",
                                     "a ~ s + x", "a ~ 1"])
def test_the_size_is_what_the_fit_builds(formula):
    """Size, counted from the questions alone, is the fit's own count of parameters (p
    coefficients and cells x (T - 1) logits) and at least its units x T latent rows, on data
    holding every pattern (s: a plain choice of 3, x: a plain number)."""
    import numpy as np
    import pandas as pd

    from ldpsurvey.analysis.regression import _Model, parse_formula, size
    from ldpsurvey.shared import Mechanism

    levels = {"a": ["No", "Yes"], "b": ["No", "Yes"], "c": ["p", "q", "r"], "d": ["No", "Yes"],
              "s": ["u", "v", "w"], "x": None}
    mechanisms = {name: Mechanism.from_epsilon(1.0, k=len(levels[name])) for name in "abcd"}
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({name: pd.Categorical(rng.choice(values, 500), categories=values)
                          if values else rng.normal(size=500) for name, values in levels.items()})
    _, names = parse_formula(formula)
    model = _Model.build(formula, frame, "a", names, mechanisms, None, None)
    counted = size(formula, levels, list(mechanisms), len(frame))
    assert counted.parameters == model.p + model.cells * (model.T - 1)
    assert counted.latent_rows >= len(model.y) * model.T


@pytest.mark.parametrize("formula, least", [
    ("q0 ~ " + "*".join(f"q{i}" for i in range(1, 31)), 2**30 - 1),
    ("q0 ~ q1 + " + "*".join(f"q{i}" for i in range(2, 14)), 2**12 - 1),
    ("q0 ~ q1*q2*q3*q4*q5*q6*q7*q8*q9*q10*q1:q2", 2**10 - 1),  # the overlapping piece not counted
])
def test_a_formula_too_wide_to_expand_is_counted_from_its_text(monkeypatch, formula, least):
    """The attack: `q0 ~ q1*...*q20` (anonymous, on a public-results survey) held the request
    thread 75 s in formulaic's expansion of 2^20 terms before the 422 (24 names: minutes and
    gigabytes). Past TERMS_EXPANDED terms the count is a lower bound read from the text, and
    formulaic is never asked."""
    from ldpsurvey.analysis import regression

    def refused(*_args, **_kwargs):
        raise AssertionError("formulaic asked to expand the formula")

    levels = {f"q{i}": ["No", "Yes"] for i in range(31)}
    if least > regression.TERMS_EXPANDED:
        monkeypatch.setattr(regression, "Formula", refused)
    counted = regression.size(formula, levels, list(levels), 3000)
    assert counted.parameters >= least


def test_the_public_cannot_hold_every_analysis_slot():
    """The attack: two anonymous six-way fits on a public-results survey (each running to its
    10 s budget) held both slots, and the survey's researcher got 503 analyses_busy. The public
    holds at most ANALYSES_AT_ONCE - 1; a researcher takes the last; then everyone waits."""
    from ldpsurvey.aggregator.config.settings import DEFAULTS
    from ldpsurvey.aggregator.exceptions import AnalysisBusy
    from ldpsurvey.aggregator.services.budgets import Runner, budget_from

    runner = Runner(budget_from(DEFAULTS, public=False), budget_from(DEFAULTS, public=True), 2)
    with runner.slot(runner.public):
        with pytest.raises(AnalysisBusy), runner.slot(runner.public):
            pass
        with runner.slot(runner.researcher):
            for caller in (runner.public, runner.researcher):
                with pytest.raises(AnalysisBusy), runner.slot(caller):
                    pass
    with (runner.slot(runner.researcher), runner.slot(runner.researcher),
          pytest.raises(AnalysisBusy), runner.slot(runner.public)):
        pass
