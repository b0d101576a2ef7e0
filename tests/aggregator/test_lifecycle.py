"""A survey's life through the API, on SQLite and PostgreSQL: drafts (edited, seen by their
owner alone, 404 to respondents) published under their id, copies of published surveys into
new drafts, archiving closed surveys, and deletion of every row of a survey, leaving nothing in
the database files; each transition refused where it makes no sense."""

import copy
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ldpsurvey.aggregator.services import lifecycle
from ldpsurvey.aggregator.store import pending as pending_store
from ldpsurvey.aggregator.web.request_connection import get_db
from ldpsurvey.shared import load_definition, parse_definition, parse_manifest

from helpers import SURVEY, release_due

ANSWERS = {"answers": {"smoked": 1, "drove": 0, "sleep": 2}}


def key_for(app, role="researcher", name=None, surveys=()):
    from ldpsurvey.aggregator import create_api_key

    return {"Authorization": f"Bearer {create_api_key(app, role, name, surveys).key}"}


def draft(client, headers, **changes) -> str:
    response = client.post("/api/surveys?draft=true", json={**copy.deepcopy(SURVEY), **changes},
                           headers=headers)
    assert response.status_code == 201, response.json
    assert response.json["status"] == "draft" and response.json["manifest_url"] is None
    assert "Location" not in response.headers
    return response.json["survey_id"]


def listed(client, headers, query="") -> dict:
    return {s["survey_id"]: s for s in client.get(f"/api/surveys{query}",
                                                  headers=headers).json["surveys"]}


# What respondents (and anyone without a key) can ask of a survey.
RESPONDENT_ENDPOINTS = [
    ("GET", "/api/surveys/{}", None),
    ("GET", "/api/surveys/{}/manifest.sig", None),
    ("GET", "/api/surveys/{}/status", None),
    ("POST", "/api/surveys/{}/responses", ANSWERS),
    ("GET", "/api/surveys/{}/estimates", None),
    ("GET", "/api/surveys/{}/crosstab?rows=smoked&cols=sleep", None),
    ("GET", "/s/{}", None),
    ("GET", "/s/{}/results", None),
    ("GET", "/s/{}/results/estimates.csv", None),
]


def assert_unknown_to_respondents(client, survey_id: str) -> None:
    for method, path, body in RESPONDENT_ENDPOINTS:
        response = client.open(path.format(survey_id), method=method, json=body)
        assert response.status_code == 404, (method, path, response.status_code)


