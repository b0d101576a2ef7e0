"""Submissions are served ahead of Flask (submissions.py): what Flask gave the endpoint, it
still gets there. Every other intake test (test_aggregator_intake.py, test_limits.py, the
fuzzing) goes through this path as well, since the test client calls the whole WSGI stack."""

import json
import logging

import pytest
from werkzeug.test import Client

from ldpsurvey.aggregator import close_app, create_app

GOOD = {"answers": {"smoked": 1, "drove": 0, "sleep": 2}}
SECRET = "a body nobody may log"


def responses(survey_id: str) -> str:
    return f"/api/surveys/{survey_id}/responses"


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_another_method_is_405_with_allow_as_flask_answers(client, survey_id, method):
    response = client.open(responses(survey_id), method=method)
    assert response.status_code == 405 and response.headers["Allow"] == "OPTIONS, POST"
    assert response.json["error"] == "method_not_allowed"
    assert response.headers["Content-Security-Policy"].startswith("default-src 'self'")


def test_head_gets_no_body_and_options_its_allow(app, survey_id):
    client = Client(app)  # not the suite's, which checks a HEAD against its path's GET
    head = client.head(responses(survey_id))
    assert head.status_code == 405 and head.data == b""
    options = client.options(responses(survey_id))
    assert options.status_code == 200 and options.headers["Allow"] == "OPTIONS, POST"


def test_only_the_exact_path_is_served_here(client, survey_id):
    """A trailing slash or a path below is Flask's: an unknown route (its JSON 404)."""
    for path in (responses(survey_id) + "/", responses(survey_id) + "/x"):
        response = client.post(path, json=GOOD)
        assert response.status_code == 404 and response.json["error"] == "not_found"


def test_a_survey_id_outside_ascii_is_an_unknown_survey(client):
    response = client.post("/api/surveys/%C3%A9t%C3%A9/responses", json=GOOD)
    assert response.status_code == 404 and response.json["error"] == "unknown_survey"


@pytest.mark.parametrize("served_by", [None, "replica-2"])
def test_every_answer_carries_the_security_headers_and_served_by_when_set(
        database_url, tmp_path, served_by):
    app = create_app({"DATABASE_URL": database_url, "SERVED_BY": served_by},
                     instance_path=tmp_path / "instance")
    try:
        from ldpsurvey.aggregator import create_api_key

        from helpers import SURVEY

        client = app.test_client()
        auth = {"Authorization": f"Bearer {create_api_key(app).key}"}
        survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
        for response in (client.post(responses(survey_id), json=GOOD),
                         client.post(responses(survey_id), json={"answers": {}}),
                         client.get(responses(survey_id))):
            assert response.headers["X-Frame-Options"] == "DENY"
            assert response.headers["Cache-Control"] == "no-store"
            assert response.headers.get("Served-By") == served_by
    finally:
        close_app(app)


def test_a_chunked_body_the_server_ended_is_read(client, survey_id):
    """No Content-Length, but wsgi.input_terminated (a chunked body gunicorn has read)."""
    response = client.post(responses(survey_id), data=json.dumps(GOOD),
                           content_type="application/json",
                           environ_overrides={"wsgi.input_terminated": True},
                           headers={"Transfer-Encoding": "chunked"})
    assert response.status_code == 201, response.json
    too_large = json.dumps({"answers": GOOD["answers"], "pad": " " * 70_000})
    response = client.post(responses(survey_id), data=too_large, content_type="application/json",
                           environ_overrides={"wsgi.input_terminated": True},
                           headers={"Transfer-Encoding": "chunked"})
    assert response.status_code == 413 and response.json["error"] == "body_too_large"


def test_an_unexpected_failure_is_500_json_logged_by_type_without_the_body(
        app, survey_id, monkeypatch, caplog):
    """(Through a plain client: the suite's checks every answer against the API's
    description, which promises no 500.)"""
    from ldpsurvey.aggregator.services import intake

    client = Client(app)
    def fail(*_args):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(intake, "accept_one", fail)
    with caplog.at_level(logging.ERROR):
        response = client.post(responses(survey_id), json={**GOOD, "note": SECRET})
    assert response.status_code == 500
    assert response.json == {"error": "internal_error",
                             "detail": "the server failed; nothing was stored"}
    assert "unhandled RuntimeError" in caplog.text and SECRET not in caplog.text


