"""The respondent's small local store: the key pinned at each aggregator origin, and per
aggregator signing key what this device sent it.

One JSON file in the user data folder, mode 0600, replaced atomically on every write. It
never holds a true answer: only randomized answers, which were or will be sent.

Version 2 (this release):

    {"version": 2,
     "pins":    {origin: base64 public key},       the key trusted at each origin (urls.origin)
     "keys":    {key id: {"surveys": {survey id: record},
                          "concepts": {concept key: {"answer": option, "charged_by": survey id
                                                                              or null}}}
                 | {"moved_to": key id}},          a key replaced by one the respondent accepted
     "unkeyed": {origin: {survey id: record}}}     migrated answers whose key is not known yet

A record is {"answers": {question id: randomized option}, "idempotency_key", "submitted" (the
server acknowledged it), "title", "charged" (the epsilon the ledger charged, null until the
first send attempt), "estimated" (charged is an upper bound, for a survey sent before the
ledger existed)}. Keying by signing key, not URL, makes every spelling of an aggregator's
address, and every host serving its key, one memory.

Version 1 (release 0.2 and before) had {"pinned_keys": {URL as typed: key}, "surveys":
{"<URL> <survey id>": {"answers", "idempotency_key", "submitted"}}}; it is migrated on load
(see `migrate`), so a survey answered then is never randomized again.
"""

import base64
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ldpsurvey.shared.manifest import key_id

from .ceilings import DEFAULT_MAX_TOTAL_EPSILON
from .urls import origin

VERSION = 2
# What a survey sent before the ledger existed is charged until it is seen again: the most the
# client sent without a raised --max-total-epsilon (the web form could not send more).
LEGACY_CHARGE = DEFAULT_MAX_TOTAL_EPSILON


def default_path() -> Path:
    """$LDP_SURVEY_CLIENT_DIR, else the platform's per-user data folder, + /state.json."""
    if "LDP_SURVEY_CLIENT_DIR" in os.environ:
        base = Path(os.environ["LDP_SURVEY_CLIENT_DIR"])
    elif sys.platform == "win32":
        base = Path(os.environ.get("APPDATA", Path.home())) / "ldp-survey"
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support" / "ldp-survey"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
        base = base / "ldp-survey"
    return base / "state.json"


def new_record() -> dict[str, Any]:
    return {"answers": {}, "idempotency_key": None, "submitted": False, "title": None,
            "charged": None, "estimated": False}


def merge_records(kept: dict[str, Any] | None, other: dict[str, Any]) -> dict[str, Any]:
    """One record for two of the same survey: the acknowledged one's answers (else the first),
    and the sum of both charges (each was sent)."""
    if kept is None:
        return other
    if other["submitted"] and not kept["submitted"]:
        kept, other = other, kept
    charges = [r["charged"] for r in (kept, other) if r["charged"] is not None]
    return {**kept, "charged": sum(charges) if charges else None,
            "estimated": kept["estimated"] or other["estimated"]}


def migrate(old: dict[str, Any]) -> dict[str, Any]:
    """Version 1 -> 2. Pins move to their normalized origin; each memo goes to the key that
    was pinned for its URL (or for another spelling of the same origin), else waits under
    "unkeyed" for the key its origin is next verified with. A memo the server acknowledged is
    charged LEGACY_CHARGE, marked estimated; the same survey answered through two spellings
    becomes one record charged for both sends."""
    state = empty()
    pinned = old.get("pinned_keys", {})
    for url, key in pinned.items():
        state["pins"].setdefault(origin(url), key)
    for name, memo in old.get("surveys", {}).items():
        url, _, survey_id = name.rpartition(" ")
        sent = bool(memo.get("submitted"))
        record = {**new_record(), "answers": dict(memo.get("answers", {})),
                  "idempotency_key": memo.get("idempotency_key"), "submitted": sent,
                  "charged": LEGACY_CHARGE if sent else None, "estimated": sent}
        key = pinned.get(url) or state["pins"].get(origin(url))
        if key:
            bucket = key_entry(state, key_id(base64.b64decode(key)))["surveys"]
        else:
            bucket = state["unkeyed"].setdefault(origin(url), {})
        bucket[survey_id] = merge_records(bucket.get(survey_id), record)
    return state


def empty() -> dict[str, Any]:
    return {"version": VERSION, "pins": {}, "keys": {}, "unkeyed": {}}


def key_entry(state: dict[str, Any], kid: str) -> dict[str, Any]:
    return state["keys"].setdefault(kid, {"surveys": {}, "concepts": {}})