def test_a_draft_is_edited_then_published_under_its_id(app, client, auth):
    survey_id = draft(client, auth)
    assert_unknown_to_respondents(client, survey_id)
    entry = listed(client, auth)[survey_id]
    assert (entry["status"], entry["n"], entry["archived"], entry["title"]) == (
        "draft", 0, False, "Habits")
    edited = client.put(f"/api/surveys/{survey_id}/definition",
                        json={**SURVEY, "title": "Habits, edited"}, headers=auth)
    assert edited.status_code == 200 and edited.json["status"] == "draft"
    assert listed(client, auth)[survey_id]["title"] == "Habits, edited"
    bad = client.put(f"/api/surveys/{survey_id}/definition", json={"title": "x"}, headers=auth)
    assert bad.status_code == 422 and bad.json["error"] == "invalid_survey"
    capped = client.put(f"/api/surveys/{survey_id}/definition", headers=auth, json={
        **SURVEY, "questions": [{"id": "q", "text": "Q?", "type": "yes_no", "epsilon": 6}]})
    assert capped.status_code == 422 and capped.json["error"] == "epsilon_above_cap"
    assert listed(client, auth)[survey_id]["title"] == "Habits, edited"  # nothing half-stored
    # owner-only actions on a published survey are told it is a draft
    for path in ("close", "tokens", "archive"):
        refused = client.post(f"/api/surveys/{survey_id}/{path}", json={"count": 1},
                              headers=auth)
        assert refused.status_code == 409 and refused.json["error"] == "survey_draft", path
        assert f"survey publish {survey_id}" in refused.json["detail"]
    assert client.get(f"/api/surveys/{survey_id}/export.csv",
                      headers=auth).json["error"] == "survey_draft"

    published = client.post(f"/api/surveys/{survey_id}/publish", headers=auth)
    assert published.status_code == 200, published.json
    assert published.json["status"] == "open" and published.json["survey_id"] == survey_id
    assert published.headers["Location"] == f"/api/surveys/{survey_id}"
    manifest = client.get(f"/api/surveys/{survey_id}").data
    survey = parse_manifest(manifest)
    assert (survey.survey_id, survey.title) == (survey_id, "Habits, edited")
    key = app.extensions["ldp_signing_key"]
    assert survey.key_id == key.key_id and survey.origin == "http://localhost"
    Ed25519PublicKey.from_public_bytes(key.public_bytes).verify(
        client.get(f"/api/surveys/{survey_id}/manifest.sig").data, manifest)
    assert client.post(f"/api/surveys/{survey_id}/responses", json=ANSWERS).status_code == 201
    assert listed(client, auth)[survey_id]["status"] == "open"

    again = client.post(f"/api/surveys/{survey_id}/publish", headers=auth)
    assert again.status_code == 409 and again.json["error"] == "already_published"
    edit = client.put(f"/api/surveys/{survey_id}/definition", json=SURVEY, headers=auth)
    assert edit.status_code == 409 and edit.json["error"] == "already_published"
    assert f"survey copy {survey_id}" in edit.json["detail"]
    assert client.get(f"/api/surveys/{survey_id}").data == manifest  # unchanged, still signed


def test_a_draft_is_checked_again_at_publishing(app, client, auth):
    survey_id = draft(client, auth)
    app.config["EPSILON_CAP"] = 0.5  # the server's cap was lowered meanwhile
    refused = client.post(f"/api/surveys/{survey_id}/publish", headers=auth)
    assert refused.status_code == 422 and refused.json["error"] == "epsilon_above_cap"
    assert listed(client, auth)[survey_id]["status"] == "draft"
    assert_unknown_to_respondents(client, survey_id)


def test_a_draft_is_its_owners_alone(app, client, auth):
    survey_id = draft(client, auth)
    bob = key_for(app, name="bob")
    unknown = "a" * 26
    for method, path, body in (("PUT", "/api/surveys/{}/definition", SURVEY),
                               ("POST", "/api/surveys/{}/publish", None),
                               ("POST", "/api/surveys/{}/copy", None),
                               ("POST", "/api/surveys/{}/close", None),
                               ("DELETE", "/api/surveys/{}", None)):
        theirs = client.open(path.format(survey_id), method=method, json=body, headers=bob)
        none = client.open(path.format(unknown), method=method, json=body, headers=bob)
        assert theirs.status_code == none.status_code == 404, (method, path)
        assert theirs.json["detail"].replace(survey_id, unknown) == none.json["detail"]
    assert survey_id not in listed(client, bob)
    published = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    relay = key_for(app, "relay", surveys=(published,))
    assert client.post(f"/api/surveys/{survey_id}/publish", headers=relay).status_code == 403
    admin = key_for(app, "admin")
    assert listed(client, admin)[survey_id]["status"] == "draft"
    assert client.post(f"/api/surveys/{survey_id}/publish", headers=admin).status_code == 200
    # published by an admin, still owned by its researcher
    assert client.post(f"/api/surveys/{survey_id}/close", headers=auth).status_code == 200


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/api/surveys/{}/publish", None), ("PUT", "/api/surveys/{}/definition", SURVEY)])
def test_a_publish_or_edit_that_loses_a_race_is_told_the_survey_is_published(
        app, client, auth, monkeypatch, method, path, body):
    """Another request publishes the draft after this one's checks: this one finds the draft
    gone and is told the survey is published; nothing is stored twice."""
    survey_id = draft(client, auth)
    real = lifecycle.checked

    def published_meanwhile(definition, cap):
        monkeypatch.setattr(lifecycle, "checked", real)  # the other request runs as usual
        assert client.post(f"/api/surveys/{survey_id}/publish", headers=auth).status_code == 200
        return real(definition, cap)

    monkeypatch.setattr(lifecycle, "checked", published_meanwhile)
    late = client.open(path.format(survey_id), method=method, json=body, headers=auth)
    assert late.status_code == 409 and late.json["error"] == "already_published"
    assert listed(client, auth)[survey_id]["status"] == "open"
    assert rows_of(app, survey_id) == {"counts": 7, "surveys": 1}