def test_a_failed_check_of_a_refused_request_logs_nothing_of_its_body(app, survey_id, caplog,
                                                                      monkeypatch):
    """A refused request's survey is read again (it may have been deleted since its manifest
    was kept); if that read fails unexpectedly, the 500's logged traceback holds that failure
    alone, not the refusal before it, whose message quotes the body."""
    from ldpsurvey.aggregator.store import surveys as survey_store

    client = Client(app)
    assert client.post(responses(survey_id), json=GOOD).status_code == 201  # manifest kept

    def fail(*_args):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(survey_store, "get_survey", fail)
    with caplog.at_level(logging.ERROR):
        response = client.post(responses(survey_id),
                               json={"answers": {**GOOD["answers"], SECRET: 1}})
    assert response.status_code == 500
    assert "the database went away" in caplog.text and SECRET not in caplog.text


def test_an_error_body_is_what_jsonify_writes(app, client, survey_id):
    ours = client.post(responses(survey_id), data="{", content_type="application/json")
    assert ours.status_code == 400 and ours.json["error"] == "invalid_json"
    with app.app_context():
        from flask import jsonify

        assert ours.data == jsonify(error=ours.json["error"], detail=ours.json["detail"]).data


def test_a_method_in_lower_case_is_the_method(app, survey_id):
    """werkzeug upper-cases the method (the development server passes `post` through)."""
    response = Client(app).open(responses(survey_id), method="post", json=GOOD)
    assert response.status_code == 201


@pytest.mark.parametrize("prefix", ["", "//evil.example", "/survey/"])
def test_doubled_slashes_are_the_same_path_and_nothing_redirects(app, survey_id, prefix):
    """Flask redirected them (308) to a Location it built; merged here, the submission is
    stored at once, whatever prefix a proxy forwards: no Location to point elsewhere."""
    client = Client(app)  # the suite's expects an undocumented path to be 404 or 405
    response = client.post(f"/api//surveys/{survey_id}//responses", json=GOOD,
                           environ_overrides={"SCRIPT_NAME": prefix})
    assert response.status_code == 201 and "Location" not in response.headers


def test_a_body_shorter_than_its_length_is_400_and_logs_nothing(app, survey_id, caplog):
    """A client that disconnects mid-body, as Flask answered it: 400, no error in the log."""
    body = json.dumps(GOOD).encode()
    with caplog.at_level(logging.ERROR):
        response = Client(app).post(responses(survey_id), data=body[:-5],
                                    content_type="application/json",
                                    environ_overrides={"CONTENT_LENGTH": str(len(body))})
    assert response.status_code == 400 and response.json["error"] == "bad_request"
    assert not caplog.records


def test_max_content_length_still_caps_the_body(database_url, tmp_path):
    """MAX_CONTENT_LENGTH below MAX_RESPONSE_BYTES: 413 as for every other body."""
    from ldpsurvey.aggregator import create_api_key

    from helpers import SURVEY

    app = create_app({"DATABASE_URL": database_url, "MAX_CONTENT_LENGTH": 40},
                     instance_path=tmp_path / "instance")
    try:
        auth = {"Authorization": f"Bearer {create_api_key(app).key}"}
        app.config["MAX_CONTENT_LENGTH"] = None  # the survey's definition is longer
        survey_id = app.test_client().post("/api/surveys", json=SURVEY,
                                           headers=auth).json["survey_id"]
        app.config["MAX_CONTENT_LENGTH"] = 40
        response = app.test_client().post(responses(survey_id), json=GOOD)
        assert response.status_code == 413
        assert response.json["error"] == "request_entity_too_large"
    finally:
        close_app(app)


@pytest.mark.parametrize("path", [
    "/api/surveys/abc/responses", "/api/surveys/abc/respons%65s", "/api//surveys/abc//responses",
    "/api/surveys/abc/responses/batch", "/api/surveys/abc/%72esponses/",
    "/api/surveys/a%3Fb/responses"])
def test_no_access_log_line_for_the_responses_path_however_it_is_spelled(path):
    from ldpsurvey.aggregator.web.serving import logged

    assert not logged(path)
    assert logged("/api/surveys/abc/estimates")
