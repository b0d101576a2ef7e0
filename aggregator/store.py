"""Every query the aggregator runs, as small functions over a `Connection`.

Functions that change several rows say whether they open their own transaction or must be
called inside the caller's (the services compose those into one). Failures are domain
exceptions (`exceptions.py`); nothing here knows of HTTP or of the database's dialect.
"""

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

from ldpsurvey.shared import Survey, parse_manifest

from .answers import Answers
from .database import Connection
from .exceptions import IdempotencyConflict, SurveyClosed, SurveyNotFound, TokenRejected
from .ids import hash_text, new_ids


@dataclass(frozen=True)
class StoredSurvey:
    manifest: bytes
    signature: bytes
    status: str

    @property
    def survey(self) -> Survey:
        return _parse(self.manifest)


@lru_cache(maxsize=1024)
def _parse(manifest: bytes) -> Survey:
    """Manifests are immutable, so each is parsed once per process."""
    return parse_manifest(manifest)


def answers_json(survey: Survey, responses: list[Answers]) -> list[str]:
    """Each response as canonical JSON {"<question id>": index, ...} with sorted keys (question
    ids are [a-z0-9_], so they need no escaping)."""
    ids = [q.id for q in survey.questions]
    order = sorted(range(len(ids)), key=ids.__getitem__)
    template = "{" + ",".join(f'"{ids[i]}":%d' for i in order) + "}"
    return [template % tuple(values[i] for i in order) for values in responses]


def today() -> str:
    """The UTC day, the only time stored with a response."""
    return datetime.now(UTC).date().isoformat()


def ping(db: Connection) -> None:
    """Fails unless the database answers."""
    db.query("SELECT 1")


# --- surveys ------------------------------------------------------------------------------------

def create_survey(db: Connection, survey: Survey, signature: bytes) -> None:
    """Store the signed manifest, open, with a zero counter for every question and option
    (its own transaction)."""
    with db.transaction():
        db.execute("INSERT INTO surveys (survey_id, manifest, signature, status) "
                   "VALUES (?, ?, ?, 'open')",
                   (survey.survey_id, survey.manifest_bytes().decode(), signature.hex()))
        db.executemany("INSERT INTO counts (survey_id, question_id, option_index, count) "
                       "VALUES (?, ?, ?, 0)",
                       [(survey.survey_id, q.id, j) for q in survey.questions
                        for j in range(len(q.options))])


def get_survey(db: Connection, survey_id: str) -> StoredSurvey:
    """The stored survey; SurveyNotFound if there is none."""
    rows = db.query("SELECT manifest, signature, status FROM surveys WHERE survey_id = ?",
                    (survey_id,))
    if not rows:
        raise SurveyNotFound(survey_id)
    manifest, signature, status = rows[0]
    return StoredSurvey(manifest.encode(), bytes.fromhex(signature), status)


def list_surveys(db: Connection) -> list[tuple[str, str]]:
    """(survey_id, status) of every survey."""
    return [tuple(row) for row in db.query("SELECT survey_id, status FROM surveys ORDER BY survey_id")]


def close_survey(db: Connection, survey_id: str) -> None:
    """Close for good; idempotency keys and unspent tokens are no longer needed: deleted
    (its own transaction). SurveyNotFound if there is no such survey."""
    with db.transaction():
        if not db.execute("UPDATE surveys SET status = 'closed' WHERE survey_id = ?",
                          (survey_id,)):
            raise SurveyNotFound(survey_id)
        db.execute("DELETE FROM idempotency_keys WHERE survey_id = ?", (survey_id,))
        db.execute("DELETE FROM invitation_tokens WHERE survey_id = ?", (survey_id,))


# --- intake: the steps of storing responses, each inside the caller's transaction ---------------

def lock_open_survey(db: Connection, survey_id: str) -> None:
    """Check the survey is open and hold that until the transaction ends (a concurrent close
    waits). SurveyNotFound, SurveyClosed."""
    status = db.query_locked("SELECT status FROM surveys WHERE survey_id = ?", (survey_id,))
    if not status:
        raise SurveyNotFound(survey_id)
    if status[0][0] != "open":
        raise SurveyClosed()


