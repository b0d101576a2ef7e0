"""The respondent client attacked as the issue-13 review did: two runs at once, an aggregator
re-signing a survey id with new questions, an instantaneous layer close to 1, spellings of an
address, and damaged state files."""

import base64
import dataclasses
import json
import math
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ldpsurvey.cli import main
from ldpsurvey.client import Ceilings, LocalState, TrustError, ledger, prepare, submit
from ldpsurvey.client.state import LEGACY_CHARGE
from ldpsurvey.client.urls import origin
from ldpsurvey.client.verify import check_ceilings, fetch_survey
from ldpsurvey.shared import parse_definition
from ldpsurvey.shared.survey.manifest import key_id

from helpers import SURVEY, released_n, serving

ROOMY = Ceilings(per_question=5.0, total=10.0, lifetime=100.0)
LN3 = math.log(3)


def yes_no(*ids, epsilon=LN3, **extra):
    return [{"id": qid, "text": f"{qid}?", "type": "yes_no", "epsilon": epsilon, **extra}
            for qid in ids]


def offline(survey_id, questions, kid="k" * 16):
    """A verified survey without a server (the ledger and the store need no network)."""
    survey = parse_definition({"title": survey_id, "release_batch": 1, "questions": questions})
    survey = dataclasses.replace(survey, survey_id=survey_id, key_id=kid)
    return check_ceilings("http://aggregator.example", survey, ROOMY)


# --- 1. two runs at once ------------------------------------------------------------------------

RUN = """
import json, sys
from ldpsurvey.client import Ceilings, LocalState, fetch_survey, prepare, submit
url, survey_id, path = sys.argv[1:4]
state = LocalState(path)
verified = fetch_survey(url, survey_id, state, Ceilings(5.0, 10.0, 100.0))
print("fetched", flush=True)
sys.stdin.readline()
submission = prepare(verified, {q.id: 1 for q in verified.survey.questions}, state)
submit(verified, submission, state)
print(json.dumps([submission.answers, submission.idempotency_key]), flush=True)
"""


