"""Every query the aggregator runs, as small functions over a `Connection`.

Functions that change several rows say whether they open their own transaction or must be
called inside the caller's (the services compose those into one). Failures are domain
exceptions (`exceptions.py`); nothing here knows of HTTP or of the database's dialect.
"""

import hmac
import json
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from itertools import accumulate

from ldpsurvey.aggregator.config.ids import (
    API_KEY_ID,
    BUCKETS,
    SURVEY_ID,
    bucket_of,
    hash_text,
    new_ids,
)
from ldpsurvey.aggregator.exceptions import (
    IdempotencyConflict,
    SurveyClosed,
    SurveyNotFound,
    TokenRejected,
)
from ldpsurvey.aggregator.store.connection import Connection
from ldpsurvey.shared import Survey, parse_manifest
from ldpsurvey.shared.http_contract import RESEARCHER_NAME
from ldpsurvey.shared.mechanisms.protocol import Report, encode_many


@dataclass(frozen=True)
class StoredSurvey:
    manifest: bytes
    signature: bytes
    status: str
    archived: bool = False

    @property
    def survey(self) -> Survey:
        return _parse(self.manifest)


SURVEYS_KEPT = 1024  # surveys whose parsed manifest and row format a process keeps


@lru_cache(maxsize=SURVEYS_KEPT)
def _parse(manifest: bytes) -> Survey:
    """Manifests are immutable, so each is parsed once per process."""
    return parse_manifest(manifest)


@lru_cache(maxsize=SURVEYS_KEPT)
def _row_template(survey: Survey) -> tuple[str, tuple[int, ...]]:
    """answers_json's %-template of a row, its questions by sorted id, and that order."""
    ids = [q.id for q in survey.questions]
    order = tuple(sorted(range(len(ids)), key=ids.__getitem__))
    return "{" + ",".join(f'"{ids[i]}":%s' for i in order) + "}", order


def answers_json(survey: Survey, responses: list[tuple[Report, ...]]) -> list[str]:
    """Each response as canonical JSON {"<question id>": report, ...} with sorted keys (question
    ids are [a-z0-9_], so they need no escaping) and each report's canonical text
    (scheme.encode: an option index is its digits)."""
    template, order = _row_template(survey)
    columns = [encode_many(column) for column in zip(*responses, strict=True)]
    return [template % row for row in zip(*(columns[i] for i in order), strict=True)]


@lru_cache(maxsize=SURVEYS_KEPT)
def longest_row(survey: Survey) -> int:
    """The length of the survey's longest canonical row: every report its scheme's longest.
    Computed once per survey (intake pads every row to it)."""
    return len(answers_json(survey, [tuple(q.scheme.largest_report()
                                           for q in survey.questions)])[0])


def today() -> str:
    """The UTC day, the only time stored with a response."""
    return datetime.now(UTC).date().isoformat()


def ping(db: Connection) -> None:
    """Fails unless the database answers."""
    db.query("SELECT 1")


# --- surveys ------------------------------------------------------------------------------------

def create_survey(db: Connection, survey: Survey, signature: bytes, owner_id: str) -> None:
    """Store the signed manifest, open, owned by a researcher, with a zero counter for every
    counter of every question's scheme (forced response: one per option) and for every cell
    of its declared cross-tabs (its own transaction)."""
    with db.transaction():
        db.execute("INSERT INTO surveys (survey_id, manifest, signature, status, owner_id, "
                   "created_day) VALUES (?, ?, ?, 'open', ?, ?)",
                   (survey.survey_id, survey.manifest_bytes().decode(), signature.hex(),
                    owner_id, today()))
        db.insert_rows("counts", ("survey_id", "question_id", "option_index", "count"),
                       [(survey.survey_id, q.id, j, 0) for q in survey.questions
                        for j in range(q.scheme.counters)])
        db.insert_rows("joint_counts", ("survey_id", "row_question", "col_question",
                                        "row_option", "col_option", "count"),
                       [(survey.survey_id, a, b, i, j, 0) for a, b in survey.crosstabs
                        for i in range(len(survey.question(a).options))
                        for j in range(len(survey.question(b).options))])


def _known_form(survey_id: str) -> None:
    """An id no survey can have (a NUL byte, which some databases refuse outright, say) is not
    looked up: SurveyNotFound."""
    if not SURVEY_ID.fullmatch(survey_id):
        raise SurveyNotFound(survey_id)