def test_a_delete_that_loses_a_race_to_a_publish_treats_it_as_published(app, client, auth,
                                                                         monkeypatch):
    """The draft is published after the delete found it a draft: the delete then applies the
    rules of a published survey (an open one only with force) instead of reporting a draft
    deleted that is in fact open to respondents."""
    survey_id = draft(client, auth)
    real = lifecycle.access.check

    def published_meanwhile(*args):
        try:
            return real(*args)
        except lifecycle.SurveyIsDraft:
            monkeypatch.setattr(lifecycle.access, "check", real)
            client.post(f"/api/surveys/{survey_id}/publish", headers=auth)
            raise

    monkeypatch.setattr(lifecycle.access, "check", published_meanwhile)
    late = client.delete(f"/api/surveys/{survey_id}", headers=auth)
    assert late.status_code == 409 and late.json["error"] == "survey_open"
    assert client.get(f"/api/surveys/{survey_id}/status").json["status"] == "open"
    forced = client.delete(f"/api/surveys/{survey_id}?force=true", headers=auth)
    assert forced.status_code == 200 and rows_of(app, survey_id) == {}


def test_a_copy_is_a_new_draft_that_publishes_to_the_same_questions(app, client, auth):
    original = client.post("/api/surveys", json={**SURVEY, "crosstabs": [["smoked", "sleep"]]},
                           headers=auth).json["survey_id"]
    copied = client.post(f"/api/surveys/{original}/copy", headers=auth)
    assert copied.status_code == 201 and copied.json["status"] == "draft"
    new_id = copied.json["survey_id"]
    assert new_id != original and listed(client, auth)[new_id]["status"] == "draft"
    assert_unknown_to_respondents(client, new_id)
    client.post(f"/api/surveys/{new_id}/publish", headers=auth)
    before, after = (parse_manifest(client.get(f"/api/surveys/{sid}").data).manifest()
                     for sid in (original, new_id))
    assert {**before, "survey_id": new_id} == after
    # a researcher it is shared with may copy it: the copy is theirs
    bob = key_for(app, name="bob")
    client.put(f"/api/surveys/{original}/shares/bob", headers=auth)
    theirs = client.post(f"/api/surveys/{original}/copy", headers=bob).json["survey_id"]
    assert listed(client, bob)[theirs]["status"] == "draft" and theirs not in listed(client, auth)
    # a draft copies too; an unknown survey does not
    of_draft = client.post(f"/api/surveys/{theirs}/copy", headers=bob)
    assert of_draft.status_code == 201 and of_draft.json["survey_id"] != theirs
    assert client.post("/api/surveys/nope/copy", headers=bob).status_code == 404


@pytest.mark.parametrize("example", ["health.toml", "starter.toml"])
def test_definition_of_parses_back_to_the_same_survey(example):
    from importlib import resources

    path = resources.files("ldpsurvey.shared") / "examples" / example
    survey = load_definition(path)
    again = parse_definition(json.loads(json.dumps(lifecycle.definition_of(survey))))
    assert again == survey


