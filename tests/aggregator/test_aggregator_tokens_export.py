"""Invitation tokens and exports."""

import csv
import io
import json

import pytest

from helpers import SURVEY, release_due

ANSWERS = {"answers": {"smoked": 1, "drove": 0, "sleep": 2}}


@pytest.fixture
def invited_id(client, auth):
    response = client.post("/api/surveys", json={**SURVEY, "invitation_only": True},
                           headers=auth)
    return response.json["survey_id"]


def mint(client, auth, survey_id, count):
    return client.post(f"/api/surveys/{survey_id}/tokens", json={"count": count}, headers=auth)


def answer(client, survey_id, token=None, key=None):
    headers = {}
    if token is not None:
        headers["Survey-Token"] = token
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post(f"/api/surveys/{survey_id}/responses", json=ANSWERS, headers=headers)


def table(app, name):
    from ldpsurvey.aggregator.web.request_connection import get_db

    with app.app_context():
        return get_db().query(f"SELECT * FROM {name}")


def test_mint_spend_and_replay(app, client, auth, invited_id):
    response = mint(client, auth, invited_id, 3)
    assert response.status_code == 201
    tokens, links = response.json["tokens"], response.json["links"]
    assert len(set(tokens)) == 3
    assert links[0].endswith(f"/s/{invited_id}#t={tokens[0]}") and "?" not in links[0]
    assert table(app, "invitation_tokens") == table(app, "spent_tokens") == []  # none stored
    assert answer(client, invited_id, tokens[0]).status_code == 201
    replay = answer(client, invited_id, tokens[0])
    assert replay.status_code == 403 and replay.json["error"] == "invalid_token"
    keys = app.extensions["ldp_database"].keys  # the spent one's keyed hash, and nothing else
    assert table(app, "spent_tokens") == [(invited_id, keys.token_hash(tokens[0]))]
    release_due(app)
    assert len(table(app, "responses")) == 1


def test_token_required_and_checked(app, client, auth, invited_id):
    mint(client, auth, invited_id, 1)
    missing = answer(client, invited_id)
    assert missing.status_code == 401 and missing.json["error"] == "token_required"
    for bad in ("not-a-token-but-long-enough", "short", "x" * 100):
        response = answer(client, invited_id, bad)
        assert response.status_code == 403 and response.json["error"] == "invalid_token"
    assert table(app, "responses") == [] and table(app, "spent_tokens") == []


def test_a_token_is_good_only_for_its_survey_and_as_spelled(app, client, auth, invited_id):
    """A token proves itself (StorageKeys.invited) for the survey it was minted for, spelled as
    minted: its 43rd character carries two spare bits, and another spelling of the same bytes
    would be another keyed hash, spendable again."""
    other = client.post("/api/surveys", json={**SURVEY, "invitation_only": True},
                        headers=auth).json["survey_id"]
    token = mint(client, auth, other, 1).json["tokens"][0]
    assert len(token) == 43
    assert answer(client, invited_id, token).status_code == 403  # another survey's
    spare = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    index = spare.index(token[-1])
    spellings = [token[:-1] + spare[index - index % 4 + bits] for bits in range(4)]
    assert spellings.count(token) == 1
    assert answer(client, other, token).status_code == 201
    for spelling in spellings:
        refused = answer(client, other, spelling)
        assert refused.status_code == 403 and refused.json["error"] == "invalid_token"
    assert len(table(app, "spent_tokens")) == 1


def test_a_token_sent_four_times_at_once_is_spent_once(app, live_server, client, auth,
                                                      invited_id):
    """Ten tokens, each sent four times by 8 threads over real HTTP: each is accepted once
    (its keyed hash's primary key in spent_tokens), the other three refused, and the release
    holds ten responses."""
    import urllib.error
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    tokens = mint(client, auth, invited_id, 10).json["tokens"]

    def send(i):
        request = urllib.request.Request(
            f"{live_server}/api/surveys/{invited_id}/responses", data=json.dumps(ANSWERS).encode(),
            headers={"Content-Type": "application/json", "Survey-Token": tokens[i % 10]})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return tokens[i % 10], response.status
        except urllib.error.HTTPError as refused:
            return tokens[i % 10], refused.code

    with ThreadPoolExecutor(8) as pool:
        sent = list(pool.map(send, range(40)))
    for token in tokens:
        assert sorted(status for t, status in sent if t == token) == [201, 403, 403, 403]
    assert client.post(f"/api/surveys/{invited_id}/close", headers=auth).status_code == 200
    assert len(table(app, "responses")) == 10