def get_survey(db: Connection, survey_id: str) -> StoredSurvey:
    """The stored survey; SurveyNotFound if there is none."""
    _known_form(survey_id)
    rows = db.query("SELECT manifest, signature, status, archived_day FROM surveys "
                    "WHERE survey_id = ?", (survey_id,))
    if not rows:
        raise SurveyNotFound(survey_id)
    manifest, signature, status, archived_day = rows[0]
    return StoredSurvey(manifest.encode(), bytes.fromhex(signature), status,
                        archived_day is not None)


def published_survey(db: Connection, survey_id: str) -> Survey:
    """A published survey's parsed manifest, which never changes: read from the database once,
    then kept in db.published, which the database's connections in this process share (all
    forgotten when SURVEYS_KEPT are kept, then read again as needed); SurveyNotFound if there
    is none. One deleted since it was read is still returned: a caller that must not act on it
    checks in its transaction (lock_open_survey), or calls get_survey."""
    survey = db.published.get(survey_id)
    if survey is None:
        survey = get_survey(db, survey_id).survey
        if len(db.published) >= SURVEYS_KEPT:
            db.published.clear()
        db.published[survey_id] = survey
    return survey


def has_surveys(db: Connection) -> bool:
    return bool(db.query("SELECT 1 FROM surveys LIMIT 1"))


@dataclass(frozen=True)
class ListedSurvey:
    """A survey as researchers' listings show it: n released responses (never how many are
    pending: that would date each submission)."""

    survey_id: str
    title: str
    status: str  # draft, open or closed
    created: str | None  # the UTC day it was published, or a draft made (None: before days)
    n: int
    invitation_only: bool
    archived: bool


def list_surveys(db: Connection, researcher_id: str | None,
                 archived: bool = False) -> list[ListedSurvey]:
    """The surveys the researcher owns or shares and the drafts they own, or every survey and
    draft (None), newest first; archived surveys only if `archived`."""
    rows = db.query(
        "SELECT survey_id, body, status, created_day, n, archived FROM ("
        "SELECT s.survey_id, s.manifest AS body, s.status, s.created_day, "
        "COALESCE(t.released, 0) AS n, "
        "CASE WHEN s.archived_day IS NULL THEN 0 ELSE 1 END AS archived FROM surveys s "
        "LEFT JOIN release_totals t ON t.survey_id = s.survey_id "
        "WHERE (CAST(? AS TEXT) IS NULL OR s.owner_id = ? OR s.survey_id IN "
        "(SELECT survey_id FROM shares WHERE researcher_id = ?)) "
        "AND (CAST(? AS INTEGER) = 1 OR s.archived_day IS NULL) "
        "UNION ALL SELECT d.survey_id, d.definition, 'draft', d.created_day, 0, 0 FROM drafts d "
        "WHERE CAST(? AS TEXT) IS NULL OR d.owner_id = ?) listed "
        "ORDER BY created_day DESC, survey_id",
        (*(researcher_id,) * 3, int(archived), *(researcher_id,) * 2))
    listed = []
    for survey_id, body, status, created, n, is_archived in rows:
        if status == "draft":
            definition = json.loads(body)
            title, invitation_only = definition["title"], definition.get("invitation_only", False)
        else:
            survey = _parse(body.encode())
            title, invitation_only = survey.title, survey.invitation_only
        listed.append(ListedSurvey(survey_id, title, status, created, int(n), invitation_only,
                                   bool(is_archived)))
    return listed


def lock_survey(db: Connection, survey_id: str, *, exclusive: bool = False) -> str:
    """The survey's status, locked until the transaction ends: shared (intake: a concurrent
    close or release waits) or exclusive (a release or close: one at a time). SurveyNotFound."""
    _known_form(survey_id)
    status = db.query_locked("SELECT status FROM surveys WHERE survey_id = ?", (survey_id,),
                             exclusive=exclusive)
    if not status:
        raise SurveyNotFound(survey_id)
    return status[0][0]


def lock_open_survey(db: Connection, survey_id: str) -> None:
    """Check the survey is open and hold that, shared (as lock_survey), until the transaction
    ends. SurveyNotFound, SurveyClosed."""
    if lock_survey(db, survey_id) != "open":
        raise SurveyClosed()


