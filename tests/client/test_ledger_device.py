"""One budget per device (issue 23): the attacks of the review, made with three aggregators that
each hold their own signing key and ask one device the same yes/no trait again and again; a
concept's permanent answer across keys; forgetting an aggregator; the per-aggregator limit; and
migrating real version 2 stores (tests/fixtures/client-state-0.5, written by release 0.5's
client)."""

import base64
import dataclasses
import json
import math
import shutil
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ldpsurvey.cli import main
from ldpsurvey.client import Ceilings, LocalState, fetch_survey, ledger, prepare, submit
from ldpsurvey.shared import parse_definition
from ldpsurvey.shared.mechanisms.randomizer import N
from ldpsurvey.shared.survey.manifest import key_id

from helpers import serving

LN3 = math.log(3)
LIFETIME = 8 * LN3
FIXTURE = Path(__file__).parents[1] / "fixtures" / "client-state-0.5"


class Aggregator:
    """An aggregator with its own signing key, serving every survey in `surveys` (survey id ->
    questions) signed in the format `origin` asks for (None: a manifest from before origins
    were signed), and recording every body posted to it."""

    def __init__(self, seed: int):
        self.key = Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32)
        self.public = self.key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.surveys: dict[str, list] = {}
        self.posts: list = []
        self.origin: str | None = None

    @property
    def key_id(self) -> str:
        return key_id(self.public)

    def manifest(self, survey_id: str) -> bytes:
        survey = parse_definition({"title": survey_id, "release_batch": 1,
                                   "questions": self.surveys[survey_id]})
        signed = {"origin": self.origin} if self.origin else {}  # else as before origins
        return dataclasses.replace(survey, survey_id=survey_id, key_id=self.key_id,
                                   **signed).manifest_bytes()

    def pages(self, path: str) -> bytes | None:
        if path == "/api/key":
            return json.dumps({"public_key": base64.b64encode(self.public).decode()}).encode()
        parts = path.split("/")  # /api/surveys/<id>[/manifest.sig | /status]
        if len(parts) < 4 or parts[3] not in self.surveys:
            return None
        tail = parts[4:]
        if tail == []:
            return self.manifest(parts[3])
        if tail == ["manifest.sig"]:
            return self.key.sign(self.manifest(parts[3]))
        return b'{"status": "open"}' if tail == ["status"] else None

    def handler(self):
        aggregator = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, body: bytes | None, code=200):
                self.send_response(code if body is not None else 404)
                body = body if body is not None else b"{}"
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self.reply(aggregator.pages(self.path))

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                aggregator.posts.append((self.path.split("/")[3], json.loads(body)))
                self.reply(b"{}", 201)

        return Handler


@pytest.fixture
def aggregators():
    """Three aggregators, three signing keys, one researcher."""
    started = [Aggregator(seed) for seed in (1, 2, 3)]
    with ExitStack() as stack:
        for aggregator in started:
            aggregator.url = stack.enter_context(serving(aggregator.handler()))
        yield started


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_CLIENT_DIR", str(tmp_path / "respondent"))
    return CliRunner()


def trait(qid="trait", **extra):
    return [{"id": qid, "text": "Have you ever done it?", "type": "yes_no", "epsilon": LN3,
             **extra}]


def respond(runner, aggregator, survey_id, *options):
    return runner.invoke(main, ["respond", "--url", aggregator.url, "--survey", survey_id,
                                "--insecure-http", "--answers", "trait=yes", "--yes", *options])