def test_definition_of_a_concept_question_and_an_old_release_batch():
    from dataclasses import replace

    survey = parse_definition({"title": "T", "max_epsilon": 3, "questions": [
        {"id": "ever", "text": "Ever?", "type": "yes_no", "epsilon": 1.0,
         "concept": "smoking.ever", "irr_alpha": 0.6},
        {"id": "c", "text": "C?", "type": "choice", "options": ["a", "b", "c"], "alpha": 0.3,
         "beta": [0.2, 0.3, 0.5]}]})
    assert parse_definition(lifecycle.definition_of(survey)) == survey
    old = replace(survey, release_batch=1)  # a format /1 manifest reads as release_batch 1
    assert lifecycle.definition_of(old)["release_batch"] == 1
    assert "max_epsilon" not in lifecycle.definition_of(replace(survey, max_epsilon=None))


def test_only_a_closed_survey_is_archived_and_its_data_kept(app, client, auth):
    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    client.post(f"/api/surveys/{survey_id}/responses", json=ANSWERS)
    refused = client.post(f"/api/surveys/{survey_id}/archive", headers=auth)
    assert refused.status_code == 409 and refused.json["error"] == "survey_open"
    assert "close it first" in refused.json["detail"]
    client.post(f"/api/surveys/{survey_id}/close", headers=auth)
    bob = key_for(app, name="bob")
    client.put(f"/api/surveys/{survey_id}/shares/bob", headers=auth)
    assert client.post(f"/api/surveys/{survey_id}/archive", headers=bob).status_code == 403
    archived = client.post(f"/api/surveys/{survey_id}/archive", headers=auth)
    assert archived.status_code == 200
    assert archived.json == {"survey_id": survey_id, "status": "closed", "archived": True}
    assert survey_id not in listed(client, auth) and survey_id not in listed(client, bob)
    assert listed(client, auth, "?archived=true")[survey_id]["archived"] is True
    assert listed(client, auth, "?archived=false") == listed(client, auth)
    bad = client.get("/api/surveys?archived=yes", headers=auth)
    assert bad.status_code == 400 and bad.json["error"] == "invalid_parameter"
    twice = client.post(f"/api/surveys/{survey_id}/archive", headers=auth)
    assert twice.status_code == 409 and twice.json["error"] == "archive_conflict"
    # its data stay: the estimates, the export and the respondents' status
    estimates = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    assert estimates["questions"][0]["n"] == 1
    assert client.get(f"/api/surveys/{survey_id}/export.csv", headers=auth).data.count(b"\n") == 2
    assert client.get(f"/api/surveys/{survey_id}/status").json["status"] == "closed"
    back = client.post(f"/api/surveys/{survey_id}/unarchive", headers=auth)
    assert back.json == {"survey_id": survey_id, "status": "closed", "archived": False}
    assert listed(client, auth)[survey_id]["archived"] is False
    again = client.post(f"/api/surveys/{survey_id}/unarchive", headers=auth)
    assert again.status_code == 409 and "not archived" in again.json["detail"]


# Every endpoint that names a survey, as (method, path template, JSON body), with a key.
RESEARCHER_ENDPOINTS = [
    ("GET", "/api/surveys/{}/estimates", None),
    ("GET", "/api/surveys/{}/crosstab?rows=smoked&cols=sleep", None),
    ("GET", "/api/surveys/{}/export.csv", None),
    ("GET", "/api/surveys/{}/export.jsonl", None),
    ("GET", "/api/surveys/{}/codebook.json", None),
    ("GET", "/api/surveys/{}/codebook.md", None),
    ("GET", "/api/surveys/{}/shares", None),
    ("PUT", "/api/surveys/{}/shares/bob", None),
    ("DELETE", "/api/surveys/{}/shares/bob", None),
    ("POST", "/api/surveys/{}/tokens", {"count": 1}),
    ("POST", "/api/surveys/{}/responses/batch", {"responses": [ANSWERS]}),
    ("POST", "/api/surveys/{}/close", None),
    ("POST", "/api/surveys/{}/archive", None),
    ("POST", "/api/surveys/{}/unarchive", None),
    ("POST", "/api/surveys/{}/copy", None),
    ("POST", "/api/surveys/{}/publish", None),
    ("PUT", "/api/surveys/{}/definition", SURVEY),
    ("DELETE", "/api/surveys/{}", None),
]


