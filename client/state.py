"""The respondent's small local store: the key pinned at each aggregator origin, per
aggregator signing key what this device sent it, and, for the whole device, the permanent
answers of concepts and what forgotten keys were charged.

One JSON file in the user data folder, mode 0600, replaced atomically on every write. It
never holds a true answer: only randomized answers, which were or will be sent.

Version 3 (this release):

    {"version": 3,
     "pins":      {origin: base64 public key},       the key trusted at each origin (urls.origin)
     "keys":      {key id: {"surveys": {survey id: record}}
                   | {"moved_to": key id}},          a key replaced by one the respondent accepted
     "concepts":  {concept key: {"answer": option, "charged_by": survey id or null,
                                 "keys": [key id, ...],
                                 "forgotten_surveys": [[key id, survey id], ...]}},
     "forgotten": epsilon,                           charged to keys since forgotten: still spent
     "unkeyed":   {origin: {survey id: record}}}     migrated answers whose key is not known yet

A record is {"answers": {question id: randomized option}, "idempotency_key", "submitted" (the
server acknowledged it), "title", "charged" (the epsilon the device's ledger charged, null until
the first send attempt), "disclosed" (what its key learned, at least "charged": a concept
paid for under another key counts again here), "estimated" (charged is an upper bound, for a
survey sent before the ledger existed), and once randomized "parameters" (respondent.parameters:
the digest of the signed questions' ids and mechanisms; a record kept before it existed gains
it when next answered)}. Keying records by signing key, not URL, makes every spelling of an
aggregator's address, and every host serving its key, one memory. A concept's permanent answer
is the device's, whichever key asks: "charged_by" is the survey (under any key) that paid for
it, "keys" the keys whose surveys reported it, "forgotten_surveys" (optional: stores written
before it have none) the surveys, sent or tried, of keys forgotten while they were listed,
which this device refuses to answer again (ledger.check_counted_once: counted twice).

Two runs at once (two terminals) must not randomize a survey twice or lose each other's records:
every change is a `transaction`, which holds an exclusive lock (flock on the store's folder on
POSIX; a lock file beside the store, via msvcrt, on Windows), re-reads the file under it and
writes the result before releasing it. Reads outside a transaction read the file afresh; the
store is never written from a stale copy. A file that is not a store of a known version is
refused in one line, never overwritten or silently emptied.

Version 2 (release 0.3 to 0.5) kept the concepts per key, each {"answer", "charged_by"}; version
1 (release 0.2 and before) had {"pinned_keys": {URL as typed: key}, "surveys": {"<URL> <survey
id>": {"answers", "idempotency_key", "submitted"}}}. Both are migrated on load (`migrate`,
then `migrate_2`) and written back once as version 3, so a survey answered then is never
randomized again.
"""

import base64
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if sys.platform == "win32":
    import msvcrt
else:
    import fcntl

from ldpsurvey.client.ceilings import DEFAULT_MAX_TOTAL_EPSILON
from ldpsurvey.client.urls import origin
from ldpsurvey.shared.survey.manifest import key_id

VERSION = 3
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
            "charged": None, "disclosed": None, "estimated": False}


def merge_records(kept: dict[str, Any] | None, other: dict[str, Any]) -> dict[str, Any]:
    """One record for two of the same survey: the acknowledged one's answers (else the first),
    and the sum of both charges (each was sent)."""
    if kept is None:
        return other
    if other["submitted"] and not kept["submitted"]:
        kept, other = other, kept
    summed = {}
    for field in ("charged", "disclosed"):
        charges = [r[field] for r in (kept, other) if r[field] is not None]
        summed[field] = sum(charges) if charges else None
    return {**kept, **summed, "estimated": kept["estimated"] or other["estimated"]}


