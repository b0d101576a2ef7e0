"""The respondent client against a real aggregator over HTTP."""

import base64
import json
import math
import stat

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ldpsurvey.client import (
    Ceilings,
    LocalState,
    TrustError,
    fetch_survey,
    prepare,
    submit,
    unanswered,
)
from ldpsurvey.client.verify import parameters, verify_manifest
from ldpsurvey.shared.mechanisms.randomizer import N
from ldpsurvey.shared.survey.manifest import key_id

from helpers import SURVEY, released_n

TRUTH = {"smoked": 1, "drove": 0, "sleep": 2}
ROOMY = Ceilings(per_question=5.0, total=10.0)  # the test survey has a question above ln 3


@pytest.fixture
def state(tmp_path):
    return LocalState(tmp_path / "client" / "state.json")


def counted(client, survey_id, auth):
    return released_n(client, auth, survey_id)


def test_answer_end_to_end_and_again_after_a_restart(live_server, client, auth, survey_id,
                                                      state, tmp_path):
    verified = fetch_survey(live_server, survey_id, state, ROOMY)
    submission = prepare(verified, TRUTH, state)
    assert set(submission.answers) == set(TRUTH)
    submit(verified, submission, state)
    assert counted(client, survey_id, auth) == 1
    # a new process: the store on disk gives back the same randomized answers and key
    again_state = LocalState(tmp_path / "client" / "state.json")
    again = fetch_survey(live_server, survey_id, again_state, ROOMY)
    assert unanswered(again, again_state) == []
    repeat = prepare(again, {"smoked": 0, "drove": 1, "sleep": 0}, again_state)
    assert repeat.answers == submission.answers
    assert repeat.idempotency_key == submission.idempotency_key and repeat.already_submitted
    submit(again, repeat, again_state)
    assert counted(client, survey_id, auth) == 1


def test_store_is_private_and_holds_only_what_is_sent(live_server, survey_id, state):
    verified = fetch_survey(live_server, survey_id, state, ROOMY)
    # draws that never keep the truth and always force the last option
    submission = prepare(verified, {"smoked": 0, "drove": 0, "sleep": 0}, state,
                         draw=lambda: N - 1)
    assert submission.answers == {"smoked": 1, "drove": 1, "sleep": 2}
    assert stat.S_IMODE(state.path.stat().st_mode) == 0o600
    stored = json.loads(state.path.read_text())
    memo = stored["keys"][verified.key_id]["surveys"][survey_id]
    assert memo == {"answers": submission.answers, "idempotency_key": submission.idempotency_key,
                    "submitted": False, "title": "Habits", "charged": None, "disclosed": None,
                    "estimated": False,
                    "parameters": parameters(verified.survey)}  # no answer: alpha, beta, ids


def test_key_is_pinned_and_a_changed_key_is_refused(live_server, survey_id, state):
    fetch_survey(live_server, survey_id, state, ROOMY)
    assert state.pinned_key(live_server)
    other = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    state.pin_key(live_server, other)
    with pytest.raises(TrustError) as refused:
        fetch_survey(live_server, survey_id, state, ROOMY)
    # the message names both keys and both ways out, word for word
    assert str(refused.value) == (
        f"the aggregator at {live_server} now presents a different signing key "
        f"({key_id(served_key(live_server))}) from the one this device pinned ({key_id(other)}). "
        "It may have been replaced or impersonated; nothing was sent. If its researchers "
        "announced a new key, pass it with --public-key (what this device kept for the old key "
        "moves to it), or delete what was kept for the old key with `ldp-survey privacy "
        f"--forget {key_id(other)}`.")
    assert state.pinned_key(live_server) == other


def served_key(aggregator: str) -> bytes:
    """The public key the aggregator serves."""
    from ldpsurvey.client import http as client_http

    return base64.b64decode(client_http.request("GET", f"{aggregator}/api/key")
                            .json()["public_key"])


def test_an_explicit_key_is_pinned_once_it_verifies(live_server, survey_id, state):
    fetch_survey(live_server, survey_id, state, ROOMY, public_key=served_key(live_server))
    assert state.pinned_key(live_server) == served_key(live_server)


def test_a_closed_survey_is_not_answered(live_server, client, auth, survey_id, state):
    from ldpsurvey.client import SurveyUnavailable

    client.post(f"/api/surveys/{survey_id}/close", headers=auth)
    with pytest.raises(SurveyUnavailable) as closed:
        fetch_survey(live_server, survey_id, state, ROOMY)
    assert str(closed.value) == "this survey is closed: it takes no more answers"