def rows_of(app, survey_id: str) -> dict[str, int]:
    """How many rows of the survey each table holds (only those holding any)."""
    with app.app_context():
        db = get_db()
        counts = {table: db.query(f"SELECT COUNT(*) FROM {table} WHERE survey_id = ?",
                                  (survey_id,))[0][0] for table in lifecycle.DELETED}
    return {table: n for table, n in counts.items() if n}


def filled(app, client, auth, **changes) -> str:
    """A survey with a bit of everything: a cross-tab, a share, a relay key's scope, released
    and pending responses, an idempotency record and unspent tokens."""
    survey = {**SURVEY, "crosstabs": [["smoked", "sleep"]], "release_batch": 2, **changes}
    from ldpsurvey.aggregator import create_api_key

    survey_id = client.post("/api/surveys", json=survey, headers=auth).json["survey_id"]
    client.put(f"/api/surveys/{survey_id}/shares/{create_api_key(app).name}", headers=auth)
    relay = key_for(app, "relay", surveys=(survey_id,))
    client.post(f"/api/surveys/{survey_id}/responses/batch", json={"responses": [ANSWERS] * 2},
                headers={**relay, "Idempotency-Key": "lifecycle-key-0001"})
    release_due(app)
    client.post(f"/api/surveys/{survey_id}/responses/batch", json={"responses": [ANSWERS]},
                headers=auth)  # pending
    return survey_id


def test_delete_removes_every_row_and_every_endpoint_answers_404(app, client, auth):
    survey_id = filled(app, client, auth)
    other = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    assert set(rows_of(app, survey_id)) == {"pending", "responses", "counts", "joint_counts",
                                            "releases", "release_totals", "release_days",
                                            "idempotency_keys", "relay_surveys", "shares",
                                            "surveys"}
    refused = client.delete(f"/api/surveys/{survey_id}", headers=auth)
    assert refused.status_code == 409 and refused.json["error"] == "survey_open"
    assert "--force" in refused.json["detail"] and "never shown" in refused.json["detail"]
    stranger = key_for(app, name="carol")
    assert client.delete(f"/api/surveys/{survey_id}?force=true",
                         headers=stranger).status_code == 404
    bad = client.delete(f"/api/surveys/{survey_id}?force=1", headers=auth)
    assert bad.status_code == 400
    deleted = client.delete(f"/api/surveys/{survey_id}?force=true", headers=auth)
    assert deleted.status_code == 200
    assert deleted.json == {"survey_id": survey_id, "status": "deleted"}
    assert rows_of(app, survey_id) == {}
    assert_unknown_to_respondents(client, survey_id)
    admin = key_for(app, "admin")
    for method, path, body in RESEARCHER_ENDPOINTS:
        for headers in (auth, admin):
            response = client.open(path.format(survey_id), method=method, json=body,
                                   headers=headers)
            assert response.status_code == 404, (method, path, response.json)
            assert response.json["error"] == "unknown_survey"
    assert survey_id not in listed(client, admin, "?archived=true")
    assert release_due(app) == 0  # the pending response went with it
    assert client.get(f"/api/surveys/{other}/status").json["status"] == "open"  # others stay


