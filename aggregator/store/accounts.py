"""Researchers, their API keys (with a relay key's surveys) and the login sessions of
keys.
"""

from dataclasses import dataclass

from ldpsurvey.aggregator.config.ids import API_KEY_ID, hash_text
from ldpsurvey.aggregator.store.connection import Connection
from ldpsurvey.aggregator.store.surveys import get_survey
from ldpsurvey.shared.http_contract import RESEARCHER_NAME


@dataclass(frozen=True)
class KeyRecord:
    """An API key's id, researcher, role and the day it was last used."""

    api_key_id: str
    researcher_id: str
    role: str
    last_used_day: str | None


def researcher_id_of(db: Connection, name: str) -> str | None:
    """The id of the researcher of this name; None if none (or the name is of no valid form,
    which is not looked up)."""
    if not RESEARCHER_NAME.fullmatch(name):
        return None
    rows = db.query("SELECT researcher_id FROM researchers WHERE name = ?", (name,))
    return rows[0][0] if rows else None


def insert_researcher(db: Connection, researcher_id: str, name: str, day: str) -> None:
    db.execute("INSERT INTO researchers (researcher_id, name, created_day) VALUES (?, ?, ?)",
               (researcher_id, name, day))


def insert_api_key(db: Connection, record: KeyRecord, key: str, day: str,
                   surveys: list[str]) -> None:
    """Keep the key's hash, owner, role and day made, and a relay key's surveys (inside the
    caller's transaction). SurveyNotFound for a survey that does not exist."""
    for survey_id in surveys:
        get_survey(db, survey_id)
    db.execute("INSERT INTO api_keys (api_key_id, key_hash, researcher_id, role, created_day, "
               "last_used_day) VALUES (?, ?, ?, ?, ?, NULL)",
               (record.api_key_id, hash_text(key), record.researcher_id, record.role, day))
    db.insert_rows("relay_surveys", ("api_key_id", "survey_id"),
                   [(record.api_key_id, survey_id) for survey_id in sorted(set(surveys))])


def key_by_secret(db: Connection, key: str) -> KeyRecord | None:
    rows = db.query("SELECT api_key_id, researcher_id, role, last_used_day "
                    "FROM api_keys WHERE key_hash = ?", (hash_text(key),))
    return KeyRecord(*rows[0]) if rows else None


def mark_key_used(db: Connection, api_key_id: str, day: str) -> None:
    db.execute("UPDATE api_keys SET last_used_day = ? WHERE api_key_id = ?", (day, api_key_id))


def relay_may_fill(db: Connection, api_key_id: str, survey_id: str) -> bool:
    return bool(db.query("SELECT 1 FROM relay_surveys WHERE api_key_id = ? AND survey_id = ?",
                         (api_key_id, survey_id)))


def list_keys(db: Connection) -> list[tuple[str, str, str, str | None, str | None]]:
    """(api_key_id, researcher name, role, created day, last-used day) of every key."""
    return db.query(
        "SELECT k.api_key_id, r.name, k.role, k.created_day, k.last_used_day FROM api_keys k "
        "JOIN researchers r ON r.researcher_id = k.researcher_id ORDER BY r.name, k.api_key_id")


def lock_key(db: Connection, api_key_id: str, *, exclusive: bool = False) -> bool:
    """Whether the key exists, locked until the transaction ends: shared (a login: a revoke
    waits) or exclusive (a revoke: logins wait, then find no key)."""
    return API_KEY_ID.fullmatch(api_key_id) is not None and bool(db.query_locked(
        "SELECT 1 FROM api_keys WHERE api_key_id = ?", (api_key_id,), exclusive=exclusive))


def delete_key(db: Connection, api_key_id: str) -> bool:
    """Delete a key with its sessions and relay scope (its own transaction); False if there
    was no such key."""
    with db.transaction():
        if not lock_key(db, api_key_id, exclusive=True):
            return False
        db.execute("DELETE FROM sessions WHERE api_key_id = ?", (api_key_id,))
        db.execute("DELETE FROM relay_surveys WHERE api_key_id = ?", (api_key_id,))
        db.execute("DELETE FROM api_keys WHERE api_key_id = ?", (api_key_id,))
        return True


def insert_session(db: Connection, session_id: str, api_key_id: str, expires: str) -> None:
    db.execute("INSERT INTO sessions (session_hash, api_key_id, expires) VALUES (?, ?, ?)",
               (hash_text(session_id), api_key_id, expires))


def key_of_session(db: Connection, session_id: str, now: str) -> KeyRecord | None:
    """The key a live session (expiring after `now`, an ISO time) belongs to."""
    rows = db.query("SELECT k.api_key_id, k.researcher_id, k.role, k.last_used_day "
                    "FROM sessions s JOIN api_keys k ON k.api_key_id = s.api_key_id "
                    "WHERE s.session_hash = ? AND s.expires > ?", (hash_text(session_id), now))
    return KeyRecord(*rows[0]) if rows else None


def delete_sessions(db: Connection, *, session_id: str | None = None,
                    expired_by: str | None = None) -> None:
    """Delete one session, or every session that expired by an ISO time."""
    if session_id is not None:
        db.execute("DELETE FROM sessions WHERE session_hash = ?", (hash_text(session_id),))
    if expired_by is not None:
        db.execute("DELETE FROM sessions WHERE expires <= ?", (expired_by,))
