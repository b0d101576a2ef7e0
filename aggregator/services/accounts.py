"""Researchers and their API keys: making, using, listing and revoking keys, and the
results-page sessions a key opens.

A researcher is a stable id with a unique name that is never given to anyone else (a key for
an existing researcher is asked for explicitly); a researcher may hold several keys. A key is
shown once when made; only its SHA-256 is stored, with an id (`api_key_id`, what `admin keys
list` shows and `revoke` takes), a role (protocol.ROLES), the day it was made and the day it
was last used. A relay key names the surveys it may fill. A results-page session is a random id
in the signed cookie whose hash is stored with its key and expiry, so a logout, an expiry or a
revoked key ends it at once, and the cookie-signing secret alone cannot make one.
"""

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ldpsurvey.aggregator.config.ids import new_api_key_id
from ldpsurvey.aggregator.exceptions import InvalidKeyRequest, KeyNotFound
from ldpsurvey.aggregator.store import accounts as account_store
from ldpsurvey.aggregator.store.accounts import KeyRecord
from ldpsurvey.aggregator.store.connection import Connection, today
from ldpsurvey.shared.http_contract import RESEARCHER_NAME, ROLES


@dataclass(frozen=True)
class IssuedKey:
    """A new key (its only appearance) and what it belongs to."""

    key: str
    api_key_id: str
    name: str
    role: str
    new_researcher: bool


def create_key(db: Connection, role: str = "researcher", name: str | None = None,
               surveys: tuple[str, ...] = (), existing: bool = False) -> IssuedKey:
    """Make a key for a new researcher called `name` (generated if None), or, with
    `existing`, another key for the researcher of that name. A relay key needs the surveys it
    may fill; other roles take none. InvalidKeyRequest, SurveyNotFound."""
    if role not in ROLES:
        raise InvalidKeyRequest(f"role must be one of {', '.join(ROLES)}, got {role!r}")
    if (role == "relay") != bool(surveys):
        raise InvalidKeyRequest("a relay key needs the surveys it may fill (--survey ID)"
                                if role == "relay" else "only relay keys are limited to surveys")
    if name is None and existing:
        raise InvalidKeyRequest("name the existing researcher the key is for")
    name = f"{role}-{secrets.token_hex(6)}" if name is None else name
    if not RESEARCHER_NAME.fullmatch(name):
        raise InvalidKeyRequest(f"a name is 1 to 64 of a-z, 0-9 and . _ @ - (starting with a "
                                f"letter or digit), got {name[:70]!r}")
    key = f"ldp_{role[:3]}_{secrets.token_urlsafe(32)}"
    day = today()
    with db.transaction():
        researcher_id = account_store.researcher_id_of(db, name)
        if existing and researcher_id is None:
            raise InvalidKeyRequest(f"no researcher named {name!r}")
        if not existing and researcher_id is not None:
            raise InvalidKeyRequest(f"the name {name!r} is taken, and names are never given to "
                                    "anyone else; to give that researcher another key, say so "
                                    "(--existing)")
        if researcher_id is None:
            researcher_id = secrets.token_hex(16)
            account_store.insert_researcher(db, researcher_id, name, day)
        record = KeyRecord(new_api_key_id(), researcher_id, role, None)
        account_store.insert_api_key(db, record, key, day, list(surveys))
    return IssuedKey(key, record.api_key_id, name, role, new_researcher=not existing)


def key_in_use(db: Connection, key: str) -> KeyRecord | None:
    """The record of a valid key, noting today as its last-used day; None if it is unknown."""
    record = account_store.key_by_secret(db, key) if key else None
    return record and _used_today(db, record)


def _used_today(db: Connection, record: KeyRecord) -> KeyRecord:
    day = today()
    if record.last_used_day != day:  # one write per key and day at most
        with db.transaction():
            account_store.mark_key_used(db, record.api_key_id, day)
    return record


@dataclass(frozen=True)
class KeyListing:
    api_key_id: str
    name: str
    role: str
    created: str | None   # None: made before keys recorded the day (schema step 3)
    last_used: str | None


def list_keys(db: Connection) -> list[KeyListing]:
    return [KeyListing(*row) for row in account_store.list_keys(db)]


def revoke(db: Connection, api_key_id: str) -> None:
    """Delete the key and end its sessions, effective for the next request. KeyNotFound."""
    if not account_store.delete_key(db, api_key_id):
        raise KeyNotFound(api_key_id)


# --- results-page sessions -----------------------------------------------------------------------

def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def open_session(db: Connection, key: str, hours: int) -> str | None:
    """A session id for a researcher or admin key, valid for `hours`; None for any other key,
    or one revoked meanwhile (the key's row is locked: a revoke waits or goes first). Expired
    sessions are deleted on the way."""
    record = key_in_use(db, key)
    if record is None or record.role == "relay":
        return None
    session_id = secrets.token_urlsafe(32)
    now = _now()
    with db.transaction():
        if not account_store.lock_key(db, record.api_key_id):
            return None
        account_store.delete_sessions(db, expired_by=now.isoformat())
        account_store.insert_session(db, session_id, record.api_key_id,
                             (now + timedelta(hours=hours)).isoformat())
    return session_id


def session_key(db: Connection, session_id: str) -> KeyRecord | None:
    """The key of a live session; None once it expired, was closed or its key revoked."""
    record = account_store.key_of_session(db, session_id, _now().isoformat())
    return record and _used_today(db, record)


def close_session(db: Connection, session_id: str) -> None:
    with db.transaction():
        account_store.delete_sessions(db, session_id=session_id)
