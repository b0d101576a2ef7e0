"""A catalogue of malformed inputs: each is answered 4xx with a JSON error naming the problem,
and nothing is stored."""

import json

import pytest

from helpers import SURVEY, release_due

GOOD = {"smoked": 1, "drove": 0, "sleep": 2}


def answers(**changes):
    return {"answers": {**GOOD, **changes}}


# (name, path under the survey, headers beyond the researcher key, body, status, error code)
# `body` is sent as is when bytes or str, else as JSON; `{sid}`/`{invited}` are filled in.
R = "responses"
CATALOGUE = [
    ("not JSON", R, {}, "{answers:", 400, "invalid_json"),
    ("empty body", R, {}, "", 400, "invalid_json"),
    ("duplicate JSON key", R, {}, '{"answers": {"smoked": 1, "smoked": 0, "drove": 0, '
     '"sleep": 2}}', 400, "invalid_json"),
    ("NaN", R, {}, '{"answers": {"smoked": NaN, "drove": 0, "sleep": 2}}', 400, "invalid_json"),
    ("Infinity", R, {}, '{"answers": {"smoked": Infinity, "drove": 0, "sleep": 2}}', 400,
     "invalid_json"),
    ("-Infinity", R, {}, '{"answers": {"smoked": -Infinity, "drove": 0, "sleep": 2}}', 400,
     "invalid_json"),
    ("5,000-digit integer", R, {}, '{"answers": {"smoked": ' + "9" * 5000 +
     ', "drove": 0, "sleep": 2}}', 400, "invalid_json"),
    ("deeply nested arrays", R, {}, "[" * 30_000 + "]" * 30_000, 400, "invalid_json"),
    ("invalid UTF-8", R, {}, b'{"answers": {"smoked": "\xff\xfe"}}', 400, "invalid_json"),
    ("integer 10^30", R, {}, answers(smoked=10**30), 422, "invalid_answers"),
    ("boolean", R, {}, answers(smoked=True), 422, "invalid_answers"),
    ("string digit", R, {}, answers(smoked="1"), 422, "invalid_answers"),
    ("float 1.0", R, {}, answers(smoked=1.0), 422, "invalid_answers"),
    ("float 0.5", R, {}, answers(smoked=0.5), 422, "invalid_answers"),
    ("null", R, {}, answers(smoked=None), 422, "invalid_answers"),
    ("negative index", R, {}, answers(smoked=-1), 422, "invalid_answers"),
    ("index out of range", R, {}, answers(sleep=3), 422, "invalid_answers"),
    ("missing question", R, {}, {"answers": {"smoked": 1, "drove": 0}}, 422, "invalid_answers"),
    ("extra question", R, {}, answers(other=0), 422, "invalid_answers"),
    ("unicode question id", R, {}, answers(**{"smökéd": 1}), 422, "invalid_answers"),
    ("over-long question id", R, {}, answers(**{"q" * 10_000: 1}), 422, "invalid_answers"),
    ("extra top-level field", R, {}, {**answers(), "respondent": "alice"}, 422,
     "invalid_answers"),
    ("answers as a list", R, {}, {"answers": [1, 0, 2]}, 422, "invalid_answers"),
    ("top-level list", R, {}, [answers()], 422, "invalid_answers"),
    ("top-level string", R, {}, '"answers"', 422, "invalid_answers"),
    ("nested junk", R, {}, answers(smoked={"a": [1, {"b": None}]}), 422, "invalid_answers"),
    ("wrong content type", R, {"Content-Type": "text/plain"}, json.dumps(answers()), 415,
     "unsupported_media_type"),
    ("form encoded", R, {"Content-Type": "application/x-www-form-urlencoded"},
     "smoked=1&drove=0&sleep=2", 415, "unsupported_media_type"),
    ("over the size limit", R, {}, json.dumps(answers()) + " " * 70_000, 413, "body_too_large"),
    ("malformed Idempotency-Key", R, {"Idempotency-Key": "has spaces in it"}, answers(), 400,
     "invalid_idempotency_key"),
    ("unicode Idempotency-Key", R, {"Idempotency-Key": "ключ-12345678"}, answers(), 400,
     "invalid_idempotency_key"),
    ("unknown survey", "@nope/responses", {}, answers(), 404, "unknown_survey"),
    ("over-long unicode survey id", "@" + "é" * 3000 + "/responses", {}, answers(), 404,
     "unknown_survey"),
    ("NUL byte in the survey id", "@ab%00cd/responses", {}, answers(), 404, "unknown_survey"),
    ("NUL byte in the survey id of a batch", "@ab%00cd/responses/batch", {},
     {"responses": [answers()]}, 404, "unknown_survey"),
    ("NUL byte in the survey id to close", "@ab%00cd/close", {}, {}, 404, "unknown_survey"),
    ("invitation survey without token", "@{invited}/responses", {}, answers(), 401,
     "token_required"),
    ("invitation survey, forged token", "@{invited}/responses", {"Survey-Token": "A" * 22},
     answers(), 403, "invalid_token"),
    ("oversized batch", "responses/batch", {}, {"responses": [answers()] * 10_001}, 422,
     "batch_too_large"),
    ("empty batch", "responses/batch", {}, {"responses": []}, 422, "invalid_answers"),
    ("batch with one bad response", "responses/batch", {},
     {"responses": [answers()] * 5 + [answers(sleep=9)]}, 422, "invalid_answers"),
    ("batch of the wrong shape", "responses/batch", {}, {"responses": {"a": answers()}}, 422,
     "invalid_answers"),
    ("tokens: negative count", "@{invited}/tokens", {}, {"count": -5}, 422, "invalid_count"),
    ("tokens: count as float", "@{invited}/tokens", {}, {"count": 2.0}, 422, "invalid_count"),
    ("survey: NaN alpha", "@/surveys", {}, '{"title": "t", "questions": [{"id": "q", '
     '"text": "?", "type": "yes_no", "alpha": NaN}]}', 400, "invalid_json"),
    ("survey: alpha as text", "@/surveys", {}, {"title": "t", "questions": [
        {"id": "q", "text": "?", "type": "yes_no", "alpha": "0.5"}]}, 422, "invalid_survey"),
    ("survey: unicode id", "@/surveys", {}, {"title": "t", "questions": [
        {"id": "ünï", "text": "?", "type": "yes_no", "alpha": 0.5}]}, 422, "invalid_survey"),
]