def mark_closed(db: Connection, survey_id: str) -> None:
    """Close for good; idempotency records and tokens are no longer needed: deleted."""
    db.execute("UPDATE surveys SET status = 'closed' WHERE survey_id = ?", (survey_id,))
    for table in ("idempotency_keys", "invitation_tokens", "spent_tokens"):
        db.execute(f"DELETE FROM {table} WHERE survey_id = ?", (survey_id,))  # noqa: S608  # nosec B608


# --- drafts, archiving and deletion -------------------------------------------------------------

def insert_draft(db: Connection, survey_id: str, owner_id: str, definition: str) -> None:
    """Keep a draft: its definition (JSON text, validated), owner and the day made."""
    db.execute("INSERT INTO drafts (survey_id, owner_id, definition, created_day) "
               "VALUES (?, ?, ?, ?)", (survey_id, owner_id, definition, today()))


@dataclass(frozen=True)
class Draft:
    owner_id: str
    definition: dict


def get_draft(db: Connection, survey_id: str) -> Draft | None:
    """The draft with this id; None if there is none (published, deleted or never made)."""
    if not SURVEY_ID.fullmatch(survey_id):
        return None
    rows = db.query("SELECT owner_id, definition FROM drafts WHERE survey_id = ?", (survey_id,))
    return Draft(rows[0][0], json.loads(rows[0][1])) if rows else None


def update_draft(db: Connection, survey_id: str, definition: str) -> bool:
    """Replace a draft's definition; False if there is no such draft (any more)."""
    return bool(db.execute("UPDATE drafts SET definition = ? WHERE survey_id = ?",
                           (definition, survey_id)))


def take_draft(db: Connection, survey_id: str) -> bool:
    """Delete the draft (published or deleted: inside the caller's transaction); False if
    there was none, as when another request published it first."""
    return bool(db.execute("DELETE FROM drafts WHERE survey_id = ?", (survey_id,)))


def mark_archived(db: Connection, survey_id: str, archived: bool) -> bool:
    """Archive a closed survey (the day it was), or bring it back; False if it was already so."""
    if archived:
        return bool(db.execute("UPDATE surveys SET archived_day = ? WHERE survey_id = ? AND "
                               "archived_day IS NULL", (today(), survey_id)))
    return bool(db.execute("UPDATE surveys SET archived_day = NULL WHERE survey_id = ? AND "
                           "archived_day IS NOT NULL", (survey_id,)))


# Every table that holds rows of a survey, the survey itself last (the others refer to it).
SURVEY_TABLES = ("pending", "responses", "counts", "joint_counts", "releases", "release_totals",
                 "release_days",
                 "idempotency_keys", "invitation_tokens", "spent_tokens", "relay_surveys", "shares",
                 "surveys")


def delete_survey(db: Connection, survey_id: str) -> None:
    """Delete a published survey and every row of it in every table (inside the caller's
    transaction, which holds the survey exclusively)."""
    for table in SURVEY_TABLES:
        db.execute(f"DELETE FROM {table} WHERE survey_id = ?", (survey_id,))  # noqa: S608  # nosec B608


# --- intake: the steps of accepting responses, each inside the caller's transaction -------------

@dataclass(frozen=True)
class IdempotencyClaim:
    """What an idempotency record keeps of a request, under the storage key (storage_key.py):
    its key's id and its body's MAC."""

    key_hash: str
    body_mac: str


def idempotency_claim(db: Connection, key: str, body: str) -> IdempotencyClaim:
    """The claim a request with Idempotency-Key `key` and canonical `body` makes. No query:
    intake computes it before its transaction, as it seals, so the writers' lock is held
    only to write."""
    return IdempotencyClaim(db.keys.idempotency_id(key), db.keys.body_mac(key, body))


def released_claim(db: Connection, survey_id: str, claim: IdempotencyClaim) -> int | None:
    """The responses accepted with the claim's key by a request since released (its
    idempotency record), or None; IdempotencyConflict if that request's body was another."""
    return _earlier(claim, db.query("SELECT body_mac, accepted FROM idempotency_keys "
                                    "WHERE survey_id = ? AND key_hash = ?",
                                    (survey_id, claim.key_hash)))


