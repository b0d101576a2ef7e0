"""The respondent's memory and lifetime ledger, per aggregator signing key, against a real
aggregator: URL spellings, accepted keys, concepts reused across surveys, and migrating
version 1 (the migration of a real 0.2 state file: test_client_migration.py)."""

import base64
import json
import math

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ldpsurvey.client import (
    Ceilings,
    LocalState,
    OverBudget,
    TrustError,
    fetch_survey,
    ledger,
    prepare,
    submit,
    unanswered,
)
from ldpsurvey.client.state import LEGACY_CHARGE, migrate
from ldpsurvey.client.urls import origin, parse_link
from ldpsurvey.shared.mechanisms.randomizer import N
from ldpsurvey.shared.survey.manifest import key_id

from helpers import released_n

LN3 = math.log(3)
ROOMY = Ceilings(per_question=5.0, total=10.0, lifetime=100.0)


def smoking(alpha=0.5, wave="Wave 1"):
    return {"title": wave, "release_batch": 1, "questions": [
        {"id": "smoked", "text": "Have you ever smoked?", "type": "yes_no", "alpha": alpha,
         "concept": "smoking.ever"},
        {"id": "slept", "text": "Slept well last night?", "type": "yes_no", "alpha": 0.25}]}


@pytest.fixture
def state(tmp_path):
    return LocalState(tmp_path / "client" / "state.json")


def create(client, auth, definition):
    response = client.post("/api/surveys", json=definition, headers=auth)
    assert response.status_code == 201, response.json
    return response.json["survey_id"]


def count(client, auth, survey_id):
    return released_n(client, auth, survey_id)


@pytest.mark.parametrize("url, normalized", [
    ("http://LoCaLhost:80/", "http://localhost"),
    ("HTTPS://Survey.Example.ORG:443//", "https://survey.example.org"),
    ("https://survey.example.org:8443/prefix/", "https://survey.example.org:8443/prefix"),
    ("https://b\u00fccher.example", "https://xn--bcher-kva.example"),          # IDNA
    ("https://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54", "https://localhost"),  # fullwidth
    ("http://someone:secret@[::1]:8000/?q#f", "http://[::1]:8000"),
    ("http://localhost./", "http://localhost"),                       # the DNS root's dot
    ("http://LOCALHOST.:80", "http://localhost"),
    ("http://127.1", "http://127.0.0.1"),                             # inet_aton's short forms
    ("http://127.0.1", "http://127.0.0.1"),
    ("http://2130706433", "http://127.0.0.1"),                        # one decimal number
    ("http://0x7f000001", "http://127.0.0.1"),                        # hexadecimal
    ("http://0x7F.0.0.1", "http://127.0.0.1"),
    ("http://0177.0.0.01", "http://127.0.0.1"),                       # octal
    ("http://017700000001:8000/", "http://127.0.0.1:8000"),
    ("http://[0:0:0:0:0:0:0:1]", "http://[::1]"),                     # long IPv6
    ("http://[0000::0001]:8000", "http://[::1]:8000"),
    ("http://[::FFFF:127.0.0.1]", "http://127.0.0.1"),                # IPv4-mapped IPv6
    ("http://[::ffff:7f00:1]", "http://127.0.0.1"),
    ("http://%6C%6F%63%61%6C%68%6F%73%74", "http://localhost"),       # percent-encoded
    ("http://127.0.0.%31", "http://127.0.0.1"),
    ("https://a.example/x/./y/../z/", "https://a.example/x/z"),       # dot segments
    ("https://a.example/../..", "https://a.example"),
    ("https://a.example/%2e/x", "https://a.example/%2e/x"),           # a segment, not a dot
])
def test_every_spelling_of_an_address_is_one_origin(url, normalized):
    assert origin(url) == normalized


@pytest.mark.parametrize("url", ["ftp://host", "host.example", "http://:80", "http://h:99999"])
def test_what_is_not_an_http_address_is_refused(url):
    with pytest.raises(ValueError):
        origin(url)


def test_an_invitation_link_gives_survey_and_token():
    link = parse_link("https://Host.example:443/prefix/s/abc-123#t=TOKEN_abc")
    assert (link.base, link.survey_id, link.token) == ("https://host.example/prefix", "abc-123",
                                                       "TOKEN_abc")
    assert parse_link("https://host.example/").survey_id is None