def privacy(runner):
    result = runner.invoke(main, ["privacy", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def charged(document) -> float:
    """What the device's ledger charged, summed over every survey of every key."""
    return math.fsum(s["epsilon"] for a in document["aggregators"] for s in a["surveys"])


# --- 1. three keys do not triple the lifetime budget --------------------------------------------

def test_three_keys_asking_one_trait_get_one_lifetime_budget_in_all(runner, aggregators):
    """The review's attack: three aggregators (three keys) ask the same yes/no trait, one survey
    at a time, round robin. Before, each key had its own 8 ln 3: the device sent 24
    randomizations (3x the limit; a majority vote recovers the bit with probability 0.995).
    Now the 9th survey, whichever key asks, is refused as over the device's limit."""
    results = []
    for round_ in range(10):
        for aggregator in aggregators:
            aggregator.surveys[f"r{round_}"] = trait()
            results.append(respond(runner, aggregator, f"r{round_}"))
    assert sum(len(a.posts) for a in aggregators) == 8  # 24 before
    assert [r.exit_code for r in results] == [0] * 8 + [1] * 22  # from the 9th, at every key
    for refused in results[8:]:
        [line] = refused.stderr.splitlines()
        assert "above your lifetime budget of 8.79 for this device, which counts every " \
               "aggregator and key together (--max-lifetime-epsilon)" in line
        assert "Nothing was sent" in line and "Your answer" not in refused.stdout
    document = privacy(runner)
    assert charged(document) == pytest.approx(LIFETIME)
    assert document["device"]["epsilon_spent"] == pytest.approx(LIFETIME)
    assert document["device"]["epsilon_remaining"] == pytest.approx(0)
    assert [a["epsilon_spent"] for a in document["aggregators"]] == \
        [pytest.approx(3 * LN3), pytest.approx(3 * LN3), pytest.approx(2 * LN3)]


def test_a_raised_lifetime_limit_is_the_devices_too(runner, aggregators):
    """--max-lifetime-epsilon 2 ln 3: two surveys in all, at two different keys."""
    for aggregator in aggregators:
        aggregator.surveys["s"] = trait()
    limit = str(2 * LN3 + 1e-9)
    assert [respond(runner, a, "s", "--max-lifetime-epsilon", limit).exit_code
            for a in aggregators] == [0, 0, 1]


# --- 2. the optional limit per aggregator key ---------------------------------------------------

def test_a_limit_per_aggregator_refuses_one_key_and_not_another(runner, aggregators):
    first, second, _ = aggregators
    for index in range(3):
        first.surveys[f"a{index}"] = second.surveys[f"a{index}"] = trait()
    limit = ["--max-aggregator-epsilon", str(2 * LN3 + 1e-9)]
    assert [respond(runner, first, f"a{i}", *limit).exit_code for i in range(3)] == [0, 0, 1]
    refused = respond(runner, first, "a2", *limit)
    [line] = refused.stderr.splitlines()
    assert f"this aggregator (key {first.key_id}) has already received from this device" in line
    assert "above your limit of 2.2 per aggregator (--max-aggregator-epsilon)" in line
    assert respond(runner, second, "a0", *limit).exit_code == 0  # another key: its own limit
    assert respond(runner, first, "a2").exit_code == 0  # without the option: the device's only
    assert len(first.posts) == 3 and len(second.posts) == 1
    document = runner.invoke(main, ["privacy", "--json", *limit]).stdout
    by_key = {a["key_id"]: a for a in json.loads(document)["aggregators"]}
    assert by_key[first.key_id]["epsilon_remaining"] == pytest.approx(0)
    assert by_key[second.key_id]["epsilon_remaining"] == pytest.approx(LN3)
    assert json.loads(document)["device"]["aggregator_limit"] == pytest.approx(2 * LN3)


# --- 3. a concept's permanent answer is the device's --------------------------------------------

def test_a_concepts_permanent_answer_is_the_same_for_every_key(aggregators, tmp_path):
    """Key 1 draws the permanent answer with draws that never keep the truth (No -> Yes);
    keys 2 and 3 then report with draws that always keep what they randomize: they report
    the permanent Yes. Before, each key drew afresh (from the truth, No) and the device was
    charged the permanent layer once per key."""
    state = LocalState(tmp_path / "state.json")
    roomy = Ceilings(5.0, 10.0, LIFETIME)
    reports = []
    for index, aggregator in enumerate(aggregators):
        aggregator.surveys["c"] = trait(concept="trait.ever")
        verified = fetch_survey(aggregator.url, "c", state, roomy)
        draw = (lambda: N - 1) if index == 0 else (lambda: 0)
        submission = prepare(verified, {"trait": 0}, state, draw=draw)
        submit(verified, submission, state)
        reports.append(submission.answers["trait"])
    assert reports == [1, 1, 1]
    records = [state.record(a.key_id, "c") for a in aggregators]
    assert [r["charged"] for r in records] == [pytest.approx(LN3), 0.0, 0.0]  # once per device
    assert [r["disclosed"] for r in records] == [pytest.approx(LN3)] * 3  # each key learned it
    assert ledger.device_spent(state) == pytest.approx(LN3)


def test_a_concept_asked_with_other_settings_is_drawn_and_charged_again(aggregators, tmp_path):
    state = LocalState(tmp_path / "state.json")
    first, second, _ = aggregators
    first.surveys["c"] = trait(concept="trait.ever")
    second.surveys["c"] = trait(concept="trait.ever", epsilon=0.5)
    for aggregator in (first, second):
        verified = fetch_survey(aggregator.url, "c", state, Ceilings(5.0, 10.0, LIFETIME))
        submit(verified, prepare(verified, {"trait": 1}, state), state)
    assert ledger.device_spent(state) == pytest.approx(LN3 + 0.5)
    assert len(state.concepts()) == 2


# --- 4. forgetting gives no budget back ---------------------------------------------------------

def test_forgetting_an_aggregator_does_not_restore_the_budget(runner, aggregators):
    """Spend the device's budget at one key, forget it as the docs suggest, and ask again
    (at that key, re-pinned, and at another): refused. Before, forgetting reset the total."""
    first, second, _ = aggregators
    for index in range(9):
        first.surveys[f"f{index}"] = second.surveys[f"f{index}"] = trait()
    assert [respond(runner, first, f"f{i}").exit_code for i in range(8)] == [0] * 8
    gone = runner.invoke(main, ["privacy", "--forget", first.key_id], input="y\n")
    assert gone.exit_code == 0, gone.output
    for aggregator, survey_id in ((first, "f8"), (second, "f0"), (first, "f0")):
        refused = respond(runner, aggregator, survey_id)
        assert refused.exit_code == 1 and "above your lifetime budget" in refused.stderr
    assert len(first.posts) == 8 and second.posts == []
    assert "stays in this device's total (forgetting gives no budget back)" in gone.stdout
    document = privacy(runner)
    assert [a["surveys"] for a in document["aggregators"]] == [[], []]  # pinned again only
    assert document["device"]["forgotten"] == pytest.approx(LIFETIME)
    table = runner.invoke(main, ["privacy"]).stdout
    assert "(8.79 of it to aggregators since forgotten)" in table


def test_forgetting_keeps_the_concepts_permanent_answer(runner, aggregators, tmp_path):
    state_path = tmp_path / "respondent" / "state.json"
    first, second, _ = aggregators
    first.surveys["c"] = second.surveys["c"] = trait(concept="trait.ever")
    assert respond(runner, first, "c").exit_code == 0
    [concept] = LocalState(state_path).concepts()
    kept = LocalState(state_path).permanent(concept)["answer"]
    runner.invoke(main, ["privacy", "--forget", first.key_id], input="y\n")
    assert LocalState(state_path).permanent(concept) == {
        "answer": kept, "charged_by": "c", "keys": [], "forgotten_surveys": [[first.key_id, "c"]]}
    again = respond(runner, second, "c")
    assert again.exit_code == 0 and "you answered this in an earlier survey" in again.stdout
    document = privacy(runner)
    assert document["device"]["epsilon_spent"] == pytest.approx(LN3)  # charged once in all
    assert document["aggregators"][0]["epsilon_spent"] == pytest.approx(LN3)


def test_a_concept_survey_sent_before_forgetting_is_not_answered_twice(runner, aggregators,
                                                                      tmp_path):
    """A survey reporting a concept, sent, then its key forgotten: answering it again would
    cost nothing (the permanent answer is kept) and count the device twice in its n. The
    confirmation says it is refused; it is, at that key (re-pinned), in one line, and nothing
    is posted; another survey of the key reporting the concept is answered. Before, the
    second answer went through."""
    first = aggregators[0]
    first.surveys["c"] = first.surveys["d"] = trait(concept="trait.ever")
    first.surveys["plain"] = trait()
    assert respond(runner, first, "c").exit_code == 0
    assert respond(runner, first, "plain").exit_code == 0
    gone = runner.invoke(main, ["privacy", "--forget", first.key_id], input="y\n")
    assert gone.exit_code == 0, gone.output
    assert "refuses to answer a survey that reports a concept again" in " ".join(
        gone.stdout.split())
    [concept] = LocalState(tmp_path / "respondent" / "state.json").concepts()
    assert LocalState(tmp_path / "respondent" / "state.json").permanent(concept)[
        "forgotten_surveys"] == [[first.key_id, "c"], [first.key_id, "plain"]]
    again = respond(runner, first, "c")
    assert again.exit_code == 1 and len(first.posts) == 2
    [line] = again.stderr.splitlines()
    assert "would count you twice in its results. Nothing was sent." in line
    assert respond(runner, first, "d").exit_code == 0  # another survey: counted once in its n
    assert [survey_id for survey_id, _ in first.posts] == ["c", "plain", "d"]


def test_a_device_that_deletes_its_store_is_counted_again(runner, aggregators, tmp_path):
    """What the threat model says no design on the device can hold: a device that deletes its
    own store (or another device, or a browser's fresh profile) answers a concept survey again,
    with a permanent answer drawn afresh, and the aggregator counts both. Only invitation
    tokens (one per invitee, refused when spent) hold a person to one response."""
    first = aggregators[0]
    first.surveys["c"] = trait(concept="trait.ever")
    assert respond(runner, first, "c").exit_code == 0
    (tmp_path / "respondent" / "state.json").unlink()
    assert respond(runner, first, "c").exit_code == 0
    assert [survey_id for survey_id, _ in first.posts] == ["c", "c"]


# --- 5. the signed origin -----------------------------------------------------------------------

def test_a_manifest_without_origin_reached_at_two_hosts_is_one_memory(runner, aggregators):
    """A survey signed before origins were (format /4 and earlier) has none to check: reached
    at 127.0.0.1 and at localhost, it is one record under its key, sent once."""
    aggregator = aggregators[0]
    aggregator.surveys["o"] = trait()
    assert respond(runner, aggregator, "o").exit_code == 0
    aggregator.url = aggregator.url.replace("127.0.0.1", "localhost")
    again = respond(runner, aggregator, "o")
    assert again.exit_code == 0 and "You already sent this survey" in again.stdout
    [entry] = privacy(runner)["aggregators"]
    assert len(entry["urls"]) == 2 and len(entry["surveys"]) == 1
    assert aggregator.posts[0] == aggregator.posts[1]


def test_a_manifest_signed_for_another_origin_is_refused_in_one_line(runner, aggregators):
    aggregator = aggregators[0]
    aggregator.surveys["o"] = trait()
    aggregator.origin = aggregator.url.replace("127.0.0.1", "localhost")
    refused = respond(runner, aggregator, "o")
    assert refused.exit_code == 1 and not aggregator.posts
    [line] = refused.stderr.splitlines()
    assert line == (f"ldp-survey: error: not answering: the survey is signed for "
                    f"{aggregator.origin} but was fetched from {aggregator.url}: answer it at "
                    f"{aggregator.origin}; nothing was sent")
    assert privacy(runner)["aggregators"] == []  # nothing pinned
    aggregator.origin = aggregator.url  # signed for where it is reached: answered
    assert respond(runner, aggregator, "o").exit_code == 0 and len(aggregator.posts) == 1


# --- 6. migrating real version 2 stores ---------------------------------------------------------

def test_a_version_2_store_migrates_to_one_device_ledger(tmp_path):
    """The store release 0.5's client wrote after answering (see the fixture's README): keys 1
    and 2 each sent a survey with concept trait.ever (each drew and was charged its own
    permanent answer), key 3 prepared one and did not send it; key 1 also sent a plain survey.
    """
    path = tmp_path / "state.json"
    shutil.copy(FIXTURE / "state.json", path)
    old = json.loads(path.read_text())
    assert old["version"] == 2
    kids = sorted(old["keys"])
    state = LocalState(path)
    written = json.loads(path.read_text())
    assert written["version"] == 3 and written["forgotten"] == 0.0
    assert written["pins"] == old["pins"]
    [(concept, permanent)] = written["concepts"].items()
    draws = {kid: old["keys"][kid]["concepts"][concept] for kid in kids}
    charged_keys = [kid for kid in kids if draws[kid]["charged_by"] is not None]
    assert len(charged_keys) == 2
    # the charged draw of the smallest key id is kept; one draw was never charged, so the
    # concept is charged again when next sent (the safe side)
    assert permanent == {"answer": draws[charged_keys[0]]["answer"], "charged_by": None,
                         "keys": charged_keys}
    assert permanent["answer"] == 0 != draws[charged_keys[1]]["answer"]  # see the README
    for kid in kids:
        for survey_id, record in old["keys"][kid]["surveys"].items():
            assert state.record(kid, survey_id) == {**record, "disclosed": record["charged"]}
    spent = [r["charged"] or 0.0 for kid in kids for r in old["keys"][kid]["surveys"].values()]
    assert ledger.device_spent(state) == pytest.approx(math.fsum(spent))
    assert ledger.device_spent(state) == pytest.approx(3 * LN3)


@pytest.mark.parametrize("third_charged", [True, False])
def test_of_draws_under_several_keys_the_charged_one_of_the_smallest_key_is_kept(third_charged):
    def entry(answer, charged_by):
        return {"surveys": {}, "concepts": {"k": {"answer": answer, "charged_by": charged_by}}}

    old = {"version": 2, "pins": {}, "unkeyed": {}, "keys": {
        "c": entry(2, "s3" if third_charged else None), "b": entry(1, "s2"), "a": entry(0, None),
        "z": {"moved_to": "b"}}}
    from ldpsurvey.client.state import migrate_2

    migrated = migrate_2(old)
    keys = ["b", "c"] if third_charged else ["b"]
    assert migrated["concepts"] == {"k": {"answer": 1, "keys": keys, "charged_by": None}}
    old["keys"]["a"]["concepts"]["k"]["charged_by"] = "s1"  # every draw charged: it stays paid
    assert migrate_2(old)["concepts"]["k"] == (
        {"answer": 0, "keys": ["a", "b", "c"], "charged_by": "s1"} if third_charged else
        {"answer": 0, "keys": ["a", "b"], "charged_by": None})
    assert migrated["keys"]["z"] == {"moved_to": "b"}


def test_version_1_migrates_through_version_2(tmp_path):
    """A 0.2 store (no version) is read and written as version 3."""
    path = tmp_path / "state.json"
    shutil.copy(Path(__file__).parents[1] / "fixtures" / "client-state-0.2" / "state.json", path)
    state = LocalState(path)
    written = json.loads(path.read_text())
    assert written["version"] == 3 and written["concepts"] == {} and written["forgotten"] == 0.0
    assert all("disclosed" in record for entry in written["keys"].values()
               for record in entry["surveys"].values())
    assert ledger.device_spent(state) > 0
