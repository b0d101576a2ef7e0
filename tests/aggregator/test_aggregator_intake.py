import json

import pytest

from helpers import release_due

GOOD = {"answers": {"smoked": 1, "drove": 0, "sleep": 2}}


def post(client, survey_id, body, **kwargs):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    kwargs.setdefault("content_type", "application/json")
    return client.post(f"/api/surveys/{survey_id}/responses", data=data, **kwargs)


def stored_rows(app, survey_id):
    """The released rows and counters, after the next scheduled release."""
    from ldpsurvey.aggregator.web.request_connection import get_db

    release_due(app)
    with app.app_context():
        db = get_db()
        responses = db.query("SELECT answers, released_day FROM responses WHERE survey_id = ?",
                             (survey_id,))
        counts = db.query("SELECT question_id, option_index, count FROM counts "
                          "WHERE survey_id = ? ORDER BY question_id, option_index", (survey_id,))
    return responses, {(q, j): c for q, j, c in counts}


def test_a_process_reads_a_surveys_manifest_once_and_again_only_for_an_error(client, survey_id,
                                                                             monkeypatch):
    """Intake keeps a published survey's parsed manifest (store.published_survey): after the
    first submission, valid ones read no survey row before their transaction; an invalid one
    reads it again, so that a survey deleted meanwhile answers 404, not 422
    (test_lifecycle.py::test_a_deleted_survey_is_unknown_to_a_process_that_kept_its_manifest)."""
    from ldpsurvey.aggregator.store import surveys as survey_store

    read = []
    get_survey = survey_store.get_survey
    monkeypatch.setattr(survey_store, "get_survey", lambda db, sid: read.append(sid) or get_survey(db, sid))
    assert post(client, survey_id, GOOD).status_code == 201
    assert read == [survey_id]
    for _ in range(3):
        assert post(client, survey_id, GOOD).status_code == 201
    assert read == [survey_id]
    assert post(client, survey_id, {"answers": {"smoked": 7}}).status_code == 422
    assert read == [survey_id, survey_id]


def test_a_process_keeps_at_most_surveys_kept_manifests(app, client, auth, monkeypatch):
    """The kept manifests are bounded: once SURVEYS_KEPT are kept, they are all forgotten, and
    a survey submitted to before is read again."""
    from ldpsurvey.aggregator.store import surveys as survey_store

    from helpers import SURVEY

    monkeypatch.setattr(survey_store, "SURVEYS_KEPT", 2)
    kept = app.extensions["ldp_database"].published
    read = []
    get_survey = survey_store.get_survey
    monkeypatch.setattr(survey_store, "get_survey", lambda db, sid: read.append(sid) or get_survey(db, sid))
    surveys = [client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
               for _ in range(3)]
    for survey_id in surveys:
        assert post(client, survey_id, GOOD).status_code == 201
        assert len(kept) <= 2
    assert set(kept) == {surveys[2]}
    assert post(client, surveys[0], GOOD).status_code == 201
    assert read == [*surveys, surveys[0]]


def test_a_response_is_stored_with_its_counters(app, client, survey_id):
    response = post(client, survey_id, GOOD)
    assert response.status_code == 201
    assert response.json == {"survey_id": survey_id, "accepted": 1}
    rows, counts = stored_rows(app, survey_id)
    assert [json.loads(a) for a, _ in rows] == [GOOD["answers"]]
    assert len(rows[0][1]) == 10  # YYYY-MM-DD: the day, nothing finer
    assert counts[("smoked", 1)] == 1 and counts[("smoked", 0)] == 0
    assert counts[("sleep", 2)] == 1 and sum(counts.values()) == 3


def test_error_detail_names_the_question(client, survey_id):
    response = post(client, survey_id, {"answers": {"smoked": 1, "drove": 7, "sleep": 2}})
    assert "drove" in response.json["detail"]


def test_wrong_content_type(app, client, survey_id):
    response = post(client, survey_id, GOOD, content_type="text/plain")
    assert response.status_code == 415 and response.json["error"] == "unsupported_media_type"
    response = client.post(f"/api/surveys/{survey_id}/responses", data=GOOD)  # a form post
    assert response.status_code == 415
    assert stored_rows(app, survey_id)[0] == []


def test_over_the_size_limit(app, client, survey_id):
    body = '{"answers": {"smoked": 1, "drove": 0, "sleep": 2}' + " " * 70_000 + "}"
    response = post(client, survey_id, body)
    assert response.status_code == 413 and response.json["error"] == "body_too_large"
    assert stored_rows(app, survey_id)[0] == []


def test_unknown_survey(client):
    response = post(client, "nope", GOOD)
    assert response.status_code == 404 and response.json["error"] == "unknown_survey"


def test_the_reply_is_what_jsonify_writes(app, client, survey_id):
    """http.accepted_reply builds the 201 without jsonify, byte for byte as jsonify would."""
    from flask import jsonify

    response = post(client, survey_id, GOOD)
    with app.app_context():
        expected = jsonify(survey_id=survey_id, accepted=1)
    assert response.status_code == 201 and response.data == expected.data
    assert response.mimetype == expected.mimetype == "application/json"


def test_idempotent_retry_is_counted_once(app, client, survey_id):
    headers = {"Idempotency-Key": "k-4f1d2c3b5a6e7f80"}
    first = post(client, survey_id, GOOD, headers=headers)
    again = post(client, survey_id, GOOD, headers=headers)
    assert first.status_code == again.status_code == 201
    assert first.json == again.json and again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers  # the first is no replay
    # key order and spacing do not make a different body
    reordered = '{"answers": {"sleep": 2, "drove": 0,   "smoked": 1}}'
    assert post(client, survey_id, reordered, headers=headers).status_code == 201
    rows, counts = stored_rows(app, survey_id)
    assert len(rows) == 1 and counts[("smoked", 1)] == 1