def claim_idempotency_key(db: Connection, survey_id: str, key: str, body_hash: str,
                          accepted: int) -> int | None:
    """Record that `key` carries this body; None if it is new. If it was used before with the
    same body, the number of responses accepted then; with another body, IdempotencyConflict."""
    key_hash = hash_text(key)
    if db.execute("INSERT INTO idempotency_keys (survey_id, key_hash, body_hash, accepted) "
                  "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                  (survey_id, key_hash, body_hash, accepted)):
        return None
    stored_hash, stored_accepted = db.query(
        "SELECT body_hash, accepted FROM idempotency_keys WHERE survey_id = ? AND key_hash = ?",
        (survey_id, key_hash))[0]
    if stored_hash != body_hash:
        raise IdempotencyConflict()
    return int(stored_accepted)


def spend_token(db: Connection, survey_id: str, token: str) -> None:
    """Delete the token's hash, so it cannot be used again and nothing links it to the
    response. TokenRejected if it is unknown or already spent."""
    if not db.execute("DELETE FROM invitation_tokens WHERE survey_id = ? AND token_hash = ?",
                      (survey_id, hash_text(token))):
        raise TokenRejected()


def insert_responses(db: Connection, survey: Survey, rows: list[str],
                     responses: list[Answers]) -> None:
    """Store the responses (`rows`, their canonical JSON) with the day, and add them to the
    per-option counters."""
    survey_id, day = survey.survey_id, today()
    db.executemany("INSERT INTO responses (response_id, survey_id, answers, received_day) "
                   "VALUES (?, ?, ?, ?)",
                   [(response_id, survey_id, row, day)
                    for response_id, row in zip(new_ids(len(rows)), rows, strict=True)])
    ids = [q.id for q in survey.questions]
    deltas = Counter((qid, index) for values in responses
                     for qid, index in zip(ids, values, strict=True))
    db.executemany("UPDATE counts SET count = count + ? "
                   "WHERE survey_id = ? AND question_id = ? AND option_index = ?",
                   [(delta, survey_id, qid, index)
                    for (qid, index), delta in sorted(deltas.items())])


# --- tokens, responses, counts, keys ------------------------------------------------------------

def insert_tokens(db: Connection, survey_id: str, tokens: list[str]) -> None:
    """Keep only the tokens' hashes."""
    db.executemany("INSERT INTO invitation_tokens (survey_id, token_hash) VALUES (?, ?)",
                   [(survey_id, hash_text(token)) for token in tokens])


def stored_answers(db: Connection, survey_id: str) -> list[str]:
    """Every stored response's answers as canonical JSON, in the database's order."""
    return [answers for (answers,) in db.query(
        "SELECT answers FROM responses WHERE survey_id = ?", (survey_id,))]


def counts(db: Connection, survey_id: str) -> dict[str, list[int]]:
    """Per question, the count of reports of each option (from the counters, O(questions))."""
    result: dict[str, dict[int, int]] = {}
    for question_id, index, count in db.query(
            "SELECT question_id, option_index, count FROM counts WHERE survey_id = ?",
            (survey_id,)):
        result.setdefault(question_id, {})[index] = int(count)
    return {qid: [by_index[j] for j in sorted(by_index)] for qid, by_index in result.items()}


def insert_api_key(db: Connection, key: str, role: str) -> None:
    """Keep the key's hash and role (its own transaction)."""
    with db.transaction():
        db.execute("INSERT INTO api_keys (key_hash, role) VALUES (?, ?)", (hash_text(key), role))


def role_of_key(db: Connection, key: str) -> str | None:
    """The role of an API key, or None if it is unknown."""
    rows = db.query("SELECT role FROM api_keys WHERE key_hash = ?", (hash_text(key),))
    return rows[0][0] if rows else None