def test_a_deleted_survey_is_unknown_to_a_process_that_kept_its_manifest(client, auth):
    """Intake reads a survey's manifest once per process (store.published_survey). Once the
    survey is deleted, every submission is 404: a valid one (its transaction finds no survey),
    a keyed one, an invalid one (checked before its error: it was 422 while the survey was
    there), and one without the token an invitation-only survey needs or with a malformed
    one."""
    for survey, token_error in ((SURVEY, None), ({**SURVEY, "invitation_only": True}, 401)):
        survey_id = client.post("/api/surveys", json=survey, headers=auth).json["survey_id"]
        url = f"/api/surveys/{survey_id}/responses"
        bad = {"answers": {"smoked": 7}}
        if token_error is None:
            assert client.post(url, json=ANSWERS).status_code == 201  # the manifest is kept
        else:
            assert client.post(url, json=ANSWERS).status_code == token_error
        assert client.post(url, json=bad).status_code == 422
        assert client.delete(f"/api/surveys/{survey_id}?force=true",
                             headers=auth).status_code == 200
        for body, headers in ((ANSWERS, {}), (ANSWERS, {"Idempotency-Key": "deleted-key-0001"}),
                              (bad, {}), (ANSWERS, {"Survey-Token": "!"})):
            refused = client.post(url, json=body, headers=headers)
            assert refused.status_code == 404 and refused.json["error"] == "unknown_survey"


def test_a_shared_researcher_may_not_delete_and_a_closed_survey_needs_no_force(app, client,
                                                                               auth):
    survey_id = filled(app, client, auth)
    client.post(f"/api/surveys/{survey_id}/close", headers=auth)
    shared = key_for(app, name="dora")
    client.put(f"/api/surveys/{survey_id}/shares/dora", headers=auth)
    forbidden = client.delete(f"/api/surveys/{survey_id}", headers=shared)
    assert forbidden.status_code == 403 and rows_of(app, survey_id)
    admin = key_for(app, "admin")
    assert client.delete(f"/api/surveys/{survey_id}", headers=admin).status_code == 200
    assert rows_of(app, survey_id) == {}
    survey_id = draft(client, auth)
    assert client.delete(f"/api/surveys/{survey_id}", headers=auth).status_code == 200
    assert rows_of(app, survey_id) == {}
    assert client.post(f"/api/surveys/{survey_id}/publish", headers=auth).status_code == 404


def test_an_archived_survey_can_be_deleted(app, client, auth):
    survey_id = filled(app, client, auth)
    client.post(f"/api/surveys/{survey_id}/close", headers=auth)
    client.post(f"/api/surveys/{survey_id}/archive", headers=auth)
    assert client.delete(f"/api/surveys/{survey_id}", headers=auth).status_code == 200
    assert rows_of(app, survey_id) == {}


def test_the_release_clock_skips_a_survey_deleted_meanwhile(app, client, auth, monkeypatch):
    gone = filled(app, client, auth)
    kept = filled(app, client, auth, title="Kept")
    client.post(f"/api/surveys/{kept}/responses/batch", json={"responses": [ANSWERS]},
                headers=auth)  # its pool reaches release_batch 2
    listing = pending_store.surveys_with_pending

    def listed_before_the_delete(db):
        pending = listing(db)
        client.delete(f"/api/surveys/{gone}?force=true", headers=auth)
        return sorted(pending)

    monkeypatch.setattr(pending_store, "surveys_with_pending", listed_before_the_delete)
    assert release_due(app) == 2
    assert client.get(f"/api/surveys/{kept}/estimates", headers=auth).json[
        "questions"][0]["n"] == 4


TITLE = "Zanzibar lifecycle title 7f3e"
MARKED = {
    "title": TITLE, "description": "Quokka description 51ab", "invitation_only": True,
    "release_batch": 2, "crosstabs": [["qzx_first", "qzx_second"]],
    "questions": [
        {"id": "qzx_first", "text": "Quetzal question 9c1d?", "type": "yes_no", "epsilon": 1.0},
        {"id": "qzx_second", "text": "Wombat question 2e7a?", "type": "choice", "epsilon": 1.0,
         "options": ["Xylophone option 1", "Xylophone option 2", "Xylophone option 3"]}],
}
MARKS = [TITLE, "Quokka description 51ab", "Quetzal question 9c1d?", "Wombat question 2e7a?",
         "Xylophone option", '"qzx_first":']