def migrate(old: dict[str, Any]) -> dict[str, Any]:
    """Version 1 -> 3 (as through 2: version 1 kept no concepts). Pins move to their
    normalized origin; each memo goes to the key that was pinned for its URL (or for another
    spelling of the same origin), else waits under "unkeyed" for the key its origin is next
    verified with. A memo the server acknowledged is
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
                  "charged": LEGACY_CHARGE if sent else None,
                  "disclosed": LEGACY_CHARGE if sent else None, "estimated": sent}
        key = pinned.get(url) or state["pins"].get(origin(url))
        if key:
            bucket = key_entry(state, key_id(base64.b64decode(key)))["surveys"]
        else:
            bucket = state["unkeyed"].setdefault(origin(url), {})
        bucket[survey_id] = merge_records(bucket.get(survey_id), record)
    return state


def migrate_2(old: dict[str, Any]) -> dict[str, Any]:
    """Version 2 -> 3. Records gain "disclosed" (= "charged": version 2 charged every survey
    what its key learned). The concepts kept per key become the device's: where several keys
    drew a permanent answer for one concept key, the one kept is the charged one of the
    smallest key id (else that of the smallest key id); "keys" lists every key that charged
    it. If any of those draws was never charged (randomized, not yet sent), the concept is
    marked uncharged, so the next survey sending it is charged for it again: that survey may
    report the dropped draw, and counting twice is the safe side."""
    def upgraded(records: dict[str, Any]) -> dict[str, Any]:
        return {survey_id: {**record, "disclosed": record["charged"]}
                for survey_id, record in records.items()}

    state = {**empty(), "pins": old["pins"],
             "unkeyed": {at: upgraded(records) for at, records in old["unkeyed"].items()}}
    drawn: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for kid, entry in sorted(old["keys"].items()):
        if "moved_to" in entry:
            state["keys"][kid] = entry
            continue
        state["keys"][kid] = {"surveys": upgraded(entry["surveys"])}
        for concept, permanent in entry["concepts"].items():
            drawn.setdefault(concept, []).append((kid, permanent))
    for concept, draws in drawn.items():
        charged = [kid for kid, permanent in draws if permanent["charged_by"] is not None]
        _, kept = min(draws, key=lambda draw: (draw[1]["charged_by"] is None, draw[0]))
        state["concepts"][concept] = {
            "answer": kept["answer"], "keys": charged,
            "charged_by": kept["charged_by"] if len(charged) == len(draws) else None}
    return state


class DamagedState(ValueError):
    """The store is not one this release can read; it is refused, never overwritten."""


def parse(raw: str) -> dict[str, Any]:
    """The store's contents, checked and migrated to this version. DamagedState if its shape is
    not a version 1, 2 or 3 store, naming the first problem."""
    try:
        data = json.loads(raw)
    except ValueError:
        raise DamagedState("it is not JSON") from None
    if not isinstance(data, dict):
        raise DamagedState(f"it holds a JSON {type(data).__name__}, not an object")
    if "version" not in data:
        if data.keys() & set(empty()) or not data.keys() & {"pinned_keys", "surveys"}:
            raise DamagedState("it names no store version")
        return migrate(_version_1(data))
    version = data["version"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise DamagedState(f"its version {version!r} is not a whole number")
    if version > VERSION:
        raise ValueError(f"it was written by a newer ldp-survey (store version {version}); "
                         "upgrade to use it, as this release would lose what it holds")
    if version == 2:
        return migrate_2(_version_2(data))
    if version != VERSION:
        raise DamagedState(f"store version {version} never existed")
    return _version_3(data)


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DamagedState(f"{where} is not an object")
    return value


def _field(value: dict[str, Any], field: str, kinds: tuple[type, ...], where: str) -> None:
    if field not in value:
        raise DamagedState(f"{where} has no {field!r}")
    found = value[field]
    if not isinstance(found, kinds) or (isinstance(found, bool) and bool not in kinds):
        raise DamagedState(f"{where}.{field} is {found!r}")


def _answers(value: Any, where: str) -> None:
    """Each kept report: an option number (forced response), or a list of whole numbers (the
    bits of OUE, a seed and value of OLH: scheme.py), as the survey's manifest makes them."""
    for qid, report in _object(value, where).items():
        listed = isinstance(report, list) and report
        if any(isinstance(x, bool) or not isinstance(x, int) for x in
               (report if listed else [report])):
            raise DamagedState(f"{where}[{qid!r}] is {report!r}, not " + (
                "a list of whole numbers" if listed else "an option number"))


NULLABLE_STR = (str, type(None))
NUMBER = (int, float)
NULLABLE_NUMBER = (int, float, type(None))
RECORD_FIELDS_2 = {"idempotency_key": NULLABLE_STR, "submitted": (bool,), "title": NULLABLE_STR,
                   "charged": NULLABLE_NUMBER, "estimated": (bool,)}