def test_the_catalogue_is_large_enough():
    assert len(CATALOGUE) >= 30


def snapshot(app):
    from ldpsurvey.aggregator.web.request_connection import get_db

    with app.app_context():
        db = get_db()
        return {table: db.query(f"SELECT * FROM {table} ORDER BY 1")
                for table in ("surveys", "responses", "counts", "idempotency_keys",
                              "invitation_tokens", "pending", "releases")}


@pytest.mark.parametrize("name, path, headers, body, status, code", CATALOGUE,
                         ids=[case[0] for case in CATALOGUE])
def test_malformed_input(app, client, auth, survey_id, name, path, headers, body, status, code):
    invited = client.post("/api/surveys", json={**SURVEY, "invitation_only": True},
                          headers=auth).json["survey_id"]
    client.post(f"/api/surveys/{invited}/tokens", json={"count": 1}, headers=auth)
    before = snapshot(app)
    if path.startswith("@/"):
        url = "/api" + path[1:]
    elif path.startswith("@"):
        url = "/api/surveys/" + path[1:].format(invited=invited)
    else:
        url = f"/api/surveys/{survey_id}/{path}"
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    response = client.post(url, data=data, headers={"Content-Type": "application/json",
                                                    **auth, **headers})
    assert response.status_code == status, response.get_data(as_text=True)[:300]
    assert response.json["error"] == code and response.json["detail"]
    assert snapshot(app) == before


