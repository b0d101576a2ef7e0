"""The estimates endpoint's regress option and `ldp-survey results --regress`: the fit of
ldpsurvey.analysis on the released responses, equal to the Python API on the exported CSV and
codebook; its refusals and the OpenAPI description."""

import json
import sys
from dataclasses import fields

import numpy as np
import pytest
from click.testing import CliRunner

from ldpsurvey.analysis import Regression, read_export, rr_logistic
from ldpsurvey.analysis.regression import Coefficient, GroupPrevalence
from ldpsurvey.cli import main
from ldpsurvey.shared import parse_manifest

from helpers import SURVEY, doc_text, release_due

FORMULA = "smoked ~ sleep + drove"


def randomized_responses(survey, n: int, seed: int) -> list[dict]:
    """n respondents whose true smoking follows a logistic model in their true sleep and
    drove, each answer randomized by its question's mechanism (numpy: simulation only)."""
    rng = np.random.default_rng(seed)
    sleep = rng.choice(3, n, p=[0.3, 0.5, 0.2])
    drove = (rng.random(n) < 0.4).astype(int)
    eta = -0.5 + 0.9 * (sleep == 1) - 0.6 * (sleep == 2) + 1.0 * drove
    smoked = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    reported = {}
    for qid, true in (("smoked", smoked), ("drove", drove), ("sleep", sleep)):
        m = survey.question(qid).reported_mechanism
        forced = rng.choice(m.k, n, p=m.beta)
        reported[qid] = np.where(rng.random(n) < m.alpha, true, forced)
    return [{q: int(reported[q][i]) for q in reported} for i in range(n)]


@pytest.fixture
def answered(client, auth):
    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    survey = parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    responses = randomized_responses(survey, 3000, 28)
    client.post(f"/api/surveys/{survey_id}/responses/batch",
                json={"responses": [{"answers": a} for a in responses]}, headers=auth)
    release_due(client.application)
    return survey_id


def test_the_endpoint_fits_what_the_python_api_fits_on_the_export(client, auth, answered, tmp_path):
    body = client.get(f"/api/surveys/{answered}/estimates", headers=auth,
                      query_string={"regress": FORMULA, "confidence": 0.9}).json
    fit = body["regression"]
    assert fit["n"] == 3000 and fit["randomized_covariates"] == ["sleep", "drove"]
    assert fit["confidence"] == 0.9 and fit["variance"] == "observed information"
    (tmp_path / "s.csv").write_bytes(client.get(f"/api/surveys/{answered}/export.csv",
                                                headers=auth).data)
    (tmp_path / "s.json").write_bytes(client.get(f"/api/surveys/{answered}/codebook.json",
                                                 headers=auth).data)
    frame, mechanisms = read_export(tmp_path / "s.csv", tmp_path / "s.json")
    local = rr_logistic(FORMULA, frame, mechanisms, confidence=0.9)
    assert [c["name"] for c in fit["coefficients"]] == [c.name for c in local.coefficients]
    np.testing.assert_allclose([c["estimate"] for c in fit["coefficients"]],
                               [c.estimate for c in local.coefficients], atol=1e-8)
    np.testing.assert_allclose(fit["covariance"], local.covariance, atol=1e-8)
    assert fit["log_likelihood"] == pytest.approx(local.log_likelihood, abs=1e-6)
    truth = {"Intercept": -0.5, "sleep[T.6-8]": 0.9, "sleep[T.>8]": -0.6, "drove[T.Yes]": 1.0}
    for c in fit["coefficients"]:  # simulated at these: within 4 SEs
        assert abs(c["estimate"] - truth[c["name"]]) < 4 * c["standard_error"]


def test_a_codes_export_reads_alike(client, auth, answered, tmp_path):
    (tmp_path / "c.csv").write_bytes(client.get(f"/api/surveys/{answered}/export.csv?codes=true",
                                                headers=auth).data)
    (tmp_path / "s.json").write_bytes(client.get(f"/api/surveys/{answered}/codebook.json",
                                                 headers=auth).data)
    frame, mechanisms = read_export(tmp_path / "c.csv", tmp_path / "s.json", codes=True)
    assert list(frame["sleep"].cat.categories) == ["<6", "6-8", ">8"]
    assert mechanisms["drove"].alpha == 0.75


