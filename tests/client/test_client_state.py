"""The respondent's local store (client/state.py) through its public methods: what a key change
moves, what forgetting deletes, how records of one survey merge, the edge cases of migrating a
0.2 store, and that a transaction's changes are its own until it ends. Found missing by the
mutation run (tests/mutation.sh state, issue 18)."""

import base64
import json
import os
import threading

import pytest

from ldpsurvey.client import LocalState
from ldpsurvey.client.state import LEGACY_CHARGE, merge_records, new_record
from ldpsurvey.shared.survey.manifest import key_id

OLD_KEY, NEW_KEY, OTHER_KEY = bytes(32), bytes(range(32)), bytes(range(1, 33))
OLD, NEW, OTHER = key_id(OLD_KEY), key_id(NEW_KEY), key_id(OTHER_KEY)
SITE, MIRROR, ELSEWHERE = "http://site.example", "http://mirror.example", "http://else.example"


def sent(answers, charged, **extra):
    return {**new_record(), "answers": answers, "idempotency_key": "k", "submitted": True,
            "charged": charged, **extra}


def unsent(answers, charged=None, **extra):
    return {**new_record(), "answers": answers, "charged": charged, **extra}


@pytest.fixture
def state(tmp_path):
    return LocalState(tmp_path / "respondent" / "state.json")


# --- one record for two of the same survey -----------------------------------------------------

def test_the_acknowledged_record_is_kept_whichever_comes_first():
    for first, second in ((sent({"q": 1}, 0.5), unsent({"q": 0}, 0.25)),
                          (unsent({"q": 0}, 0.25), sent({"q": 1}, 0.5))):
        merged = merge_records(first, second)
        assert merged["answers"] == {"q": 1} and merged["submitted"] is True
        assert merged["charged"] == 0.75  # both were sent: both are charged


@pytest.mark.parametrize("make", [sent, unsent])
def test_of_two_alike_records_the_first_is_kept(make):
    assert merge_records(make({"q": 1}, 0.5), make({"q": 0}, 0.5))["answers"] == {"q": 1}


def test_charges_add_up_and_none_stays_none():
    assert merge_records(unsent({}), unsent({}))["charged"] is None  # neither was sent
    assert merge_records(unsent({}), unsent({}, 0.5))["charged"] == 0.5
    assert merge_records(None, unsent({}, 0.5)) == unsent({}, 0.5)


@pytest.mark.parametrize("first, second, expected", [
    (True, False, True), (False, True, True), (False, False, False)])
def test_a_merged_charge_is_estimated_if_either_was(first, second, expected):
    merged = merge_records(unsent({}, 1.0, estimated=first), unsent({}, 1.0, estimated=second))
    assert merged["estimated"] is expected


# --- a key change ------------------------------------------------------------------------------

def test_pinning_the_same_key_again_moves_nothing_and_writes_nothing(state):
    assert state.pin_key(SITE, NEW_KEY) is None
    state.remember(NEW, "s", sent({"q": 1}, 0.5))
    before = os.stat(state.path)
    assert state.pin_key(SITE.upper(), NEW_KEY) is None
    after = os.stat(state.path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert state.resolve(NEW) == NEW and state.record(NEW, "s")["answers"] == {"q": 1}
    assert state.key_ids() == [NEW]


def test_an_accepted_new_key_takes_over_records_and_concepts(state):
    state.pin_key(SITE, OLD_KEY)
    state.remember(OLD, "both", sent({"q": 1}, 0.5))
    state.remember(OLD, "old only", unsent({"q": 0}))
    state.keep_permanent("shared", {"answer": 1, "charged_by": "both", "keys": [OLD, NEW]})
    state.keep_permanent("old concept", {"answer": 0, "charged_by": "both", "keys": [OLD]})
    state.pin_key(ELSEWHERE, NEW_KEY)  # the new key, already with records of its own
    state.remember(NEW, "both", unsent({"q": 0}, 0.25))

    assert state.pin_key(SITE, NEW_KEY) == OLD
    assert state.resolve(OLD) == NEW and state.key_ids() == [NEW]
    merged = state.record(OLD, "both")  # read through the old id
    assert merged["answers"] == {"q": 1} and merged["charged"] == 0.75
    assert state.record(NEW, "old only")["answers"] == {"q": 0}
    assert sorted(state.concepts()) == ["old concept", "shared"]  # the device's, not a key's
    assert state.permanent("shared") == {"answer": 1, "charged_by": "both", "keys": [NEW]}
    assert state.permanent("old concept") == {"answer": 0, "charged_by": "both", "keys": [NEW]}
    assert state.urls(OLD) == state.urls(NEW) == [ELSEWHERE, SITE]


def test_a_key_pinned_before_anything_was_kept_can_be_replaced(tmp_path):
    """A 0.2 store pinned keys without memos; accepting a new key there moves an empty entry."""
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"pinned_keys": {SITE: base64.b64encode(OLD_KEY).decode()}}))
    state = LocalState(path)
    assert state.pinned_key(SITE) == OLD_KEY and state.key_ids() == []
    assert state.pin_key(SITE, NEW_KEY) == OLD
    assert state.resolve(OLD) == NEW and state.surveys(NEW) == {}


def test_a_key_with_nothing_kept_reads_as_empty(state):
    assert state.surveys(OTHER) == {} and state.concepts() == []
    assert state.permanent("c") is None and state.record(OTHER, "s") == new_record()
    assert state.urls(OTHER) == [] and state.resolve(OTHER) == OTHER