def test_a_rejected_response_does_not_spend_the_token(app, client, auth, invited_id):
    token = mint(client, auth, invited_id, 1).json["tokens"][0]
    bad = client.post(f"/api/surveys/{invited_id}/responses",
                      json={"answers": {"smoked": 9, "drove": 0, "sleep": 2}},
                      headers={"Survey-Token": token})
    assert bad.status_code == 422
    assert answer(client, invited_id, token).status_code == 201


def test_idempotent_retry_with_a_spent_token_is_answered_as_the_first(app, client, auth,
                                                                     invited_id):
    token = mint(client, auth, invited_id, 1).json["tokens"][0]
    first = answer(client, invited_id, token, key="retry-key-0001")
    again = answer(client, invited_id, token, key="retry-key-0001")
    assert first.status_code == again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    release_due(app)
    assert len(table(app, "responses")) == 1


def test_a_refused_token_leaves_its_key_unclaimed(app, client, auth, invited_id):
    """Intake keeps the group with its idempotency claim before it spends the token, so a token
    refused undoes both: the same key with a good token is then a first request, stored."""
    token = mint(client, auth, invited_id, 1).json["tokens"][0]
    refused = answer(client, invited_id, "never-minted-token-0001", key="claimed-key-0001")
    assert refused.status_code == 403 and table(app, "pending") == []
    first = answer(client, invited_id, token, key="claimed-key-0001")
    assert first.status_code == 201 and "Idempotent-Replayed" not in first.headers
    release_due(app)
    assert len(table(app, "responses")) == 1


def test_nothing_links_a_token_to_a_response(app, client, auth, invited_id):
    tokens = mint(client, auth, invited_id, 2).json["tokens"]
    answer(client, invited_id, tokens[0])
    from ldpsurvey.aggregator.config.ids import hash_text

    keys = app.extensions["ldp_database"].keys
    everything = " ".join(str(row) for name in ("responses", "counts", "idempotency_keys",
                                                "invitation_tokens", "pending", "surveys")
                          for row in table(app, name))
    assert not any(form in everything for form in (tokens[0], hash_text(tokens[0]),
                                                   keys.token_hash(tokens[0])))
    # The spent token's keyed hash is kept apart, and nothing of the unspent one anywhere.
    assert table(app, "spent_tokens") == [(invited_id, keys.token_hash(tokens[0]))]


@pytest.mark.parametrize("body", [{"count": 0}, {"count": 10_001}, {"count": "3"},
                                  {"count": True}, {"n": 3}, [3]])
def test_mint_refuses_bad_counts(client, auth, invited_id, body):
    response = client.post(f"/api/surveys/{invited_id}/tokens", json=body, headers=auth)
    assert response.status_code == 422 and response.json["error"] == "invalid_count"


def test_mint_needs_key_and_an_invitation_survey(client, auth, invited_id, survey_id):
    assert client.post(f"/api/surveys/{invited_id}/tokens", json={"count": 1}).status_code == 401
    response = mint(client, auth, survey_id, 1)
    assert response.status_code == 409 and response.json["error"] == "not_invitation_only"


def test_closing_deletes_every_token_hash(app, client, auth, invited_id):
    mint(client, auth, invited_id, 5)
    spent = mint(client, auth, invited_id, 1).json["tokens"][0]
    assert answer(client, invited_id, spent).status_code == 201
    client.post(f"/api/surveys/{invited_id}/close", headers=auth)
    assert table(app, "invitation_tokens") == table(app, "spent_tokens") == []


