"""GET /api/surveys/<id>/crosstab: declared pairs from their counters, other pairs from the
stored responses, both equal to the shared cross-tab on the exact joint counts."""

import copy

import pytest

from ldpsurvey.shared import crosstab, parse_manifest

from helpers import SURVEY, release_due

RESPONSES = ([{"smoked": 1, "drove": 0, "sleep": 0}] * 30 + [{"smoked": 1, "drove": 1, "sleep": 1}]
             * 10 + [{"smoked": 0, "drove": 1, "sleep": 1}] * 35
             + [{"smoked": 0, "drove": 0, "sleep": 2}] * 25)
DECLARED = {**copy.deepcopy(SURVEY), "crosstabs": [["smoked", "sleep"]]}


def publish(client, auth, definition) -> str:
    response = client.post("/api/surveys", json=definition, headers=auth)
    assert response.status_code == 201, response.json
    return response.json["survey_id"]


def submit(client, survey_id, auth, responses):
    """Submit and run the next scheduled release."""
    response = client.post(f"/api/surveys/{survey_id}/responses/batch",
                           json={"responses": [{"answers": a} for a in responses]}, headers=auth)
    assert response.status_code == 201, response.json
    release_due(client.application)


def joint(rows, cols, survey, responses=RESPONSES):
    k_rows, k_cols = (len(survey.question(q).options) for q in (rows, cols))
    return [[sum(1 for r in responses if (r[rows], r[cols]) == (a, b)) for b in range(k_cols)]
            for a in range(k_rows)]


def get(client, survey_id, auth, query):
    return client.get(f"/api/surveys/{survey_id}/crosstab?{query}", headers=auth)


@pytest.mark.parametrize("rows, cols", [("smoked", "sleep"),    # declared: its counters
                                        ("sleep", "smoked"),    # declared the other way round
                                        ("drove", "sleep")])    # not declared: the responses
def test_crosstab_equals_the_shared_crosstab_on_the_joint_counts(client, auth, rows, cols):
    survey_id = publish(client, auth, DECLARED)
    submit(client, survey_id, auth, RESPONSES)
    survey = parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    body = get(client, survey_id, auth, f"rows={rows}&cols={cols}&confidence=0.9").json
    expected = crosstab(survey.question(rows).reported_mechanism,
                        survey.question(cols).reported_mechanism, joint(rows, cols, survey),
                        confidence=0.9).as_dict()
    assert set(body) == {"survey_id", "rows", "cols", "n", "confidence", "joint", "covariance",
                         "cells", "conditional"}
    assert (body["survey_id"], body["rows"], body["cols"], body["n"]) == (survey_id, rows, cols,
                                                                          100)
    assert {key: body[key] for key in expected} == {
        key: [list(row) for row in value] if key in ("joint", "covariance")
        else [dict(entry) for entry in value] if key in ("cells", "conditional") else value
        for key, value in expected.items()}
    assert len(body["cells"]) == len(body["conditional"]) == len(body["joint"]) * len(
        body["joint"][0])
    assert set(body["cells"][0]) == {"row", "col", "p_hat", "p_constrained", "standard_error",
                                     "ci_low", "ci_high"}


def test_declared_counters_move_at_release_and_match_the_responses(client, auth):
    """A declared pair's counters count released responses only, and give what a tally of the
    stored responses gives."""
    survey_id = publish(client, auth, {**DECLARED, "release_batch": 50})
    plain_id = publish(client, auth, {**SURVEY, "release_batch": 50})
    for sid in (survey_id, plain_id):
        submit(client, sid, auth, RESPONSES[:40])
    pending = get(client, survey_id, auth, "rows=smoked&cols=sleep").json
    assert pending["n"] == 0 and pending["joint"] is None and pending["cells"] == []
    for sid in (survey_id, plain_id):
        submit(client, sid, auth, RESPONSES[40:])  # 100 >= 50: all released
    declared = get(client, survey_id, auth, "rows=smoked&cols=sleep").json
    tallied = get(client, plain_id, auth, "rows=smoked&cols=sleep").json
    assert declared["n"] == 100
    assert {**declared, "survey_id": None} == {**tallied, "survey_id": None}
    from ldpsurvey.aggregator.store.counts import joint_counts
    from ldpsurvey.aggregator.web.request_connection import get_db

    with client.application.app_context():
        counters = joint_counts(get_db(), survey_id, "smoked", "sleep")
    assert counters == joint("smoked", "sleep", parse_manifest(
        client.get(f"/api/surveys/{survey_id}").data))


def test_an_undeclared_pair_is_read_as_a_stream(client, auth, monkeypatch):
    """The responses are read one at a time from the store's stream, inside a snapshot."""
    from ldpsurvey.aggregator.store import responses as response_store

    survey_id = publish(client, auth, SURVEY)
    submit(client, survey_id, auth, RESPONSES)
    read = []
    stream = response_store.stored_answers

    def counting(db, sid, through):
        for row in stream(db, sid, through):
            read.append(1)
            yield row

    monkeypatch.setattr(response_store, "stored_answers", counting)
    assert get(client, survey_id, auth, "rows=smoked&cols=drove").json["n"] == 100
    assert len(read) == 100


@pytest.mark.parametrize("query, detail", [
    ("cols=sleep", "rows must be a question id"),
    ("rows=smoked&cols=nope", "cols must be a question id"),
    ("rows=smoked&cols=smoked", "two different questions"),
    ("rows=smoked&cols=sleep&confidence=2", "confidence must be a number"),
])
def test_bad_crosstab_parameters(client, auth, survey_id, query, detail):
    response = get(client, survey_id, auth, query)
    assert response.status_code == 400 and response.json["error"] == "invalid_parameter"
    assert detail in response.json["detail"]


def test_crosstab_access_is_that_of_the_estimates(client, auth, survey_id):
    assert get(client, survey_id, {}, "rows=smoked&cols=sleep").status_code == 401
    assert get(client, "nope", auth, "rows=smoked&cols=sleep").status_code == 404
    public = publish(client, auth, {**SURVEY, "public_results": True})
    assert get(client, public, {}, "rows=smoked&cols=sleep").status_code == 200


@pytest.mark.parametrize("crosstabs, message", [
    ([["smoked", "nope"]], "survey.crosstabs[0]: must be two different question ids"),
    ([["smoked", "smoked"]], "survey.crosstabs[0]: must be two different question ids"),
    ([["smoked", "sleep"], ["sleep", "smoked"]], "survey.crosstabs[1]: the pair"),
    ("smoked,sleep", "survey.crosstabs: must be a list"),
])
def test_bad_declared_crosstabs_are_refused(client, auth, crosstabs, message):
    response = client.post("/api/surveys", json={**SURVEY, "crosstabs": crosstabs}, headers=auth)
    assert response.status_code == 422 and message in response.json["detail"]


def test_declared_crosstabs_are_signed_in_the_manifest(client, auth):
    survey_id = publish(client, auth, DECLARED)
    manifest = client.get(f"/api/surveys/{survey_id}").json
    assert manifest["format"] == "ldp-survey-manifest/8"  # /8: every survey published since
    assert manifest["crosstabs"] == [["smoked", "sleep"]]
    assert parse_manifest(client.get(f"/api/surveys/{survey_id}").data).crosstabs == (
        ("smoked", "sleep"),)
    document = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    assert document["crosstabs"] == [["smoked", "sleep"]]
