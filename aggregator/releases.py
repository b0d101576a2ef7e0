"""Release batches: accepted responses wait, on disk, in a pending pool; once a survey has at
least `release_batch` of them (or when it closes) they are released together, in a uniformly
random order from the OS's CSPRNG, in one transaction with the counters. Nothing released, and
nothing stored, tells in which order they arrived within their release.

After a release, what the deleted pending rows, spent tokens and rewritten idempotency records
leave in the database's files is scrubbed (`Connection.scrub`).
"""

import json
import secrets
from collections import Counter
from collections.abc import Sequence

from ldpsurvey.shared import Survey

from . import store
from .database import Connection

SCRUBBED = ("pending", "invitation_tokens", "idempotency_keys")


def release(db: Connection, survey: Survey, minimum: int) -> int:
    """In one transaction: if the survey has at least `minimum` pending responses, release
    them all; return how many were released. Call outside a transaction."""
    with db.transaction():
        store.lock_survey(db, survey.survey_id, exclusive=True)
        released = release_locked(db, survey, minimum)
    if released:
        db.scrub(SCRUBBED)
    return released


def release_locked(db: Connection, survey: Survey, minimum: int,
                   arriving: Sequence[str] = ()) -> int:
    """The release itself, inside a transaction that holds the survey exclusively: if the
    pending responses and `arriving` (accepted in this same transaction, never written to the
    pool) number at least `minimum`, release them all; return how many.

    The rows get fresh random keys and are inserted in the order of those keys (store.
    insert_released), so neither physical order nor keys follow arrival; they all carry the
    day of release. The idempotency records
    made since the last release are written again in a shuffled order too, so that on
    PostgreSQL they share the release's transaction id instead of each their arrival's."""
    survey_id = survey.survey_id
    if store.pending_count(db, survey_id) + len(arriving) < max(minimum, 1):
        return 0
    rows = [*store.take_pending(db, survey_id), *arriving]
    day = store.today()
    store.insert_released(db, survey_id, rows, day)
    counts, joint = tallies(survey, rows)
    store.add_counts(db, survey_id, counts)
    store.add_joint_counts(db, survey_id, joint)
    records = store.take_unreleased_idempotency(db, survey_id)
    secrets.SystemRandom().shuffle(records)
    store.insert_released_idempotency(db, survey_id, records)
    store.record_release(db, survey_id, day, len(rows))
    return len(rows)


def tallies(survey: Survey, rows: Sequence[str]) -> tuple[Counter, Counter]:
    """How often each (question id, option) was reported in these canonical JSON rows, and
    each (row question, col question, row option, col option) of the survey's declared
    cross-tabs. Rows repeat (a few questions with few options each), so each distinct row is
    parsed once."""
    counts: Counter = Counter()
    joint: Counter = Counter()
    for row, times in Counter(rows).items():
        answers = json.loads(row)
        for pair in answers.items():
            counts[pair] += times
        for a, b in survey.crosstabs:
            joint[a, b, answers[a], answers[b]] += times
    return counts, joint


def recover(db: Connection) -> None:
    """At start: release every pool that reached its batch (a crash may have come between an
    acknowledgement and its release) and scrub (a crash may have cut the last scrub short)."""
    for survey_id in store.surveys_with_pending(db):
        survey = store.get_survey(db, survey_id).survey
        release(db, survey, survey.release_batch)
    if store.has_surveys(db):  # a new database has nothing to scrub
        db.scrub(SCRUBBED)
