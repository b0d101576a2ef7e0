"""The pending pool: accepted responses waiting for release, one sealed group per
request under a random key (or its idempotency claim's), and the release's removal of them
in chunks (take_pending).
"""

from bisect import bisect_left
from collections.abc import Iterator
from itertools import accumulate

from ldpsurvey.aggregator.config.ids import new_ids
from ldpsurvey.aggregator.store.connection import Connection
from ldpsurvey.aggregator.store.idempotency import Claim, IdempotencyClaim
from ldpsurvey.aggregator.store.responses import longest_row
from ldpsurvey.shared import Survey


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