def pending_claim(db: Connection, survey_id: str, claim: IdempotencyClaim) -> int | None:
    """As released_claim, for a request whose group is still pending (its id is the key's)."""
    return _earlier(claim, db.query("SELECT body_mac, size FROM pending "
                                    "WHERE survey_id = ? AND pending_id = ?",
                                    (survey_id, claim.key_hash)))


def _earlier(claim: IdempotencyClaim, found: list[tuple]) -> int | None:
    """The earlier request's number of responses if its body was the same (records from
    release 0.1.0 have no MAC and match any body); IdempotencyConflict if not."""
    if not found:
        return None
    stored_mac, accepted = found[0]
    if stored_mac is not None and not hmac.compare_digest(stored_mac, claim.body_mac):
        raise IdempotencyConflict()
    return int(accepted)


def spend_token(db: Connection, survey_id: str, token: str) -> None:
    """Spend an invitation token, so it cannot be used again. One that proves itself (minted
    since schema step 14: StorageKeys.invited) has its keyed hash added to the survey's spent
    tokens: nothing of it was stored before, and no row of another token is touched, so which
    tokens were spent shows in no order, place, transaction or freed space, only in keyed
    hashes. One minted before is deleted from the tokens of then (step 14 put them in the
    order of their keyed hashes). TokenRejected if it is unknown or already spent."""
    token_hash = db.keys.token_hash(token)
    if db.keys.invited(survey_id, token):
        spent = db.execute("INSERT INTO spent_tokens (survey_id, token_hash) VALUES (?, ?) "
                           "ON CONFLICT (survey_id, token_hash) DO NOTHING",
                           (survey_id, token_hash))
    else:
        spent = db.execute("DELETE FROM invitation_tokens WHERE survey_id = ? AND "
                           "token_hash = ?", (survey_id, token_hash))
    if not spent:
        raise TokenRejected()


def sealed_pending(db: Connection, survey: Survey, rows: list[str]) -> str:
    """One request's accepted responses as the pending pool keeps them, a group: each row's
    canonical JSON padded with spaces to the survey's longest row, one row a line, sealed
    together under the storage key, so the sealed length tells how many rows it holds and
    nothing of the answers (an option index of 10 or more is one character longer). No query:
    intake seals before its transaction, which then holds the writers' lock only to insert."""
    size = longest_row(survey)
    return db.keys.seal(survey.survey_id, "\n".join(row.ljust(size) for row in rows))


def insert_pending(db: Connection, survey_id: str, sealed: str, size: int,
                   claim: IdempotencyClaim | None) -> bool:
    """Keep a request's `size` accepted responses (sealed_pending) until release, one row (a
    batch of 10,000 is one insert, not 10,000) under a random key: new_ids's, or if the request
    made an idempotency claim, its key's keyed hash (an HMAC under the storage key, as random
    to anyone without it), kept with the body's MAC. The primary key then finds a retry's
    group, and no index of keys is written beside it. False, and nothing kept, if a group with
    the claim's key is pending already (a retry, or a concurrent twin that committed first:
    pending_claim tells which)."""
    if claim is None:
        return bool(db.execute("INSERT INTO pending (survey_id, pending_id, size, answers) "
                               "VALUES (?, ?, ?, ?)", (survey_id, new_ids(1)[0], size, sealed)))
    return bool(db.execute("INSERT INTO pending (survey_id, pending_id, size, answers, "
                           "key_hash, body_mac) VALUES (?, ?, ?, ?, ?, ?) "
                           "ON CONFLICT (survey_id, pending_id) DO NOTHING",
                           (survey_id, claim.key_hash, size, sealed, claim.key_hash,
                            claim.body_mac)))


# --- release: the steps of one release, inside the caller's transaction -------------------------

def pending_count(db: Connection, survey_id: str, at_most: int) -> int:
    """How many responses the survey's pool holds, counted up to `at_most` or a group beyond
    (an index range of at most that many groups, each of at least one response, however full
    the pool)."""
    return int(db.query("SELECT COALESCE(SUM(size), 0) FROM (SELECT size FROM pending "
                        "WHERE survey_id = ? LIMIT ?) pool", (survey_id, at_most))[0][0])