def test_another_origin_than_the_signed_one_is_refused(live_server, client, auth, state):
    """localhost and 127.0.0.1 are two origins: the survey is signed for the one its server
    was published at, and the other is refused in one line naming both, before anything is
    pinned or asked. (A manifest signed before origins were, reached at two hosts, is one
    memory: test_ledger_device.py.)"""
    survey_id = create(client, auth, smoking())
    first = fetch_survey(live_server, survey_id, state, ROOMY)
    submit(first, prepare(first, {"smoked": 1, "slept": 0}, state), state)
    other = live_server.replace("127.0.0.1", "LOCALHOST") + "/"
    with pytest.raises(TrustError) as refused:
        fetch_survey(other, survey_id, state, ROOMY)
    assert str(refused.value) == (
        f"the survey is signed for {live_server} but was fetched from {origin(other)}: answer "
        f"it at {live_server}; nothing was sent")
    assert state.pinned_key(other) is None and count(client, auth, survey_id) == 1
    again = fetch_survey(live_server.replace("http", "HTTP") + "/", survey_id, state, ROOMY)
    assert unanswered(again, state) == []  # another spelling of the same origin: accepted


def test_nothing_is_charged_for_a_survey_prepared_but_never_sent(live_server, client, auth,
                                                                 state):
    survey_id = create(client, auth, smoking())
    verified = fetch_survey(live_server, survey_id, state, ROOMY)
    prepare(verified, {"smoked": 1, "slept": 1}, state)
    assert ledger.spent(state, verified.key_id) == 0
    assert ledger.summary(state, 10.0)["aggregators"][0]["surveys"] == []


def test_a_send_never_acknowledged_still_counts(live_server, client, auth, state):
    """The charge is made before the first attempt: a closed survey refuses the POST, and the
    ledger still holds the survey, as not acknowledged."""
    survey_id = create(client, auth, smoking())
    verified = fetch_survey(live_server, survey_id, state, ROOMY)
    submission = prepare(verified, {"smoked": 1, "slept": 1}, state)
    client.post(f"/api/surveys/{survey_id}/close", headers=auth)
    with pytest.raises(Exception, match="closed"):
        submit(verified, submission, state)
    [entry] = ledger.summary(state, 10.0)["aggregators"][0]["surveys"]
    assert entry == {"survey_id": survey_id, "title": "Wave 1",
                     "epsilon": verified.total_epsilon, "disclosed": verified.total_epsilon,
                     "sent": False}


def test_a_concept_is_charged_once_and_reported_afresh(live_server, client, auth, state):
    """Two surveys with the same concept and mechanism: the second asks no true answer for it,
    charges only its other question, and reports a fresh randomization of the one permanent
    answer (draws that always keep the answer: the report is the permanent answer; draws that
    never do: the uniform layer's last option)."""
    first_id, second_id = create(client, auth, smoking()), create(client, auth, smoking(wave="2"))
    first = fetch_survey(live_server, first_id, state, ROOMY)
    assert ledger.concept_status(first, state) == {"smoked": "new"}
    submit(first, prepare(first, {"smoked": 0, "slept": 0}, state, draw=lambda: 0), state)
    concept = ledger.concept_key(first.survey.question("smoked"))
    assert state.permanent(concept) == {"answer": 0, "charged_by": first_id,
                                        "keys": [first.key_id]}

    second = fetch_survey(live_server, second_id, state, ROOMY)
    assert ledger.concept_status(second, state) == {"smoked": "reused"}
    assert unanswered(second, state) == ["slept"]
    assert ledger.charge_for(second, state).device == pytest.approx(second.epsilon["slept"])
    report = prepare(second, {"slept": 1}, state, draw=lambda: N - 1)  # no true "smoked" given
    assert report.answers == {"smoked": 1, "slept": 1}
    submit(second, report, state)
    spent = ledger.summary(state, 100.0)["aggregators"][0]["surveys"]
    assert [s["epsilon"] for s in spent if s["survey_id"] == second_id] == \
        [pytest.approx(second.epsilon["slept"])]
    assert ledger.spent(state, first.key_id) == pytest.approx(
        first.total_epsilon + second.epsilon["slept"])


def test_a_concept_draws_only_from_the_randomness_given(live_server, client, auth, state):
    """The permanent answer is drawn from the `draw` passed to prepare, as every other report:
    two draws each for the permanent layer, its instantaneous layer and the plain question,
    none from elsewhere; draws that never keep the answer give the uniform layer's last
    option, permanently."""
    first = fetch_survey(live_server, create(client, auth, smoking()), state, ROOMY)
    calls = []

    def never_keep():
        calls.append(N - 1)
        return N - 1

    report = prepare(first, {"smoked": 0, "slept": 0}, state, draw=never_keep)
    assert len(calls) == 6 and report.answers == {"smoked": 1, "slept": 1}
    concept = ledger.concept_key(first.survey.question("smoked"))
    assert state.permanent(concept) == {"answer": 1, "charged_by": None, "keys": []}


