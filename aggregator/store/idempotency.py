"""Idempotency records: what a request with an Idempotency-Key claims (its key's keyed
hash, its body's MAC), checked against pending groups and released records at intake, filed
as records by the release, and expired after the days they are kept.
"""

import hmac
from dataclasses import dataclass

from ldpsurvey.aggregator.exceptions import IdempotencyConflict
from ldpsurvey.aggregator.store.connection import Connection


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


Claim = tuple[str, str | None, int]  # a released group's key hash, body MAC and size


FILED_AT_ONCE = 500  # claims filed a statement (5 parameters each: within both databases' caps)


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