def surveys_with_pending(db: Connection) -> list[str]:
    """The surveys whose pool holds a response: a loose index scan, one index probe per such
    survey (the first survey id after the last, starting after '', which no id is), never a
    read of the pools' rows."""
    return [sid for (sid,) in db.query(
        "WITH RECURSIVE pools (survey_id) AS (SELECT CAST('' AS TEXT) UNION ALL "
        "SELECT (SELECT p.survey_id FROM pending p WHERE p.survey_id > pools.survey_id "
        "ORDER BY p.survey_id LIMIT 1) FROM pools WHERE pools.survey_id IS NOT NULL) "
        "SELECT survey_id FROM pools WHERE survey_id <> ''")]


RELEASE_CHUNK = 10_000  # pending responses a release holds at once

Claim = tuple[str, str | None, int]  # a released group's key hash, body MAC and size
FILED_AT_ONCE = 500  # claims filed a statement (5 parameters each: within both databases' caps)


def take_pending(db: Connection, survey_id: str) -> Iterator[tuple[list[str], list[Claim]]]:
    """Remove and yield every pending response of the survey (opened: canonical JSON), about
    RELEASE_CHUNK at a time (whole groups: at most a batch more), with the idempotency claims
    of the chunk's groups that made one; groups in the order of their random pending ids,
    which owes nothing to arrival. Inside the transaction of a release that holds the survey
    exclusively (no intake adds to the pool meanwhile); each chunk starts after the last id
    read, so it never steps over the groups already deleted."""
    last = ""  # no id is empty: every id sorts after it
    while groups := db.query("SELECT pending_id, size FROM pending WHERE survey_id = ? AND "
                             "pending_id > ? ORDER BY pending_id LIMIT ?",
                             (survey_id, last, RELEASE_CHUNK)):
        totals = list(accumulate(size for _, size in groups))  # rows up to each group
        first, last = last, groups[min(bisect_left(totals, RELEASE_CHUNK), len(groups) - 1)][0]
        chunk = db.query("SELECT answers, key_hash, body_mac, size FROM pending WHERE "
                         "survey_id = ? AND pending_id > ? AND pending_id <= ? "
                         "ORDER BY pending_id", (survey_id, first, last))
        db.execute("DELETE FROM pending WHERE survey_id = ? AND pending_id > ? AND "
                   "pending_id <= ?", (survey_id, first, last))
        opened = db.keys.open_many(survey_id, [sealed for sealed, *_ in chunk])
        yield ([row.rstrip(" ") for group in opened for row in group.split("\n")],
               [(key_hash, mac, size) for _, key_hash, mac, size in chunk
                if key_hash is not None])


def stage_released(db: Connection, rows: list[str]) -> None:
    """Give responses being released new random keys (ids.new_ids, from the OS's CSPRNG) and
    their buckets (ids.bucket_of), and keep them in the release's staging table until
    insert_released: a temporary table, this connection's alone, dropped with the release, so
    the order chunks arrive in (ranges of pending ids) reaches neither the responses' pages nor
    the log. Inside the release's transaction."""
    db.execute("CREATE TEMP TABLE IF NOT EXISTS releasing (bucket INTEGER NOT NULL, "
               "response_id TEXT NOT NULL, answers TEXT NOT NULL, "
               "PRIMARY KEY (bucket, response_id))")
    db.insert_rows("releasing", ("bucket", "response_id", "answers"),
                   [(bucket_of(response_id), response_id, row)
                    for response_id, row in zip(new_ids(len(rows)), rows, strict=True)])


def insert_released(db: Connection, survey_id: str, day: str) -> None:
    """Store the staged responses (stage_released) with the day and the release's number, in
    one statement in the order of their (bucket, key): sorting independent random keys puts
    the whole release in a uniformly random order, whatever order they came in, and it is the
    order exports read. The number comes after the bucket in the primary key, so each release
    appends at the end of every bucket: call before record_release, which records it."""
    db.execute("INSERT INTO responses (survey_id, bucket, release_number, response_id, answers, "
               "released_day) SELECT ?, bucket, ?, response_id, answers, ? FROM releasing "
               "ORDER BY bucket, response_id",
               (survey_id, last_release_number(db, survey_id) + 1, day))
    db.execute("DROP TABLE releasing")


def add_counts(db: Connection, survey_id: str, deltas: Counter) -> None:
    """Add released reports to the questions' counters: deltas[(question id, counter)]."""
    db.executemany("UPDATE counts SET count = count + ? "
                   "WHERE survey_id = ? AND question_id = ? AND option_index = ?",
                   [(delta, survey_id, qid, index)
                    for (qid, index), delta in sorted(deltas.items())])