def test_a_changed_mechanism_draws_afresh_and_charges_again(live_server, client, auth, state):
    first_id, changed_id = create(client, auth, smoking()), create(client, auth, smoking(0.6))
    first = fetch_survey(live_server, first_id, state, ROOMY)
    submit(first, prepare(first, {"smoked": 1, "slept": 0}, state), state)
    changed = fetch_survey(live_server, changed_id, state, ROOMY)
    assert ledger.concept_status(changed, state) == {"smoked": "redrawn"}
    assert unanswered(changed, state) == ["smoked", "slept"]
    with pytest.raises(ValueError, match="'smoked' needs an answer"):
        prepare(changed, {"slept": 1}, state)
    assert ledger.charge_for(changed, state).device == pytest.approx(changed.total_epsilon)
    submit(changed, prepare(changed, {"smoked": 1, "slept": 1}, state), state)
    assert ledger.spent(state, first.key_id) == pytest.approx(first.total_epsilon +
                                                              changed.total_epsilon)


def test_the_lifetime_budget_refuses_before_any_question(live_server, client, auth, state):
    three = {"title": "Three at ln 3", "release_batch": 1, "questions": [
        {"id": f"q{i}", "text": f"Question {i}?", "type": "yes_no", "epsilon": LN3}
        for i in range(3)]}
    for _ in range(2):
        verified = fetch_survey(live_server, create(client, auth, three), state)
        submit(verified, prepare(verified, {f"q{i}": 1 for i in range(3)}, state), state)
    third = create(client, auth, three)
    with pytest.raises(OverBudget, match=r"above your lifetime budget of 8\.79"):
        fetch_survey(live_server, third, state)
    assert count(client, auth, third) == 0


def test_accepting_a_new_key_moves_what_was_kept(live_server, client, auth, state):
    """An origin pinned to an old key: the respondent accepts the served key with --public-key;
    the old key's records move to it (the old id forwards), so the survey is not randomized
    again and the budget spent stays spent."""
    survey_id = create(client, auth, smoking())
    served = base64.b64decode(client.get("/api/key").json["public_key"])
    old = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    state.pin_key(live_server, old)
    record = {**state.record(key_id(old), survey_id), "answers": {"smoked": 1, "slept": 0},
              "idempotency_key": "kept-from-the-old-key", "charged": 1.5, "disclosed": 1.5,
              "title": "Wave 1"}
    state.remember(key_id(old), survey_id, record)
    verified = fetch_survey(live_server, survey_id, state, ROOMY, public_key=served)
    assert verified.key_id == key_id(served) and state.resolve(key_id(old)) == key_id(served)
    again = prepare(verified, {}, state)
    assert (again.answers, again.idempotency_key) == (record["answers"], "kept-from-the-old-key")
    assert ledger.spent(state, key_id(served)) == 1.5
    assert state.key_ids() == [key_id(served)]


def test_a_key_that_does_not_verify_is_not_pinned(live_server, client, auth, state):
    survey_id = create(client, auth, smoking())
    other = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    with pytest.raises(Exception, match="signature does not verify"):
        fetch_survey(live_server, survey_id, state, ROOMY, public_key=other)
    assert state.pinned_key(live_server) is None


def test_version_1_answers_without_a_pin_join_the_key_the_origin_presents():
    memo = {"answers": {"q": 1}, "idempotency_key": "k" * 16, "submitted": True}
    twice = migrate({"pinned_keys": {"http://a.example": base64.b64encode(b"k" * 32).decode()},
                     "surveys": {"http://A.example:80 s1": memo, "http://a.example s1": memo,
                                 "https://b.example/ s2": memo}})
    [entry] = twice["keys"].values()
    assert entry["surveys"]["s1"]["charged"] == 2 * LEGACY_CHARGE  # answered twice, charged twice
    assert twice["unkeyed"] == {"https://b.example": {"s2": {
        **memo, "title": None, "charged": LEGACY_CHARGE, "disclosed": LEGACY_CHARGE,
        "estimated": True}}}


def test_a_store_from_a_newer_release_is_refused_not_overwritten(tmp_path):
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"version": 4, "whatever": "a newer release keeps"}))
    with pytest.raises(ValueError, match="written by a newer ldp-survey"):
        LocalState(path)
    assert json.loads(path.read_text())["version"] == 4