def submit_many(client, auth, survey_id, n):
    responses = [{"answers": {"smoked": i % 2, "drove": (i // 2) % 2, "sleep": i % 3}}
                 for i in range(n)]
    client.post(f"/api/surveys/{survey_id}/responses/batch", json={"responses": responses},
                headers=auth)
    release_due(client.application)
    return [r["answers"] for r in responses]


def canon(rows):
    return sorted(tuple(sorted(row.items())) for row in rows)


def test_rr_csv_export(client, auth, survey_id):
    sent = submit_many(client, auth, survey_id, 60)
    response = client.get(f"/api/surveys/{survey_id}/export.csv?format=rr", headers=auth)
    assert response.status_code == 200 and response.mimetype == "text/csv"
    lines = response.text.splitlines()
    comments = [line for line in lines if line.startswith("#")]
    manifest = json.loads(comments[1].removeprefix("# manifest: "))
    parameters = json.loads(comments[2].removeprefix("# parameters: "))
    assert manifest["survey_id"] == survey_id
    assert parameters["smoked"]["rr_forced_known"] == {"p": 0.5, "p1": 0.25, "p0": 0.25}
    drove = parameters["drove"]["rr_forced_known"]
    assert drove["p"] == 0.75 and drove["p1"] == pytest.approx(0.25 * 0.3)
    assert drove["p0"] == pytest.approx(0.25 * 0.7)
    assert "rr_forced_known" not in parameters["sleep"]
    assert parameters["sleep"]["report_matrix"][0][0] == pytest.approx(
        parameters["sleep"]["alpha"] + (1 - parameters["sleep"]["alpha"]) / 3)
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[len(comments):]))))
    got = [{k: int(v) for k, v in row.items()} for row in rows]
    assert canon(got) == canon(sent)
    assert got != sent  # random order (60! orders: the same one by chance is impossible)


def test_jsonl_export(client, auth, survey_id):
    sent = submit_many(client, auth, survey_id, 30)
    response = client.get(f"/api/surveys/{survey_id}/export.jsonl", headers=auth)
    head, *rows = [json.loads(line) for line in response.text.splitlines()]
    assert set(head) == {"manifest", "parameters", "central"}
    assert canon(r["answers"] for r in rows) == canon(sent)
    assert all(set(r) == {"answers"} for r in rows)


def test_export_needs_a_researcher_key(client, survey_id):
    for kind in ("csv", "jsonl"):
        assert client.get(f"/api/surveys/{survey_id}/export.{kind}").status_code == 401
    assert client.get(f"/api/surveys/{survey_id}/export.xml").status_code == 404


def test_the_survey_is_checked_before_the_token_request_body(client, auth, survey_id):
    """An unknown or open-to-anyone survey is reported as such, whatever the body."""
    bad = {"data": "not json", "content_type": "text/plain", "headers": auth}
    assert client.post("/api/surveys/nope/tokens", **bad).json["error"] == "unknown_survey"
    assert client.post(f"/api/surveys/{survey_id}/tokens",
                       **bad).json["error"] == "not_invitation_only"


def test_answers_keep_coming_while_an_export_streams(client, auth, survey_id):
    """A researcher downloads while respondents answer: the export keeps its own connection
    until its last row (Flask's teardown runs before a streamed body is read, and used to give
    that connection to the next request mid-export); the answer is accepted, the export is the
    one its snapshot saw, and the next export includes the answer."""
    submit_many(client, auth, survey_id, 20)
    before = client.get(f"/api/surveys/{survey_id}/export.csv", headers=auth).text
    streamed = client.get(f"/api/surveys/{survey_id}/export.csv", headers=auth, buffered=False)
    pieces = iter(streamed.response)
    first = next(pieces)
    answered = client.post(f"/api/surveys/{survey_id}/responses",
                           json={"answers": {"smoked": 1, "drove": 0, "sleep": 2}})
    assert answered.status_code == 201, answered.get_data(as_text=True)
    body = first + b"".join(pieces)
    streamed.close()
    assert body.decode() == before
    release_due(client.application)
    after = client.get(f"/api/surveys/{survey_id}/export.csv", headers=auth).text
    assert len(after.splitlines()) == len(before.splitlines()) + 1