# --- forgetting ----------------------------------------------------------------------------------

def test_forget_deletes_one_keys_memory_and_keeps_what_it_was_charged(state):
    state.pin_key(SITE, OLD_KEY)
    state.remember(OLD, "s", sent({"q": 1}, 0.5))
    state.pin_key(SITE, NEW_KEY)  # OLD now forwards to NEW
    state.pin_key(MIRROR, NEW_KEY)
    state.keep_permanent("c", {"answer": 1, "charged_by": "s", "keys": [NEW, OTHER]})
    state.pin_key(ELSEWHERE, OTHER_KEY)
    state.remember(OTHER, "t", sent({"q": 0}, 0.25))
    assert state.forgotten() == 0.0

    state.forget(OLD)  # through the id that moved: the memory it moved to
    assert state.key_ids() == [OTHER] and state.resolve(OLD) == OLD
    assert state.record(NEW, "s") == new_record()
    assert state.forgotten() == 0.5  # still spent: forgetting gives no budget back
    assert state.permanent("c") == {"answer": 1, "charged_by": "s", "keys": [OTHER],
                                    "forgotten_surveys": [[NEW, "s"]]}
    assert state.pinned_key(SITE) is None and state.pinned_key(MIRROR) is None
    assert state.pinned_key(ELSEWHERE) == OTHER_KEY
    assert state.record(OTHER, "t")["answers"] == {"q": 0}
    assert set(json.loads(state.path.read_text())["keys"]) == {OTHER}


# --- migrating a 0.2 store -----------------------------------------------------------------------

def write_v1(path, pinned=None, surveys=None):
    old = {}
    if pinned is not None:
        old["pinned_keys"] = {url: base64.b64encode(key).decode() for url, key in pinned.items()}
    if surveys is not None:
        old["surveys"] = surveys
    path.write_text(json.dumps(old))
    return LocalState(path)


def test_a_memo_waits_for_its_origins_key_and_then_joins_its_records(tmp_path):
    memo = {"answers": {"q": 1}, "idempotency_key": "k", "submitted": True}
    state = write_v1(tmp_path / "state.json", surveys={f"{SITE}/ s": memo, f"{MIRROR} s": {}})
    assert state.unkeyed_origins() == [MIRROR, SITE] and state.key_ids() == []
    state.pin_key(ELSEWHERE, NEW_KEY)
    state.remember(NEW, "s", unsent({"q": 0}, 0.25))
    assert state.pin_key(SITE, NEW_KEY) is None
    assert state.unkeyed_origins() == [MIRROR]
    merged = state.record(NEW, "s")
    assert merged["answers"] == {"q": 1} and merged["charged"] == LEGACY_CHARGE + 0.25
    assert merged["estimated"] is True


def test_a_memo_is_split_from_its_url_at_the_last_space(tmp_path):
    """0.2 named a memo "<URL as typed> <survey id>"; a survey id has no space, a URL may."""
    state = write_v1(tmp_path / "state.json", surveys={f"{SITE}/a b s": {"answers": {"q": 1}}})
    assert state.unkeyed_origins() == [f"{SITE}/a b"]
    state.pin_key(f"{SITE}/a b", NEW_KEY)
    assert list(state.surveys(NEW)) == ["s"]


def test_a_memo_without_answers_and_a_store_without_pins_migrate(tmp_path):
    state = write_v1(tmp_path / "state.json", surveys={f"{SITE} s": {"idempotency_key": "k"}})
    state.pin_key(SITE, NEW_KEY)
    assert state.record(NEW, "s") == {**new_record(), "idempotency_key": "k"}


def test_each_memo_goes_to_the_key_pinned_for_its_own_spelling(tmp_path):
    """Two spellings of one origin pinned with different keys (0.2 kept them apart)."""
    memo = {"answers": {"q": 1}, "idempotency_key": "k", "submitted": True}
    state = write_v1(tmp_path / "state.json",
                     pinned={SITE: OLD_KEY, SITE.upper(): NEW_KEY},
                     surveys={f"{SITE} a": memo, f"{SITE.upper()} b": memo})
    assert list(state.surveys(OLD)) == ["a"] and list(state.surveys(NEW)) == ["b"]
    assert state.pinned_key(SITE) == OLD_KEY  # the first spelling's key is trusted


# --- transactions --------------------------------------------------------------------------------

def test_a_transactions_changes_are_seen_inside_it_and_written_when_it_ends(state):
    record = sent({"q": 1}, 0.5)
    with state.transaction():
        state.remember(NEW, "s", record)
        assert state.record(NEW, "s") == record  # its working copy
        assert LocalState(state.path).record(NEW, "s") == new_record()  # not yet written
    assert LocalState(state.path).record(NEW, "s") == record


def test_a_transaction_that_changes_nothing_does_not_write(state):
    state.pin_key(SITE, NEW_KEY)
    before = os.stat(state.path)
    with state.transaction():
        state.record(NEW, "s")
    after = os.stat(state.path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_opening_the_store_while_another_object_holds_it_does_not_wait(state):
    """Only a version 1 store is written when opened: opening waits for no lock (one thread
    may hold a transaction and open the store again)."""
    state.pin_key(SITE, NEW_KEY)
    opened = []
    with state.transaction():
        opener = threading.Thread(target=lambda: opened.append(LocalState(state.path)))
        opener.start()
        opener.join(timeout=10)
        assert opened and opened[0].pinned_key(SITE) == NEW_KEY