@pytest.mark.parametrize("path", ["/api/surveys/ab%00cd", "/api/surveys/ab%00cd/status",
                                  "/api/surveys/ab%00cd/estimates",
                                  "/api/surveys/ab%00cd/export.csv"])
def test_a_nul_byte_in_a_survey_id_is_an_unknown_survey(client, auth, path):
    """PostgreSQL refuses NUL bytes in text outright: such an id is never looked up."""
    response = client.get(path, headers=auth)
    assert response.status_code == 404 and response.json["error"] == "unknown_survey"


def test_a_confidence_next_to_1_is_answered(client, auth, survey_id):
    client.post(f"/api/surveys/{survey_id}/responses", json=answers())
    release_due(client.application)
    response = client.get(f"/api/surveys/{survey_id}/estimates?confidence=0.9999999999999999",
                          headers=auth)
    assert response.status_code == 200, response.json
    option = response.json["questions"][0]["options"][1]
    assert 0 <= option["ci_low"] <= option["ci_high"] <= 1


@pytest.mark.parametrize("name", ["ab%00cd", "%C3%BC", "x" * 65, "-starts-with-dash", "Bob"])
def test_a_researcher_name_of_no_valid_form_is_an_unknown_researcher(client, auth, survey_id,
                                                                     name):
    for method in ("PUT", "DELETE"):
        response = client.open(f"/api/surveys/{survey_id}/shares/{name}", method=method,
                               headers=auth)
        assert response.status_code == 404 and response.json["error"] == "unknown_researcher"


def test_an_api_key_id_of_no_valid_form_is_an_unknown_key(app):
    from ldpsurvey.aggregator import DomainError
    from ldpsurvey.aggregator.services import accounts
    from ldpsurvey.aggregator.web.request_connection import get_db

    with app.app_context():
        for api_key_id in ("key-\x00", "key-" + "0" * 16 + "\x00", ""):
            with pytest.raises(DomainError, match="no API key with id"):
                accounts.revoke(get_db(), api_key_id)


# Every endpoint that takes JSON, with a body that holds `{text}` where a string goes.
LONE_SURROGATE_BODIES = [
    ("@/surveys", '{"title": "Habits {text}", "questions": [{"id": "q", "text": "?", '
                  '"type": "yes_no", "alpha": 0.5}]}'),
    ("@/surveys", '{"title": "Habits", "questions": [{"id": "q", "text": "?", '
                  '"type": "choice", "options": ["a{text}", "b"], "alpha": 0.5}]}'),
    ("responses", '{"answers": {"smoked": 1, "drove": 0, "sleep": 2, "{text}": 0}}'),
    ("responses", '{"answers": {"smoked": 1, "drove": 0, "sleep": 2}, "x": "{text}"}'),
    ("responses/batch", '{"responses": [{"answers": {"smoked": 1, "drove": 0, "sleep": 2, '
                        '"q{text}": 1}}]}'),
    ("@{invited}/tokens", '{"count": 1, "note": "{text}"}'),
]


@pytest.mark.parametrize("text", ["\\ud800", "\\udfff", "\\uDBFF x", "\\ud800\\ud800",
                                  "\\ude00\\ud83d"])
@pytest.mark.parametrize("path, body", LONE_SURROGATE_BODIES)
def test_a_lone_surrogate_is_refused_on_every_json_endpoint(app, client, auth, survey_id, path,
                                                            body, text):
    """A JSON string escape of half a UTF-16 pair is valid JSON syntax but no Unicode text: a
    422 naming it, before anything is stored (it once failed to encode: a 500)."""
    invited = client.post("/api/surveys", json={**SURVEY, "invitation_only": True},
                          headers=auth).json["survey_id"]
    before = snapshot(app)
    url = ("/api" + path[1:] if path.startswith("@/") else
           "/api/surveys/" + path[1:].format(invited=invited) if path.startswith("@") else
           f"/api/surveys/{survey_id}/{path}")
    response = client.post(url, data=body.replace("{text}", text), headers={
        "Content-Type": "application/json", **auth})
    assert response.status_code == 422, response.get_data(as_text=True)[:300]
    assert response.json["error"] == "invalid_unicode"
    assert "lone surrogate" in response.json["detail"]
    assert snapshot(app) == before