def test_explicit_key_that_did_not_sign_is_refused(live_server, survey_id, state):
    other = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    with pytest.raises(TrustError, match="signature does not verify"):
        fetch_survey(live_server, survey_id, state, ROOMY, public_key=other)


def signed(client, survey_id):
    raw = client.get(f"/api/surveys/{survey_id}").data
    signature = client.get(f"/api/surveys/{survey_id}/manifest.sig").data
    key = base64.b64decode(client.get("/api/key").json["public_key"])
    return raw, signature, key


@pytest.mark.parametrize("old, new", [
    (b'"alpha":0.5', b'"alpha":0.6'),
    (b'"beta":[0.5,0.5]', b'"beta":[0.6,0.4]'),
    (b'"text":"Smoked?"', b'"text":"Smoked??"'),
    (b'"epsilon":1.0986122886681096', b'"epsilon":0.5'),
])
def test_tampered_manifests_are_refused(client, survey_id, old, new):
    raw, signature, key = signed(client, survey_id)
    assert old in raw
    verify_manifest(raw, signature, key)  # the original verifies
    with pytest.raises(TrustError, match="signature"):
        verify_manifest(raw.replace(old, new), signature, key)


def test_tampered_signature_and_foreign_signer_are_refused(client, survey_id):
    raw, signature, key = signed(client, survey_id)
    flipped = bytes([signature[0] ^ 1]) + signature[1:]
    with pytest.raises(TrustError, match="signature"):
        verify_manifest(raw, flipped, key)
    impostor = Ed25519PrivateKey.generate()
    impostor_key = impostor.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    with pytest.raises(TrustError, match="different signing key"):
        verify_manifest(raw, impostor.sign(raw), impostor_key)  # valid signature, wrong key id


def test_each_refused_manifest_says_why_and_that_nothing_was_sent(client, survey_id):
    """What the respondent reads when a manifest is refused: an altered one, a signed one the
    client cannot parse, and one naming another key than the key that signed it."""
    raw, signature, key = signed(client, survey_id)
    with pytest.raises(TrustError) as altered:
        verify_manifest(raw.replace(b'"alpha":0.5', b'"alpha":0.6'), signature, key)
    assert str(altered.value) == ("the survey's signature does not verify with the aggregator's "
                                  "key: its parameters may have been altered; nothing was sent")
    impostor = Ed25519PrivateKey.generate()
    impostor_key = impostor.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    with pytest.raises(TrustError) as malformed:
        verify_manifest(b"not json", impostor.sign(b"not json"), impostor_key)
    assert str(malformed.value) == ("the signed survey is malformed: manifest: not valid JSON: "
                                    "Expecting value: line 1 column 1 (char 0)")
    with pytest.raises(TrustError) as foreign:
        verify_manifest(raw, impostor.sign(raw), impostor_key)
    assert str(foreign.value) == \
        "the survey names a different signing key than the one that signed it"


def test_a_record_holding_some_answers_keeps_them_and_randomizes_the_rest(live_server, survey_id,
                                                                          state):
    """prepare works question by question: an answer kept for the first question stays what it
    was, whatever is passed now, and the later questions are still randomized."""
    verified = fetch_survey(live_server, survey_id, state, ROOMY)
    record = state.record(verified.key_id, survey_id)
    state.remember(verified.key_id, survey_id, {**record, "answers": {"smoked": 1},
                                                "parameters": parameters(verified.survey)})
    submission = prepare(verified, {"smoked": 0, "drove": 0, "sleep": 2}, state,
                         draw=lambda: 0)  # draws that always keep the true answer
    assert submission.answers == {"smoked": 1, "drove": 0, "sleep": 2}


def create(client, auth, survey):
    response = client.post("/api/surveys", json=survey, headers=auth)
    assert response.status_code == 201, response.json
    return response.json["survey_id"]


def one_question(**parameters):
    return {"title": "t", "questions": [{"id": "q", "text": "?", "type": "yes_no",
                                         **parameters}]}


def test_ceilings(live_server, client, auth, state):
    at_default = create(client, auth, one_question(epsilon=math.log(3)))
    fetch_survey(live_server, at_default, state)  # exactly at the default ceiling: accepted
    above = create(client, auth, one_question(alpha=0.51))
    with pytest.raises(TrustError, match=r"above your ceiling of 1\.099 per question"):
        fetch_survey(live_server, above, state)
    at_custom = create(client, auth, one_question(epsilon=0.7))
    fetch_survey(live_server, at_custom, state, Ceilings(per_question=0.7, total=0.7))
    with pytest.raises(TrustError, match=r"^the survey asks for a total epsilon of \d\.\d+ over 3 "
                       r"questions, above your ceiling of 2 per submission; nothing was sent$"):
        fetch_survey(live_server, create(client, auth, SURVEY), state,
                     Ceilings(per_question=5.0, total=2.0))


