"""Every query the aggregator runs. Responses and their counters change in one transaction."""

import base64
import hashlib
import secrets
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

from ldpsurvey.shared import Survey, parse_manifest, strict_json

from .answers import Answers
from .db import Connection
from .errors import ApiError


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


def new_ids(count: int) -> list[str]:
    """`count` random opaque identifiers (96 bits each, URL-safe), from one CSPRNG call."""
    random = secrets.token_bytes(12 * count)
    return [base64.urlsafe_b64encode(random[i:i + 12]).decode() for i in range(0, 12 * count, 12)]


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


def create_survey(db: Connection, survey: Survey, signature: bytes) -> None:
    """Store the signed manifest, open, with a zero counter for every question and option."""
    with db.transaction():
        db.execute("INSERT INTO surveys (survey_id, manifest, signature, status) "
                   "VALUES (?, ?, ?, 'open')",
                   (survey.survey_id, survey.manifest_bytes().decode(), signature.hex()))
        db.executemany("INSERT INTO counts (survey_id, question_id, option_index, count) "
                       "VALUES (?, ?, ?, 0)",
                       [(survey.survey_id, q.id, j) for q in survey.questions
                        for j in range(len(q.options))])


def get_survey(db: Connection, survey_id: str) -> StoredSurvey:
    """The stored survey, or ApiError 404."""
    rows = db.query("SELECT manifest, signature, status FROM surveys WHERE survey_id = ?",
                    (survey_id,))
    if not rows:
        raise ApiError(404, "unknown_survey", f"no survey with id {survey_id[:40]!r}")
    manifest, signature, status = rows[0]
    return StoredSurvey(manifest.encode(), bytes.fromhex(signature), status)


def list_surveys(db: Connection) -> list[tuple[str, str]]:
    """(survey_id, status) of every survey."""
    return [tuple(row) for row in db.query("SELECT survey_id, status FROM surveys ORDER BY survey_id")]


def close_survey(db: Connection, survey_id: str) -> None:
    """Close for good; idempotency keys and unspent tokens are no longer needed: deleted."""
    get_survey(db, survey_id)
    with db.transaction():
        db.execute("UPDATE surveys SET status = 'closed' WHERE survey_id = ?", (survey_id,))
        db.execute("DELETE FROM idempotency_keys WHERE survey_id = ?", (survey_id,))
        db.execute("DELETE FROM invitation_tokens WHERE survey_id = ?", (survey_id,))


def hash_text(text: str | bytes) -> str:
    return hashlib.sha256(text if isinstance(text, bytes) else text.encode()).hexdigest()


# Read the status and hold it: on PostgreSQL a concurrent close waits for this transaction;
# SQLite's BEGIN IMMEDIATE already serializes writers.
STATUS_LOCKED = {False: "SELECT status FROM surveys WHERE survey_id = ?",
                 True: "SELECT status FROM surveys WHERE survey_id = ? FOR SHARE"}


@dataclass(frozen=True)
class Stored:
    accepted: int
    replayed: bool


def store_responses(db: Connection, survey: Survey, responses: list[Answers],
                    idempotency_key: str | None, token: str | None = None) -> Stored:
    """Store responses and bump their counters atomically: all or nothing.

    With an idempotency key, a retry with the same body is answered as the first and counted
    once; the same key with another body is a 409. Only SHA-256 hashes of key and body are kept.
    A token, when given, is spent (its hash deleted) in the same transaction; an unknown or
    spent token is a 403.
    """
    survey_id = survey.survey_id
    rows = answers_json(survey, responses)
    body_hash = hash_text("\n".join(rows))
    with db.transaction():
        status = db.query(STATUS_LOCKED[db.postgres], (survey_id,))
        if not status:
            raise ApiError(404, "unknown_survey", f"no survey with id {survey_id[:40]!r}")
        if status[0][0] != "open":
            raise ApiError(409, "survey_closed", "this survey is closed and takes no answers")
        if idempotency_key is not None:
            key_hash = hash_text(idempotency_key)
            inserted = db.execute(
                "INSERT INTO idempotency_keys (survey_id, key_hash, body_hash, accepted) "
                "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (survey_id, key_hash, body_hash, len(responses)))
            if not inserted:
                stored_hash, accepted = db.query(
                    "SELECT body_hash, accepted FROM idempotency_keys "
                    "WHERE survey_id = ? AND key_hash = ?", (survey_id, key_hash))[0]
                if stored_hash != body_hash:
                    raise ApiError(409, "idempotency_conflict", "this Idempotency-Key was "
                                   "already used with a different body")
                return Stored(accepted, replayed=True)
        if token is not None and not db.execute(
                "DELETE FROM invitation_tokens WHERE survey_id = ? AND token_hash = ?",
                (survey_id, hash_text(token))):
            raise ApiError(403, "invalid_token", "this invitation token is unknown or already "
                           "used")
        day = today()
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
    return Stored(len(responses), replayed=False)


def mint_tokens(db: Connection, survey_id: str, count: int) -> list[str]:
    """Create `count` single-use invitation tokens (128-bit random); only their hashes are kept."""
    tokens = [secrets.token_urlsafe(16) for _ in range(count)]
    with db.transaction():
        db.executemany("INSERT INTO invitation_tokens (survey_id, token_hash) VALUES (?, ?)",
                       [(survey_id, hash_text(token)) for token in tokens])
    return tokens


def shuffled_answers(db: Connection, survey_id: str) -> list[dict[str, int]]:
    """Every stored response's answers, in a random order (from the OS's CSPRNG)."""
    rows = [strict_json.loads(answers) for (answers,) in db.query(
        "SELECT answers FROM responses WHERE survey_id = ?", (survey_id,))]
    secrets.SystemRandom().shuffle(rows)
    return rows


def counts(db: Connection, survey_id: str) -> dict[str, list[int]]:
    """Per question, the count of reports of each option (from the counters, O(questions))."""
    result: dict[str, dict[int, int]] = {}
    for question_id, index, count in db.query(
            "SELECT question_id, option_index, count FROM counts WHERE survey_id = ?",
            (survey_id,)):
        result.setdefault(question_id, {})[index] = int(count)
    return {qid: [by_index[j] for j in sorted(by_index)] for qid, by_index in result.items()}