def marked_survey(app, client, auth) -> tuple[str, list[bytes]]:
    """A survey whose texts and ids are found nowhere else, with released and pending answers
    (each with an idempotency key), spent and unspent tokens and a share; its id and every form
    of its secrets and texts that could be stored."""
    from test_unlinkable_storage import forms, token_forms

    from ldpsurvey.aggregator import create_api_key

    survey_id = client.post("/api/surveys", json=MARKED, headers=auth).json["survey_id"]
    client.put(f"/api/surveys/{survey_id}/shares/{create_api_key(app).name}", headers=auth)
    tokens = client.post(f"/api/surveys/{survey_id}/tokens", json={"count": 6},
                         headers=auth).json["tokens"]
    keys = app.extensions["ldp_database"].keys
    secrets = []
    for i, token in enumerate(tokens[:3]):
        idempotency = f"lifecycle-delete-{i:04d}"
        secrets += forms(idempotency, keys.idempotency_id(idempotency))
        assert client.post(f"/api/surveys/{survey_id}/responses", headers={
            "Survey-Token": token, "Idempotency-Key": idempotency},
            json={"answers": {"qzx_first": 1, "qzx_second": i}}).status_code == 201
        if i == 1:
            release_due(app)  # two released, one pending
    signature = client.get(f"/api/surveys/{survey_id}/manifest.sig").data
    secrets += [survey_id.encode(), signature, signature.hex().encode(),
                *(mark.encode() for mark in MARKS),
                *(form for token in tokens[3:] for form in token_forms(app, token))]
    return survey_id, secrets


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_deleted_survey_leaves_nothing_in_the_sqlite_files(app, client, auth):
    """Read as someone with a copy of the database files would: the database, its write-ahead
    log and its index. Before the delete the survey's texts, id, signature and unspent tokens'
    keyed hashes are there to be found; after it, none of them."""
    from test_unlinkable_storage import sqlite_files, wait_for_scrub

    kept = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    survey_id, secrets = marked_survey(app, client, auth)
    files = sqlite_files(app)
    found = [secret for secret in secrets if secret in files]
    assert {survey_id.encode(), TITLE.encode(), b'"qzx_first":'} <= set(found)
    assert any(b"Xylophone" in secret for secret in found) and len(found) >= 10
    assert client.delete(f"/api/surveys/{survey_id}?force=true", headers=auth).status_code == 200
    wait_for_scrub(app)
    files = sqlite_files(app)
    assert [secret for secret in secrets if secret in files] == []
    assert kept.encode() in files  # the other survey stays


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_deleted_draft_leaves_nothing_in_the_sqlite_files(app, client, auth):
    from test_unlinkable_storage import sqlite_files, wait_for_scrub

    survey_id = client.post("/api/surveys?draft=true", json=MARKED,
                            headers=auth).json["survey_id"]
    assert TITLE.encode() in sqlite_files(app) and survey_id.encode() in sqlite_files(app)
    assert client.delete(f"/api/surveys/{survey_id}", headers=auth).status_code == 200
    wait_for_scrub(app)
    files = sqlite_files(app)
    assert TITLE.encode() not in files and survey_id.encode() not in files


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_postgresql_keeps_no_dead_row_of_a_deleted_survey(app, client, auth):
    """After a delete, VACUUM has removed every row version of the survey from every table it
    had rows in (read with pageinspect), as after a release (test_unlinkable_storage.py)."""
    import psycopg
    from test_unlinkable_storage import heap_rows, wait_for_scrub

    survey_id, _ = marked_survey(app, client, auth)
    drafted = client.post("/api/surveys?draft=true", json=MARKED, headers=auth).json["survey_id"]
    client.put(f"/api/surveys/{drafted}/definition", json=SURVEY, headers=auth)
    with psycopg.connect(app.config["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect SCHEMA public")
        assert heap_rows(conn, "drafts") > 1  # the edit left a dead version
        for sid in (survey_id, drafted):
            assert client.delete(f"/api/surveys/{sid}?force=true",
                                 headers=auth).status_code == 200
        wait_for_scrub(app)
        for table in lifecycle.DELETED:
            live = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            assert heap_rows(conn, table) == live, table