def start(url, survey_id, path):
    """A respondent run in its own process, stopped at its prompt (fetched, not answered)."""
    run = subprocess.Popen([sys.executable, "-c", RUN, url, survey_id, str(path)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert run.stdout.readline() == "fetched\n"
    return run


def finish(run):
    out, _ = run.communicate("go\n", timeout=60)
    assert run.returncode == 0
    return json.loads(out)


def counted(client, auth, survey_id):
    return released_n(client, auth, survey_id)


def test_two_processes_answering_one_survey_send_one_body(live_server, client, auth,
                                                          survey_id, tmp_path):
    path = tmp_path / "state.json"
    first, second = start(live_server, survey_id, path), start(live_server, survey_id, path)
    sent_first, sent_second = finish(first), finish(second)
    assert sent_first == sent_second  # the second run sent the first one's body and key
    assert counted(client, auth, survey_id) == 1
    [charged] = ledger.summary(LocalState(path), 100.0)["aggregators"][0]["surveys"]
    assert charged["epsilon"] == pytest.approx(parse_definition(SURVEY).total_epsilon)


def test_a_run_left_at_its_prompt_keeps_what_another_sent_meanwhile(live_server, client, auth,
                                                                   tmp_path):
    path = tmp_path / "state.json"
    waiting_id, other_id = (client.post("/api/surveys", json=SURVEY, headers=auth).json
                            ["survey_id"] for _ in range(2))
    waiting = start(live_server, waiting_id, path)
    state = LocalState(path)  # another terminal answers and sends the other survey
    verified = fetch_survey(live_server, other_id, state, ROOMY)
    submit(verified, prepare(verified, {"smoked": 1, "drove": 0, "sleep": 2}, state), state)
    finish(waiting)
    kept = LocalState(path)
    surveys = kept.surveys(verified.key_id)
    assert surveys[other_id]["submitted"] and surveys[waiting_id]["submitted"]
    assert ledger.spent(kept, verified.key_id) == pytest.approx(2 * verified.total_epsilon)


def test_threads_with_their_own_store_objects_lose_nothing(tmp_path):
    """Eight store objects on one file, all opened before any writes (as eight terminals
    would), each answering its own survey and one shared survey at the same time."""
    path = tmp_path / "state.json"
    shared = offline("shared", yes_no("a", "b", "c", "d", epsilon=0.5))
    stores = [LocalState(path) for _ in range(8)]
    sent: list = [None] * len(stores)
    start_together = threading.Barrier(len(stores))

    def respondent(index):
        own = offline(f"own{index}", yes_no("q", epsilon=0.25))
        start_together.wait()
        for verified in (own, shared):
            submission = prepare(verified, {"q": 1, "a": 1, "b": 0, "c": 1, "d": 0},
                                 stores[index])
            ledger.charge(verified, stores[index])
        sent[index] = (submission.answers, submission.idempotency_key)

    threads = [threading.Thread(target=respondent, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(answers == sent[0] for answers in sent)  # the shared survey randomized once
    kept = LocalState(path).surveys("k" * 16)
    assert set(kept) == {"shared"} | {f"own{i}" for i in range(8)}
    assert all(record["charged"] is not None for record in kept.values())
    assert ledger.spent(LocalState(path), "k" * 16) == pytest.approx(8 * 0.25 + 4 * 0.5)


# --- 2. a survey id re-signed with new questions ------------------------------------------------

class Aggregator:
    """An aggregator that holds its own signing key and serves survey S as `questions` says now,
    recording every body posted to it."""

    def __init__(self):
        self.key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
        self.public = self.key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.questions = yes_no("w1q0", "w1q1")
        self.posts: list = []
        self.alias = "S"  # another survey id it serves S for, when set
        self.reply_to_post = b"{}"

    def manifest(self) -> bytes:
        survey = parse_definition({"title": "Evil", "release_batch": 1, "questions": [
            {k: v for k, v in q.items() if k != "irr_alpha"} for q in self.questions]})
        questions = tuple(dataclasses.replace(q, irr_alpha=given.get("irr_alpha", q.irr_alpha))
                          for q, given in zip(survey.questions, self.questions, strict=True))
        return dataclasses.replace(survey, questions=questions, survey_id="S",
                                   key_id=key_id(self.public)).manifest_bytes()

    def handler(self):
        aggregator = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, body: bytes, code=200):
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                pages = {"/api/key": json.dumps({"public_key": base64.b64encode(
                             aggregator.public).decode()}).encode(),
                         "/api/surveys/S": aggregator.manifest(),
                         "/api/surveys/S/manifest.sig": aggregator.key.sign(aggregator.manifest()),
                         "/api/surveys/S/status": b'{"status": "open"}'}
                path = self.path.replace(f"/api/surveys/{aggregator.alias}", "/api/surveys/S")
                self.reply(pages.get(path, b"{}"), 200 if path in pages else 404)

            def do_POST(self):
                aggregator.posts.append(self.rfile.read(int(self.headers["Content-Length"])))
                self.reply(aggregator.reply_to_post, 201)

        return Handler


@pytest.fixture
def evil():
    aggregator = Aggregator()
    with serving(aggregator.handler()) as aggregator.url:
        yield aggregator


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_CLIENT_DIR", str(tmp_path / "respondent"))
    return CliRunner()


def answer(runner, evil, answers):
    return runner.invoke(main, ["respond", "--url", evil.url, "--survey", "S", "--insecure-http",
                                "--answers", answers, "--yes", "--max-lifetime-epsilon", "100"])


@pytest.mark.parametrize("wave_2", [
    yes_no("w2q0", "w2q1"),                        # new question ids
    yes_no("w1q0", "w1q1", "w2q0"),                # one more question
    yes_no("w1q0"),                                # a smaller survey
    yes_no("w1q0", "w1q1", epsilon=1.0),           # the same ids, randomized otherwise
])
def test_a_survey_re_signed_with_other_questions_is_refused_and_nothing_sent(
        runner, evil, tmp_path, wave_2):
    first = answer(runner, evil, "w1q0=yes,w1q1=no")
    assert first.exit_code == 0, first.output
    store = tmp_path / "respondent" / "state.json"
    before = store.read_bytes()
    evil.questions = wave_2
    again = answer(runner, evil, ",".join(f"{q['id']}=yes" for q in wave_2))
    assert again.exit_code == 1
    [line] = again.stderr.splitlines()
    assert "survey S was answered on this device when it asked other questions" in line
    assert "nothing was sent" in line
    assert len(evil.posts) == 1 and store.read_bytes() == before


def test_a_survey_changed_between_prepare_and_send_is_not_sent(runner, evil, tmp_path):
    """The survey changes under a run waiting at its prompt: a second run answered the
    changed version; the first sends nothing."""
    state = LocalState(tmp_path / "state.json")
    wave_1 = fetch_survey(evil.url, "S", state, ROOMY)
    evil.questions = yes_no("w2q0")
    wave_2 = fetch_survey(evil.url, "S", state, ROOMY)
    submit(wave_2, prepare(wave_2, {"w2q0": 1}, state), state)
    with pytest.raises(TrustError, match="answered on this device when it asked other"):
        prepare(wave_1, {"w1q0": 1, "w1q1": 1}, state)
    assert len(evil.posts) == 1


def test_a_legacy_charge_is_not_lowered_by_serving_a_smaller_survey(evil, tmp_path):
    """A survey sent before the ledger existed (charged at most LEGACY_CHARGE): served again
    with fewer questions, it is refused and its charge stays."""
    state = LocalState(tmp_path / "state.json")
    state.pin_key(evil.url, evil.public)
    kid = key_id(evil.public)
    state.remember(kid, "S", {"answers": {"w1q0": 1, "w1q1": 0}, "idempotency_key": "k" * 24,
                              "submitted": True, "title": None, "charged": LEGACY_CHARGE,
                              "disclosed": LEGACY_CHARGE, "estimated": True})
    evil.questions = yes_no("w1q0", epsilon=0.01)
    with pytest.raises(TrustError, match="other questions"):
        fetch_survey(evil.url, "S", state, ROOMY)
    assert state.record(kid, "S")["charged"] == LEGACY_CHARGE
    evil.questions = yes_no("w1q0", "w1q1")  # what was answered then: settled exactly
    fetch_survey(evil.url, "S", state, ROOMY)
    assert state.record(kid, "S")["charged"] == pytest.approx(2 * LN3)


def test_a_settled_legacy_survey_is_refused_when_randomized_otherwise(evil, tmp_path):
    """Once a survey sent before the ledger is settled, the device keeps what it asked: the
    same question ids re-signed with another mechanism are refused, not charged at the old
    settlement."""
    state = LocalState(tmp_path / "state.json")
    state.pin_key(evil.url, evil.public)
    state.remember(key_id(evil.public), "S", {
        "answers": {"w1q0": 1, "w1q1": 0}, "idempotency_key": "k" * 24, "submitted": True,
        "title": None, "charged": LEGACY_CHARGE, "disclosed": LEGACY_CHARGE, "estimated": True})
    fetch_survey(evil.url, "S", state, ROOMY)  # settled at 2 ln 3
    evil.questions = yes_no("w1q0", "w1q1", epsilon=1.0)
    with pytest.raises(TrustError) as refused:
        fetch_survey(evil.url, "S", state, ROOMY)
    assert str(refused.value) == (
        "survey S was answered on this device when it asked other questions or randomized them "
        "otherwise: the aggregator has changed what it signs under that id, and answering it "
        "again would disclose more than was counted, so this device refuses it; nothing was sent")


def test_a_survey_served_for_another_id_is_refused(evil, tmp_path):
    """An aggregator answering a request for survey T with survey S, validly signed."""
    evil.alias = "T"
    state = LocalState(tmp_path / "state.json")
    with pytest.raises(TrustError) as refused:
        fetch_survey(evil.url, "T", state, ROOMY)
    assert str(refused.value) == "the aggregator served a different survey than the one asked for"
    assert state.record(key_id(evil.public), "S")["charged"] is None


# --- 3. spellings of an address (more in test_ledger.py) ---------------------------------------

@pytest.mark.parametrize("url", ["http://256.0.0.1", "http://1.2.3.4.5", "http://0x100000000",
                                 "http://1.2.65536"])
def test_a_number_that_is_no_ipv4_address_is_refused(url):
    with pytest.raises(ValueError, match="not a valid IPv4 address"):
        origin(url)


# --- 4. an instantaneous layer close to 1 -------------------------------------------------------

def test_an_instantaneous_layer_near_1_is_refused_at_publish_and_by_the_client(client, auth,
                                                                              evil, runner):
    near_1 = yes_no("smoked", concept="smoking.ever", irr_alpha=0.9999999999999999)
    published = client.post("/api/surveys", json={"title": "T", "questions": near_1},
                            headers=auth)
    assert published.status_code == 422
    assert "question 'smoked'.irr_alpha: must be at most 0.75" in published.json["detail"]
    at_bound = yes_no("smoked", concept="smoking.ever", irr_alpha=0.75)
    assert client.post("/api/surveys", json={"title": "T", "questions": at_bound},
                       headers=auth).status_code == 201
    evil.questions = near_1  # an aggregator that signs it anyway: the client refuses it
    refused = answer(runner, evil, "smoked=yes")
    assert refused.exit_code == 1 and not evil.posts
    assert "irr_alpha: must be at most 0.75" in refused.stderr
    assert "nothing was sent" in refused.stderr


# --- 5. damaged state files ---------------------------------------------------------------------

V2 = '{"version": 2, "pins": {}, "unkeyed": {}, "keys": %s}'
V3 = ('{"version": 3, "pins": {}, "keys": {}, "unkeyed": {}, "forgotten": 0.0, "concepts": '
      '{"c": {"answer": 1, "charged_by": null, "keys": [], "forgotten_surveys": %s}}}')
KEPT = '{{"k": {{"surveys": {{"s": {}}}, "concepts": {{}}}}}}'  # one key, one survey record
RECORD = ('{"answers": {}, "idempotency_key": null, "submitted": false, "title": null, '
          '"charged": null, "estimated": false, "parameters": null}')


@pytest.mark.parametrize("text, problem", [
    ("not json", "it is not JSON"),
    ("[]", "it holds a JSON list, not an object"),
    ("null", "it holds a JSON NoneType, not an object"),
    ("{}", "it names no store version"),
    ('{"pins": {}, "keys": {}, "unkeyed": {}}', "it names no store version"),
    ('{"version": "2"}', "its version '2' is not a whole number"),
    ('{"version": 0}', "store version 0 never existed"),
    ('{"version": 2}', "'pins' is not an object"),
    ('{"version": 1, "surveys": []}', "store version 1 never existed"),
    ('{"surveys": []}', "'surveys' is not an object"),
    ('{"surveys": {"http://a s": {"answers": {"q": "yes"}}}}',
     "surveys['http://a s'].answers['q'] is 'yes', not an option number"),
    ('{"version": 2, "pins": {}, "unkeyed": {}, "keys": {"k": {"surveys": {"s": {"answers": {}}},'
     ' "concepts": {}}}}', "keys['k'].surveys['s'] has no 'idempotency_key'"),
    ('{"version": 2, "pins": {}, "unkeyed": {}, "keys": {"k": {"surveys": {}, "concepts": '
     '{"c": {"answer": 1}}}}}', "keys['k'].concepts['c'] has no 'charged_by'"),
    ('{"version": 4}', "it was written by a newer ldp-survey (store version 4); upgrade to use it, as "
     "this release would lose what it holds"),
    ('{"pinned_keys": []}', "'pinned_keys' is not an object"),
    ('{"pinned_keys": {"http://a": 5}}', "'pinned_keys'.http://a is 5"),
    ('{"surveys": {"http://a s": []}}', "surveys['http://a s'] is not an object"),
    ('{"surveys": {"http://a s": {"answers": []}}}', "surveys['http://a s'].answers is not an "
     "object"),
    ('{"version": 2, "pins": {"http://a": 5}, "keys": {}, "unkeyed": {}}', "'pins'.http://a is 5"),
    (V2 % '{"k": []}', "keys['k'] is not an object"),
    (V2 % '{"k": {"moved_to": 5}}', "keys['k'].moved_to is 5"),
    (V2 % '{"a": {"moved_to": "b"}, "b": {"surveys": []}}', "keys['b'].surveys is not an object"),
    (V2 % '{"k": {"surveys": {}, "concepts": []}}', "keys['k'].concepts is not an object"),
    (V2 % '{"k": {"surveys": {}, "concepts": {"c": 5}}}', "keys['k'].concepts['c'] is not an "
     "object"),
    (V2 % '{"k": {"surveys": {}, "concepts": {"c": {"answer": true, "charged_by": null}}}}',
     "keys['k'].concepts['c'].answer is True"),
    (V2 % '{"k": {"surveys": {"s": 5}, "concepts": {}}}', "keys['k'].surveys['s'] is not an "
     "object"),
    (V2 % KEPT.format(RECORD.replace("null}", "5}")),
     "keys['k'].surveys['s'].parameters is 5"),
    ('{"version": 2, "pins": {}, "keys": {}, "unkeyed": {"http://a": []}}',
     "unkeyed['http://a'] is not an object"),
    ('{"version": 2, "pins": {}, "keys": {}, "unkeyed": {"http://a": {"s": {}}}}',
     "unkeyed['http://a']['s'].answers is not an object"),
    (V3 % '{}', "concepts['c'].forgotten_surveys is {}"),
    (V3 % '[["k"]]', "concepts['c'].forgotten_surveys is [['k']]"),
    (V3 % '[["k", 5]]', "concepts['c'].forgotten_surveys is [['k', 5]]"),
])
def test_a_damaged_store_is_refused_in_one_line_and_kept(runner, tmp_path, text, problem):
    store = tmp_path / "respondent" / "state.json"
    store.parent.mkdir()
    store.write_text(text)
    with pytest.raises(ValueError, match="cannot be used") as refused:
        LocalState(store)
    assert f": {problem}. Nothing was changed" in str(refused.value)
    result = runner.invoke(main, ["privacy"])
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert f"cannot be used: {problem}. Nothing was changed; moving it aside starts afresh, " \
        "but then this device forgets what it sent, and answering those surveys again would " \
        "spend privacy budget again" in line
    assert store.read_text() == text


def test_a_well_formed_record_is_accepted(tmp_path):
    """The record the damaged cases above spoil, whole: the store reads."""
    store = tmp_path / "state.json"
    store.write_text(V2 % KEPT.format(RECORD))
    assert LocalState(store).surveys("k")["s"]["parameters"] is None
    store.write_text(V3 % '[["k", "s"]]')
    assert LocalState(store).permanent("c")["forgotten_surveys"] == [["k", "s"]]


@pytest.mark.parametrize("reply", [b"[]", json.dumps(
    {"accepted": "\x1b[2J", "answers": {"w1q0": 1, "w1q1": 1}, "replayed": True}).encode()])
def test_a_hostile_reply_cannot_change_what_respond_json_says_was_sent(runner, evil, reply):
    """respond --json reports the body this device posted and the replay the server signalled
    in its header, whatever the reply's body claims (and shows its other values escaped)."""
    evil.reply_to_post = reply
    result = runner.invoke(main, ["respond", "--url", evil.url, "--survey", "S",
                                  "--insecure-http", "--answers", "w1q0=no,w1q1=no", "--yes",
                                  "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    [posted] = evil.posts
    assert {"answers": document["answers"]} == json.loads(posted)
    assert document["replayed"] is False and "\x1b" not in result.stdout