def test_http_errors_are_plain_words(live_server, state):
    from ldpsurvey.client import ApiError

    with pytest.raises(ApiError, match="does not know this survey"):
        fetch_survey(live_server, "nope", state)


class FlakyServer:
    """A loopback server that drops the first POST without an answer and accepts the others,
    recording each Idempotency-Key and body; use as a context manager, `url` is its address."""

    def __init__(self):
        import http.server
        import threading

        seen = self.seen = []
        bodies = self.bodies = []

        class Flaky(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
                seen.append(self.headers["Idempotency-Key"])
                if len(seen) == 1:
                    self.close_connection = True
                    self.connection.shutdown(2)  # drop it without an answer
                    return
                self.send_response(201)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"accepted": 1}')

            def log_message(self, *args):
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Flaky)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.01}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()


def test_network_failures_are_retried_with_the_same_key():
    """A server that drops the first connection: the retry carries the same Idempotency-Key."""
    from ldpsurvey.client import http as client_http

    with FlakyServer() as flaky:
        response = client_http.request(
            "POST", f"{flaky.url}/x", json_body={"answers": {}},
            headers={"Idempotency-Key": "same-key-123"}, retries=2, backoff=0.01)
    assert response.status == 201 and flaky.seen == ["same-key-123", "same-key-123"]


def test_a_body_already_encoded_is_sent_as_is_and_retried_the_same():
    """json_text (the mock's batches, encoded once): the same bytes on every attempt, padded
    like a json_body; a request with both bodies is refused before anything is sent."""
    from ldpsurvey.client import http as client_http

    with FlakyServer() as flaky:
        response = client_http.request(
            "POST", f"{flaky.url}/x", json_text=b'{"responses":[]}', padded_size=256,
            headers={"Idempotency-Key": "same-key-456"}, retries=2, backoff=0.01)
    assert response.status == 201 and flaky.seen == ["same-key-456", "same-key-456"]
    assert flaky.bodies == [b'{"responses":[]}'.ljust(256)] * 2
    with pytest.raises(ValueError, match="one body"):
        client_http.request("POST", f"{flaky.url}/x", json_body={}, json_text=b"{}")


def test_submit_retries_a_dropped_connection_unless_told_not_to(live_server, survey_id, state):
    """submit() retries by default (with the same key) and passes `retries` on: with
    retries=0 the dropped connection is the respondent's error to see."""
    from dataclasses import replace

    from ldpsurvey.client import NetworkError

    verified = fetch_survey(live_server, survey_id, state, ROOMY)
    submission = prepare(verified, TRUTH, state)
    with FlakyServer() as flaky:
        assert submit(replace(verified, aggregator=flaky.url), submission, state) == {
            "accepted": 1, "replayed": False}
    assert flaky.seen == [submission.idempotency_key] * 2
    with FlakyServer() as flaky, pytest.raises(NetworkError):
        submit(replace(verified, aggregator=flaky.url), submission, state, retries=0)
    assert flaky.seen == [submission.idempotency_key]


def test_an_invited_respondent_answers_with_the_token(live_server, client, auth, state):
    from ldpsurvey.client import ApiError, SurveyUnavailable

    survey_id = create(client, auth, {**SURVEY, "invitation_only": True})
    [token] = client.post(f"/api/surveys/{survey_id}/tokens", json={"count": 1},
                          headers=auth).json["tokens"]
    with pytest.raises(SurveyUnavailable) as refused:
        fetch_survey(live_server, survey_id, state, ROOMY)
    assert str(refused.value) == ("this survey is by invitation only: answer with the link from "
                                  "your invitation (--url 'LINK', or --link to paste it unseen)")
    verified = fetch_survey(live_server, survey_id, state, ROOMY, token=token)
    submission = prepare(verified, TRUTH, state)
    with pytest.raises(ApiError, match="needs a valid key"):  # 401: the server wants the token
        submit(verified, submission, state)
    submit(verified, submission, state, token=token)
    assert counted(client, survey_id, auth) == 1


def test_every_spelling_of_the_address_is_one_aggregator(live_server, survey_id, state):
    for url in (f"{live_server}/", f"{live_server}//", f"{live_server}/?x=1#top",
                f" {live_server.upper()} "):
        verified = fetch_survey(url, survey_id, state, ROOMY)
        assert verified.aggregator == live_server
    assert state.pinned_key(live_server) is not None