RECORD_FIELDS = {**RECORD_FIELDS_2, "disclosed": NULLABLE_NUMBER}


def _record(value: Any, where: str, fields: dict[str, tuple[type, ...]] = RECORD_FIELDS) -> None:
    record = _object(value, where)
    _answers(record.get("answers"), f"{where}.answers")
    for field, kinds in fields.items():
        _field(record, field, kinds, where)
    if "parameters" in record:
        _field(record, "parameters", NULLABLE_STR, where)


def _version_2(data: dict[str, Any]) -> dict[str, Any]:
    _common(data, RECORD_FIELDS_2)
    for kid, entry in data["keys"].items():
        where = f"keys[{kid!r}]"
        if "moved_to" not in entry:
            for concept, permanent in _object(entry.get("concepts"), f"{where}.concepts").items():
                _permanent(permanent, f"{where}.concepts[{concept!r}]")
    return data


def _version_3(data: dict[str, Any]) -> dict[str, Any]:
    _common(data, RECORD_FIELDS)
    _field(data, "forgotten", NUMBER, "the store")
    for concept, permanent in _object(data.get("concepts"), "'concepts'").items():
        at = f"concepts[{concept!r}]"
        _permanent(permanent, at)
        _field(permanent, "keys", (list,), at)
        if not all(isinstance(kid, str) for kid in permanent["keys"]):
            raise DamagedState(f"{at}.keys is {permanent['keys']!r}")
        forgotten = permanent.get("forgotten_surveys", [])
        if not (isinstance(forgotten, list) and all(
                isinstance(pair, list) and len(pair) == 2 and all(isinstance(part, str)
                                                                  for part in pair)
                for pair in forgotten)):
            raise DamagedState(f"{at}.forgotten_surveys is {forgotten!r}")
    return data


def _common(data: dict[str, Any], fields: dict[str, tuple[type, ...]]) -> None:
    """Pins, keys with their survey records, and unkeyed records: as versions 2 and 3 hold them
    (records with `fields`)."""
    for part in ("pins", "keys", "unkeyed"):
        _object(data.get(part), f"{part!r}")
    for at in data["pins"]:
        _field(data["pins"], at, (str,), "'pins'")
    for kid, entry in data["keys"].items():
        where = f"keys[{kid!r}]"
        if "moved_to" in _object(entry, where):
            _field(entry, "moved_to", (str,), where)
            continue
        for survey_id, record in _object(entry.get("surveys"), f"{where}.surveys").items():
            _record(record, f"{where}.surveys[{survey_id!r}]", fields)
    for at, surveys in data["unkeyed"].items():
        for survey_id, record in _object(surveys, f"unkeyed[{at!r}]").items():
            _record(record, f"unkeyed[{at!r}][{survey_id!r}]", fields)


def _permanent(value: Any, where: str) -> None:
    _field(_object(value, where), "answer", (int,), where)
    _field(value, "charged_by", NULLABLE_STR, where)


def _version_1(data: dict[str, Any]) -> dict[str, Any]:
    for at in _object(data.get("pinned_keys", {}), "'pinned_keys'"):
        _field(data["pinned_keys"], at, (str,), "'pinned_keys'")
    for name, memo in _object(data.get("surveys", {}), "'surveys'").items():
        where = f"surveys[{name!r}]"
        _answers(_object(memo, where).get("answers", {}), f"{where}.answers")
    return data


def empty() -> dict[str, Any]:
    return {"version": VERSION, "pins": {}, "keys": {}, "concepts": {}, "forgotten": 0.0,
            "unkeyed": {}}


def new_entry() -> dict[str, Any]:
    """What is kept for a key with nothing kept yet."""
    return {"surveys": {}}


def key_entry(state: dict[str, Any], kid: str) -> dict[str, Any]:
    return state["keys"].setdefault(kid, new_entry())


def merge_surveys(entry: dict[str, Any], records: dict[str, dict[str, Any]]) -> None:
    """Add survey id -> record to a key's entry, merging records of the same survey."""
    for survey_id, record in records.items():
        entry["surveys"][survey_id] = merge_records(entry["surveys"].get(survey_id), record)