def test_same_key_with_another_body_is_a_conflict(app, client, survey_id):
    headers = {"Idempotency-Key": "k-4f1d2c3b5a6e7f80"}
    assert post(client, survey_id, GOOD, headers=headers).status_code == 201
    other = {"answers": {"smoked": 0, "drove": 0, "sleep": 2}}
    response = post(client, survey_id, other, headers=headers)
    assert response.status_code == 409 and response.json["error"] == "idempotency_conflict"
    assert len(stored_rows(app, survey_id)[0]) == 1


@pytest.mark.parametrize("key", ["short", "has space in it", "x" * 129, "ünïcode-key-123"])
def test_malformed_idempotency_keys(app, client, survey_id, key):
    response = post(client, survey_id, GOOD, headers={"Idempotency-Key": key})
    assert response.status_code == 400 and response.json["error"] == "invalid_idempotency_key"
    assert stored_rows(app, survey_id)[0] == []


def test_idempotency_keys_are_stored_hashed_and_dropped_on_close(app, client, auth, survey_id):
    from ldpsurvey.aggregator.web.request_connection import get_db

    key = "k-4f1d2c3b5a6e7f80"
    post(client, survey_id, GOOD, headers={"Idempotency-Key": key})
    with app.app_context():  # kept with the pending group until its release
        db = get_db()
        rows = db.query("SELECT key_hash FROM pending")
        assert rows == [(db.keys.idempotency_id(key),)] and key not in rows[0][0]
    client.post(f"/api/surveys/{survey_id}/close", headers=auth)
    with app.app_context():
        assert get_db().query("SELECT key_hash FROM idempotency_keys") == []
        assert get_db().query("SELECT key_hash FROM pending") == []


def batch(client, survey_id, responses, headers):
    return client.post(f"/api/surveys/{survey_id}/responses/batch",
                       json={"responses": responses}, headers=headers)


def test_batch_stores_all(app, client, auth, survey_id):
    responses = [GOOD, {"answers": {"smoked": 0, "drove": 1, "sleep": 0}}] * 50
    response = batch(client, survey_id, responses, auth)
    assert response.status_code == 201 and response.json["accepted"] == 100
    rows, counts = stored_rows(app, survey_id)
    assert len(rows) == 100
    assert counts[("smoked", 1)] == 50 and counts[("drove", 1)] == 50
    assert counts[("sleep", 0)] == 50 and counts[("sleep", 2)] == 50


def test_batch_is_all_or_nothing(app, client, auth, survey_id):
    responses = [GOOD] * 10 + [{"answers": {"smoked": 5, "drove": 0, "sleep": 0}}]
    response = batch(client, survey_id, responses, auth)
    assert response.status_code == 422 and "responses[10]" in response.json["detail"]
    rows, counts = stored_rows(app, survey_id)
    assert rows == [] and sum(counts.values()) == 0


def test_batch_limit_and_auth(app, client, auth, survey_id):
    app.config["MAX_BATCH_RESPONSES"] = 5
    response = batch(client, survey_id, [GOOD] * 6, auth)
    assert response.status_code == 422 and response.json["error"] == "batch_too_large"
    assert batch(client, survey_id, [GOOD], {}).status_code == 401
    assert batch(client, survey_id, [], auth).status_code == 422
    assert stored_rows(app, survey_id)[0] == []


def test_batch_accepts_a_relay_key_and_idempotency(app, client, survey_id):
    from ldpsurvey.aggregator import create_api_key

    relay = {"Authorization": f"Bearer {create_api_key(app, 'relay', surveys=(survey_id,)).key}",
             "Idempotency-Key": "batch-0001-abcdef"}
    first = batch(client, survey_id, [GOOD] * 3, relay)
    assert first.json["accepted"] == 3 and "Idempotent-Replayed" not in first.headers
    assert batch(client, survey_id, [GOOD] * 3, relay).headers["Idempotent-Replayed"] == "true"
    assert len(stored_rows(app, survey_id)[0]) == 3


def test_concurrent_submissions_are_all_counted(app, live_server, survey_id):
    """8 threads over real HTTP, half of them retrying with the same key: exact counts."""
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    def send(i):
        request = urllib.request.Request(
            f"{live_server}/api/surveys/{survey_id}/responses", data=json.dumps(GOOD).encode(),
            headers={"Content-Type": "application/json", "Idempotency-Key": f"key-{i // 2:08d}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(send, range(200))) == {201}
    rows, counts = stored_rows(app, survey_id)
    assert len(rows) == 100 and counts[("smoked", 1)] == 100


def test_the_benchs_bare_intake_does_the_same_work(app, client, survey_id):
    """bench/bare_intake.py, the raw bound the benches compare intake with, stores through the
    same service: the response is counted, and its key's retry is a replay counted once."""
    import sys
    from pathlib import Path

    from werkzeug.test import Client

    sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
    try:
        from bare_intake import bare
    finally:
        sys.path.pop(0)
    bare_client = Client(bare(app))
    headers = {"Idempotency-Key": "k-bare-0123456789abcdef"}
    first, again = (bare_client.post(f"/api/surveys/{survey_id}/responses", json=GOOD,
                                     headers=headers) for _ in range(2))
    assert first.status_code == again.status_code == 201
    assert first.data == again.data == post(client, survey_id, GOOD).data
    rows, counts = stored_rows(app, survey_id)
    assert len(rows) == 2 and counts[("smoked", 1)] == 2  # one through bare, one through Flask