def add_joint_counts(db: Connection, survey_id: str, deltas: Counter) -> None:
    """Add released reports to the declared cross-tabs' counters:
    deltas[(row question, col question, row option, col option)]."""
    db.executemany("UPDATE joint_counts SET count = count + ? WHERE survey_id = ? AND "
                   "row_question = ? AND col_question = ? AND row_option = ? AND col_option = ?",
                   [(delta, survey_id, *cell) for cell, delta in sorted(deltas.items())])


def file_claims(db: Connection, survey_id: str, claims: list[Claim], day: str) -> None:
    """Keep released groups' idempotency claims (take_pending: a chunk's) as idempotency
    records, released on `day`, in the order of their keyed ids (an HMAC: owes nothing to
    arrival; the chunks are ranges of random pending ids).
    A record is first written by its release, so its row version carries the release's
    transaction, never its arrival's. Intake keeps a claim pending only if no record has its
    key (released_claim); a record that has it all the same (written by a replica of a release
    before schema step 12, running beside this one) is kept as it is, so the release goes
    through. FILED_AT_ONCE records a statement (one a record, each a round trip to a database
    server, made a release of 100 keyed responses half as slow again: bench/history.py)."""
    ordered = sorted(claims)
    for start in range(0, len(ordered), FILED_AT_ONCE):
        part = ordered[start:start + FILED_AT_ONCE]
        records = ", ".join(["(?, ?, ?, ?, 1, ?)"] * len(part))  # placeholders only
        db.execute("INSERT INTO idempotency_keys (survey_id, key_hash, body_mac, accepted, "  # noqa: S608  # nosec B608
                   f"released, released_day) VALUES {records} ON CONFLICT DO NOTHING",
                   [value for claim in part for value in (survey_id, *claim, day)])


def expire_idempotency(db: Connection, survey_id: str, before: str) -> None:
    """Delete the survey's idempotency records released before the day `before` (through the
    index of released records by day): a retry after that is stored as a new response."""
    table = "idempotency_keys" + db.indexed_by("idempotency_by_day")
    db.execute(f"DELETE FROM {table} WHERE survey_id = ? AND released = 1 "  # noqa: S608  # nosec B608
               "AND released_day < ?", (survey_id, before))


def record_release(db: Connection, survey_id: str, day: str, size: int) -> None:
    """Record the survey's next release (numbered one more than its last), and add it to the
    survey's totals and to its day's."""
    number = last_release_number(db, survey_id) + 1
    db.execute("INSERT INTO releases (survey_id, released_day, size, release_number) "
               "VALUES (?, ?, ?, ?)", (survey_id, day, size, number))
    db.execute("INSERT INTO release_totals (survey_id, released, smallest, last_number) "
               "VALUES (?, ?, ?, ?) ON CONFLICT (survey_id) DO UPDATE SET "
               "released = release_totals.released + excluded.released, "
               "smallest = CASE WHEN excluded.smallest < release_totals.smallest "
               "THEN excluded.smallest ELSE release_totals.smallest END, "
               "last_number = excluded.last_number", (survey_id, size, size, number))
    db.execute("INSERT INTO release_days (survey_id, released_day, size) VALUES (?, ?, ?) "
               "ON CONFLICT (survey_id, released_day) DO UPDATE SET "
               "size = release_days.size + excluded.size", (survey_id, day, size))


def _totals(db: Connection, survey_id: str) -> tuple[int, int | None, int]:
    """(responses released, the smallest release's size or None, the last release's number)
    from the survey's summary row (0, None, 0 before the first release)."""
    rows = db.query("SELECT released, smallest, last_number FROM release_totals "
                    "WHERE survey_id = ?", (survey_id,))
    return (int(rows[0][0]), int(rows[0][1]), int(rows[0][2])) if rows else (0, None, 0)


def last_release_number(db: Connection, survey_id: str) -> int:
    """The number of the survey's last release (1, 2, ...; 0 before the first, and for
    releases made before numbers were kept)."""
    return _totals(db, survey_id)[2]


def released_count(db: Connection, survey_id: str) -> int:
    """How many responses have been released (the sum of the releases' sizes)."""
    return _totals(db, survey_id)[0]


def smallest_release(db: Connection, survey_id: str) -> int | None:
    """The size of the survey's smallest release, None before the first."""
    return _totals(db, survey_id)[1]