def test_a_surrogate_pair_is_one_character(client, auth):
    """The escape of a character beyond the BMP, as JSON.stringify and json.dumps write it."""
    response = client.post("/api/surveys", data='{"title": "Habits \\ud83d\\ude00", "questions": '
                           '[{"id": "q", "text": "?", "type": "yes_no", "alpha": 0.5}]}',
                           headers={"Content-Type": "application/json", **auth})
    assert response.status_code == 201, response.json
    manifest = json.loads(client.get(f"/api/surveys/{response.json['survey_id']}").data)
    assert manifest["title"] == "Habits \U0001f600"


def test_a_lone_surrogate_is_found_at_any_depth_and_in_keys():
    from ldpsurvey.shared.survey import strict_json

    deepest = 0
    for depth in range(100, 100_000, 100):  # as deep as the parser goes
        try:
            strict_json.loads("[" * depth + "]" * depth)
        except strict_json.StrictJSONError:
            break
        deepest = depth
    with pytest.raises(strict_json.InvalidUnicode, match=r"U\+DC00"):
        strict_json.loads("[" * deepest + '"\\udc00"' + "]" * deepest)
    with pytest.raises(strict_json.InvalidUnicode, match=r"U\+D800"):
        strict_json.loads('{"a": {"\\ud800": 1}}')


def test_a_manifest_with_a_lone_surrogate_is_refused_by_the_client():
    from ldpsurvey.shared import SurveyError, parse_manifest

    with pytest.raises(SurveyError, match="lone surrogate"):
        parse_manifest(b'{"title": "\\ud800"}')


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-16-le", "utf-32"])
def test_a_lone_surrogate_is_found_whatever_the_encoding_of_the_bytes(encoding):
    """The walk over every string is skipped only for ASCII bytes without a \\u escape and
    without a NUL: a UTF-16 or UTF-32 body spells its escape with NULs between the bytes."""
    from ldpsurvey.shared.survey import strict_json

    with pytest.raises(strict_json.InvalidUnicode, match=r"U\+D800"):
        strict_json.loads('{"a": "\\ud800"}'.encode(encoding))
    with pytest.raises(strict_json.InvalidUnicode, match=r"U\+D800"):  # raw, not escaped
        strict_json.loads('{"a": "\ud800"}'.encode("utf-8", "surrogatepass"))
    assert strict_json.loads('{"a": [1, "b"]}'.encode(encoding)) == {"a": [1, "b"]}
    assert strict_json.loads('{"a": "\\u00e9"}') == {"a": "\u00e9"}  # an escape, no surrogate


def test_a_batch_names_its_first_bad_response_after_checking_distinct_values(client, auth,
                                                                              survey_id):
    """Batches are checked a column of distinct values at a time; a boolean among integers
    (equal to 1 in a set) is still refused, naming the first response that holds it, and so
    is the first of several problems."""
    good = {"answers": {"smoked": 1, "drove": 0, "sleep": 2}}
    cases = [({"smoked": True, "drove": 0, "sleep": 2}, 3, "responses[3].answers.smoked must be "
              "an integer option index, got bool"),
             ({"smoked": 1, "drove": 0, "sleep": 3}, 1, "responses[1].answers.sleep must be an "
              "option index from 0 to 2")]
    for answers, at, detail in cases:
        batch = [good] * 5
        batch[at] = {"answers": answers}
        batch[4] = {"answers": {"smoked": 1, "drove": 7, "sleep": 2}}
        response = client.post(f"/api/surveys/{survey_id}/responses/batch",
                               json={"responses": batch}, headers=auth)
        assert response.status_code == 422 and response.json["detail"] == detail, response.json
    response = client.post(f"/api/surveys/{survey_id}/responses/batch",
                           json={"responses": [good] * 5}, headers=auth)
    assert response.status_code == 201 and response.json["accepted"] == 5