def test_no_regression_before_the_first_release_and_none_unasked(client, auth, survey_id):
    assert client.get(f"/api/surveys/{survey_id}/estimates", query_string={"regress": FORMULA},
                      headers=auth).json["regression"] is None
    assert "regression" not in client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json


@pytest.mark.parametrize("formula, status, error, detail", [
    ("smoked ~ nope", 400, "invalid_parameter", "'nope' is no question of this survey"),
    ("sleep ~ smoked", 400, "invalid_parameter", "must be a randomized yes/no question"),
    ("smoked ~ I(__import__('os'))", 400, "invalid_parameter", "formula"),
    ("", 400, "invalid_parameter", "regress must be a formula"),
    ("smoked ~ " + " + ".join(["drove"] * 400), 400, "invalid_parameter", "1 to 1000 characters"),
])
def test_bad_formulas_are_named(client, auth, answered, formula, status, error, detail):
    response = client.get(f"/api/surveys/{answered}/estimates", query_string={"regress": formula},
                          headers=auth)
    assert response.status_code == status and response.json["error"] == error
    assert detail in response.json["detail"]


def test_a_fit_without_a_maximum_is_a_422(client, auth):
    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    client.post(f"/api/surveys/{survey_id}/responses/batch", headers=auth, json={"responses": [
        {"answers": {"smoked": 0, "drove": j % 2, "sleep": j % 3}} for j in range(200)]})
    release_due(client.application)
    response = client.get(f"/api/surveys/{survey_id}/estimates",
                          query_string={"regress": "smoked ~ drove"}, headers=auth)
    assert response.status_code == 422 and response.json["error"] == "regression_failed"
    assert "infinity" in response.json["detail"]


def test_a_server_without_the_analysis_extra_answers_501(client, auth, answered, monkeypatch):
    monkeypatch.setitem(sys.modules, "ldpsurvey.analysis", None)
    response = client.get(f"/api/surveys/{answered}/estimates", query_string={"regress": FORMULA},
                          headers=auth)
    assert response.status_code == 501 and response.json["error"] == "analysis_unavailable"
    assert "pip install 'ldp-survey[analysis]'" in response.json["detail"]
    assert client.get(f"/api/surveys/{answered}/estimates", headers=auth).status_code == 200


def test_the_openapi_schema_has_the_regression_s_fields(client):
    schema = client.get("/api/openapi.json").json["components"]["schemas"]["Estimates"]
    regression = schema["properties"]["regression"]
    assert set(regression["properties"]) == {f.name for f in fields(Regression)}
    assert set(regression["properties"]["coefficients"]["items"]["properties"]) == {
        f.name for f in fields(Coefficient)}
    assert set(regression["properties"]["predicted"]["items"]["properties"]) == {
        f.name for f in fields(GroupPrevalence)}


def test_results_regress_prints_the_fit(live_server, answered, researcher_key, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    args = ["results", "--url", live_server, "--survey", answered, "--regress", FORMULA]
    as_json = CliRunner().invoke(main, [*args, "--json"])
    assert as_json.exit_code == 0, as_json.output
    fit = json.loads(as_json.stdout)
    assert fit["formula"] == FORMULA and len(fit["coefficients"]) == 4
    shown = CliRunner().invoke(main, args)
    assert shown.exit_code == 0, shown.output
    assert "drove[T.Yes]" in shown.stdout and "Predicted prevalence" in shown.stdout
    assert f"{fit['coefficients'][3]['estimate']:.4f}" in shown.stdout
    bad = CliRunner().invoke(main, [*args[:-1], "smoked ~ nope"])
    assert bad.exit_code != 0 and "'nope' is no question" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_the_documented_export_snippet_runs(client, auth, answered, tmp_path, monkeypatch):
    """The analysis page's Python regression on an export, run as written on the API's files."""
    import re

    snippet = re.search(r"The same on an export:\n\n```python\n(.*?)```", doc_text("analysis"),
                        re.S).group(1)
    (tmp_path / "SURVEY.csv").write_bytes(client.get(f"/api/surveys/{answered}/export.csv",
                                                     headers=auth).data)
    (tmp_path / "SURVEY-codebook.json").write_bytes(
        client.get(f"/api/surveys/{answered}/codebook.json", headers=auth).data)
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(snippet, scope)  # the page's own code
    assert scope["fit"].n == 3000 and len(scope["fit"].coefficients) == 4