class LocalState:
    """Pins per origin; per signing key, the records of surveys; for the device, the permanent
    answers of concepts and the charges of forgotten keys. Every change is a transaction on the
    file (see the module's docstring). One object serves one thread; processes and other
    objects share the file safely."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path else default_path()
        self._data: dict[str, Any] = {}
        self._depth = 0  # nested transactions of this object
        raw = self._read()
        self._parse(raw)  # a damaged store is refused at once, without waiting for the lock
        if raw is not None and json.loads(raw).get("version") != VERSION:
            with self.transaction():  # an older version, migrated: written once as this one
                pass

    def _read(self) -> str | None:
        try:
            return self.path.read_text()
        except FileNotFoundError:
            return None

    def _load(self) -> dict[str, Any]:
        return self._parse(self._read())

    def _parse(self, raw: str | None) -> dict[str, Any]:
        if raw is None:
            return empty()
        try:
            return parse(raw)
        except ValueError as exc:
            raise DamagedState(
                f"{self.path} cannot be used: {exc}. Nothing was changed; moving it aside "
                "starts afresh, but then this device forgets what it sent, and answering "
                "those surveys again would spend privacy budget again") from None

    def _view(self) -> dict[str, Any]:
        """The store as it is now: inside a transaction its working copy, else read afresh."""
        return self._data if self._depth else self._load()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the store's lock, work on what the file holds now, write it when done if it
        changed (nothing if the block raises). Nested transactions join the outermost."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        with _locked(self.path):
            raw = self._read()
            self._data = self._parse(raw)
            self._depth = 1
            try:
                yield
                self._save(raw)
            finally:
                self._depth = 0
                self._data = {}

    # --- pins --------------------------------------------------------------------------------

    def pinned_key(self, aggregator: str) -> bytes | None:
        """The public key pinned for this aggregator's origin, if any."""
        pinned = self._view()["pins"].get(origin(aggregator))
        return base64.b64decode(pinned) if pinned else None

    def pin_key(self, aggregator: str, public_key: bytes) -> str | None:
        """Trust `public_key` at this origin. If another key was pinned there, everything kept
        for that key moves to this one (and the old id forwards here); returns the old id."""
        at = origin(aggregator)
        with self.transaction():
            previous = self.pinned_key(at)
            new_id = self.resolve(key_id(public_key))
            self._data["pins"][at] = base64.b64encode(public_key).decode()
            merge_surveys(key_entry(self._data, new_id), self._data["unkeyed"].pop(at, {}))
            moved = None
            if previous is not None and self.resolve(key_id(previous)) != new_id:
                moved = self.resolve(key_id(previous))
                self._move(moved, new_id)
        return moved

    def _move(self, old_id: str, new_id: str) -> None:
        old = self._data["keys"].pop(old_id, None) or new_entry()
        entry = key_entry(self._data, new_id)
        merge_surveys(entry, old["surveys"])
        for permanent in self._data["concepts"].values():
            keys = [new_id if kid == old_id else kid for kid in permanent["keys"]]
            permanent["keys"] = list(dict.fromkeys(keys))
        self._data["keys"][old_id] = {"moved_to": new_id}

    def resolve(self, kid: str) -> str:
        """The key id whose records hold what was kept for `kid` (following accepted moves)."""
        return self._resolve_in(self._view(), kid)

    # --- records per (key, survey) ----------------------------------------------------------

    def _entry(self, kid: str) -> dict[str, Any]:
        """What is kept for this key now (empty if nothing)."""
        data = self._view()
        return data["keys"].get(self._resolve_in(data, kid), new_entry())

    @staticmethod
    def _resolve_in(data: dict[str, Any], kid: str) -> str:
        while "moved_to" in data["keys"].get(kid, {}):
            kid = data["keys"][kid]["moved_to"]
        return kid

    def record(self, kid: str, survey_id: str) -> dict[str, Any]:
        """This survey's record under this key (a copy; a new one if there is none)."""
        stored = self._entry(kid)["surveys"].get(survey_id)
        return json.loads(json.dumps(stored)) if stored else new_record()

    def remember(self, kid: str, survey_id: str, record: dict[str, Any]) -> None:
        with self.transaction():
            key_entry(self._data, self.resolve(kid))["surveys"][survey_id] = record

    # --- the device's permanent answers ------------------------------------------------------

    def permanent(self, concept_key: str) -> dict[str, Any] | None:
        """{"answer", "charged_by", "keys"} of this concept on this device, if drawn (a copy)."""
        stored = self._view()["concepts"].get(concept_key)
        return json.loads(json.dumps(stored)) if stored else None

    def concepts(self) -> list[str]:
        """The concept keys kept on this device."""
        return list(self._view()["concepts"])

    def keep_permanent(self, concept_key: str, permanent: dict[str, Any]) -> None:
        with self.transaction():
            self._data["concepts"][concept_key] = permanent

    # --- the ledger's view ------------------------------------------------------------------

    def key_ids(self) -> list[str]:
        """Every key with records (not those moved to another)."""
        return sorted(kid for kid, entry in self._view()["keys"].items()
                      if "moved_to" not in entry)

    def surveys(self, kid: str) -> dict[str, dict[str, Any]]:
        """survey id -> record, for this key (copies)."""
        return json.loads(json.dumps(self._entry(kid)["surveys"]))

    def urls(self, kid: str) -> list[str]:
        """The origins whose pinned key is (or moved to) this key."""
        data = self._view()
        kid = self._resolve_in(data, kid)
        return sorted(at for at, key in data["pins"].items()
                      if self._resolve_in(data, key_id(base64.b64decode(key))) == kid)

    def forgotten(self) -> float:
        """What keys since forgotten were charged: still part of the device's total."""
        return self._view()["forgotten"]

    def forget(self, kid: str) -> None:
        """Delete what is kept for this key: its records, the ids that moved to it and the pins
        of origins that serve it. What it was charged moves to "forgotten" (forgetting never
        gives budget back); the device's permanent answers stay, no longer listing the key,
        but listing (key, survey) for each survey of the key that was sent or tried, so that
        one reporting the concept is not answered, and counted, twice."""
        with self.transaction():
            kid = self.resolve(kid)
            for at in self.urls(kid):
                del self._data["pins"][at]
            records = self._entry(kid)["surveys"]
            self._data["forgotten"] += sum(record["charged"] or 0.0 for record in records.values())
            sent = [[kid, survey_id] for survey_id, record in sorted(records.items())
                    if record["charged"] is not None]
            for permanent in self._data["concepts"].values():
                if any(self.resolve(k) == kid for k in permanent["keys"]) and sent:
                    permanent["forgotten_surveys"] = permanent.get("forgotten_surveys", []) + sent
                permanent["keys"] = [k for k in permanent["keys"] if self.resolve(k) != kid]
            for other in [k for k in self._data["keys"] if self.resolve(k) == kid]:
                del self._data["keys"][other]

    def unkeyed_origins(self) -> list[str]:
        """Origins with migrated records that wait for the origin's key."""
        return sorted(self._view()["unkeyed"])

    def unkeyed(self, at: str) -> dict[str, dict[str, Any]]:
        """survey id -> record, migrated for this origin and waiting for its key (copies)."""
        return json.loads(json.dumps(self._view()["unkeyed"].get(at, {})))

    def _save(self, previous: str | None) -> None:
        """Unless the store would read back as `previous`, the text it holds: write a temporary
        file (0600) beside the store (in the folder `_locked` made), fsync it, rename it over
        the store and fsync the folder, so the rename survives a power cut."""
        text = json.dumps(self._data, indent=1, sort_keys=True)
        if text == previous:
            return
        descriptor, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".state-")
        try:
            with os.fdopen(descriptor, "w") as file:  # mkstemp creates it with mode 0600
                file.write(text)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        if sys.platform != "win32":  # Windows cannot open a folder to fsync it
            folder = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock for the store at `path`, waiting for any other holder: on POSIX flock on
    its folder (so the folder holds nothing but the store), on Windows msvcrt's lock on
    <store>.lock."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if sys.platform == "win32":
        with open(path.with_name(path.name + ".lock"), "a+b") as file:
            file.seek(0)
            while True:
                try:
                    msvcrt.locking(file.fileno(), msvcrt.LK_LOCK, 1)  # retries for 10 s
                    break
                except OSError:
                    continue
            try:
                yield
            finally:
                file.seek(0)
                msvcrt.locking(file.fileno(), msvcrt.LK_UNLCK, 1)
        return
    descriptor = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # released when the descriptor is closed
        yield
    finally:
        os.close(descriptor)