# --- responses, counts, keys --------------------------------------------------------------------

ANSWERS_CHUNK = 10_000  # released responses read per short transaction


def stored_answers(db: Connection, survey_id: str, through: int) -> Iterator[str]:
    """Outside a transaction: the answers (canonical JSON) of every response of the survey's
    releases numbered up to `through` (last_release_number when the reader began: released
    rows never change, and later releases are left out whole), in the order of their
    (bucket, random response id), which is a uniformly random order (see surveys.export).

    Read a range of buckets at a time, sized to hold about ANSWERS_CHUNK rows (at least one
    bucket: released / BUCKETS rows), each by one statement, a short read transaction of its
    own, and handed on after it: a slow reader holds no snapshot, so the scrub of spent tokens
    and pending answers never waits for it."""
    span = max(1, BUCKETS * ANSWERS_CHUNK // max(released_count(db, survey_id), 1))
    for first in range(0, BUCKETS, span):
        yield from (answers for (answers,) in db.query(
            "SELECT answers FROM responses WHERE survey_id = ? AND bucket >= ? AND bucket < ? "
            "AND release_number <= ? ORDER BY bucket, response_id",
            (survey_id, first, first + span, through)))


def counts(db: Connection, survey_id: str) -> dict[str, list[int]]:
    """Per question, its scheme's counters (forced response: the count of reports of each
    option), O(questions)."""
    result: dict[str, dict[int, int]] = {}
    for question_id, index, count in db.query(
            "SELECT question_id, option_index, count FROM counts WHERE survey_id = ?",
            (survey_id,)):
        result.setdefault(question_id, {})[index] = int(count)
    return {qid: [by_index[j] for j in sorted(by_index)] for qid, by_index in result.items()}


def joint_counts(db: Connection, survey_id: str, rows: str, cols: str) -> list[list[int]]:
    """A declared cross-tab's counters as a matrix, [row option][col option] (O(cells))."""
    matrix: dict[int, dict[int, int]] = {}
    for i, j, count in db.query(
            "SELECT row_option, col_option, count FROM joint_counts WHERE survey_id = ? AND "
            "row_question = ? AND col_question = ?", (survey_id, rows, cols)):
        matrix.setdefault(int(i), {})[int(j)] = int(count)
    return [[by_col[j] for j in sorted(by_col)] for _, by_col in sorted(matrix.items())]


# --- researchers, keys, sessions, owners and shares -------------------------------------------

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


def access_of(db: Connection, survey_id: str, researcher_id: str) -> str | None:
    """'owner', 'shared' or None: what the researcher holds of the survey. SurveyNotFound."""
    _known_form(survey_id)
    rows = db.query("SELECT owner_id, EXISTS (SELECT 1 FROM shares WHERE shares.survey_id = "
                    "surveys.survey_id AND researcher_id = ?) FROM surveys WHERE survey_id = ?",
                    (researcher_id, survey_id))
    if not rows:
        raise SurveyNotFound(survey_id)
    owner_id, shared = rows[0]
    return "owner" if owner_id == researcher_id else "shared" if shared else None


def share(db: Connection, survey_id: str, researcher_id: str) -> None:
    """Share the survey with the researcher (nothing if it already is, also when two ask at
    once)."""
    db.execute("INSERT INTO shares (survey_id, researcher_id) VALUES (?, ?) "
               "ON CONFLICT DO NOTHING", (survey_id, researcher_id))


def unshare(db: Connection, survey_id: str, researcher_id: str) -> None:
    db.execute("DELETE FROM shares WHERE survey_id = ? AND researcher_id = ?",
               (survey_id, researcher_id))


def shared_with(db: Connection, survey_id: str) -> list[str]:
    """The names of the researchers the survey is shared with."""
    return [name for (name,) in db.query(
        "SELECT r.name FROM shares s JOIN researchers r ON r.researcher_id = s.researcher_id "
        "WHERE s.survey_id = ? ORDER BY r.name", (survey_id,))]


def released_per_day(db: Connection, survey_id: str) -> list[tuple[str, int]]:
    """(day, responses released that day), in day order: the results page's timeline."""
    return [(day, int(size)) for day, size in db.query(
        "SELECT released_day, size FROM release_days WHERE survey_id = ? "
        "ORDER BY released_day", (survey_id,))]