class LocalState:
    """Pins per origin; per signing key, the records of surveys and the permanent answers of
    concepts. Every change is written at once."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path else default_path()
        try:
            data: dict[str, Any] = json.loads(self.path.read_text())
        except FileNotFoundError:
            data = empty()
        version = data.get("version", 1)
        if version not in (1, VERSION):
            raise ValueError(f"{self.path} was written by a newer ldp-survey (store version "
                             f"{version}); upgrade to use it, as this release would lose what "
                             "it holds")
        self._data = data if version == VERSION else migrate(data)
        if version == 1 and self.path.exists():
            self._save()

    # --- pins --------------------------------------------------------------------------------

    def pinned_key(self, aggregator: str) -> bytes | None:
        """The public key pinned for this aggregator's origin, if any."""
        pinned = self._data["pins"].get(origin(aggregator))
        return base64.b64decode(pinned) if pinned else None

    def pin_key(self, aggregator: str, public_key: bytes) -> str | None:
        """Trust `public_key` at this origin. If another key was pinned there, everything kept
        for that key moves to this one (and the old id forwards here); returns the old id."""
        at = origin(aggregator)
        previous = self.pinned_key(at)
        new_id = self.resolve(key_id(public_key))
        self._data["pins"][at] = base64.b64encode(public_key).decode()
        entry = key_entry(self._data, new_id)
        for survey_id, record in self._data["unkeyed"].pop(at, {}).items():
            entry["surveys"][survey_id] = merge_records(entry["surveys"].get(survey_id), record)
        moved = None
        if previous is not None and self.resolve(key_id(previous)) != new_id:
            moved = self.resolve(key_id(previous))
            self._move(moved, new_id)
        self._save()
        return moved

    def _move(self, old_id: str, new_id: str) -> None:
        old = self._data["keys"].pop(old_id, None) or {"surveys": {}, "concepts": {}}
        entry = key_entry(self._data, new_id)
        for survey_id, record in old["surveys"].items():
            entry["surveys"][survey_id] = merge_records(entry["surveys"].get(survey_id), record)
        for concept, permanent in old["concepts"].items():
            entry["concepts"].setdefault(concept, permanent)
        self._data["keys"][old_id] = {"moved_to": new_id}

    def resolve(self, kid: str) -> str:
        """The key id whose records hold what was kept for `kid` (following accepted moves)."""
        while "moved_to" in self._data["keys"].get(kid, {}):
            kid = self._data["keys"][kid]["moved_to"]
        return kid

    # --- records per (key, survey) ----------------------------------------------------------

    def record(self, kid: str, survey_id: str) -> dict[str, Any]:
        """This survey's record under this key (a copy; a new one if there is none)."""
        stored = self._data["keys"].get(self.resolve(kid), {}).get("surveys", {}).get(survey_id)
        return json.loads(json.dumps(stored)) if stored else new_record()

    def remember(self, kid: str, survey_id: str, record: dict[str, Any]) -> None:
        key_entry(self._data, self.resolve(kid))["surveys"][survey_id] = record
        self._save()

    def permanent(self, kid: str, concept_key: str) -> dict[str, Any] | None:
        """{"answer", "charged_by"} of this concept under this key, if drawn (a copy)."""
        stored = self._data["keys"].get(self.resolve(kid), {}).get("concepts", {}).get(concept_key)
        return dict(stored) if stored else None

    def concepts(self, kid: str) -> list[str]:
        """The concept keys kept for this key."""
        return list(self._data["keys"].get(self.resolve(kid), {}).get("concepts", {}))

    def keep_permanent(self, kid: str, concept_key: str, permanent: dict[str, Any]) -> None:
        key_entry(self._data, self.resolve(kid))["concepts"][concept_key] = permanent
        self._save()

    # --- the ledger's view ------------------------------------------------------------------

    def key_ids(self) -> list[str]:
        """Every key with records (not those moved to another)."""
        return sorted(kid for kid, entry in self._data["keys"].items() if "moved_to" not in entry)

    def surveys(self, kid: str) -> dict[str, dict[str, Any]]:
        """survey id -> record, for this key (copies)."""
        stored = self._data["keys"].get(self.resolve(kid), {}).get("surveys", {})
        return json.loads(json.dumps(stored))

    def urls(self, kid: str) -> list[str]:
        """The origins whose pinned key is (or moved to) this key."""
        kid = self.resolve(kid)
        return sorted(at for at, key in self._data["pins"].items()
                      if self.resolve(key_id(base64.b64decode(key))) == kid)

    def forget(self, kid: str) -> None:
        """Delete everything kept for this key: its records, permanent answers, the ids that
        moved to it and the pins of origins that serve it."""
        kid = self.resolve(kid)
        for at in self.urls(kid):
            del self._data["pins"][at]
        for other in [k for k in self._data["keys"] if self.resolve(k) == kid]:
            del self._data["keys"][other]
        self._save()

    def unkeyed_origins(self) -> list[str]:
        """Origins with migrated records that wait for the origin's key."""
        return sorted(self._data["unkeyed"])

    def _save(self) -> None:
        """Write a temporary file (0600) beside the store, fsync it, rename it over the store."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        descriptor, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".state-")
        try:
            with os.fdopen(descriptor, "w") as file:  # mkstemp creates it with mode 0600
                json.dump(self._data, file, indent=1, sort_keys=True)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
