"""Release batches: accepted responses wait, on disk, in a pending pool. Pools are released
only at scheduled instants, every RELEASE_EVERY seconds at multiples of it since the Unix epoch
(the release clock, one per app process): then every pool holding at least its survey's
`release_batch` is released, in a uniformly random order from the OS's CSPRNG, in one
transaction with the counters; closing a survey releases whatever is pending. No request runs
a release, so none is slower for filling a pool, and nobody outside the server learns when a
pool filled: results change only at the scheduled instants. Nothing released, and nothing
stored, tells in which order they arrived within their release.

After a release, what the deleted pending rows, spent tokens and expired idempotency records
leave in the database's files is scrubbed (`Connection.scrub`).
"""

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from datetime import date, timedelta

from ldpsurvey.aggregator.exceptions import SurveyNotFound
from ldpsurvey.aggregator.store import counts as count_store
from ldpsurvey.aggregator.store import idempotency as idempotency_store
from ldpsurvey.aggregator.store import pending as pending_store
from ldpsurvey.aggregator.store import releases as release_store
from ldpsurvey.aggregator.store import responses as response_store
from ldpsurvey.aggregator.store import surveys as survey_store
from ldpsurvey.aggregator.store.connection import Connection, Database, connection_to, today
from ldpsurvey.shared import Survey
from ldpsurvey.shared.http_contract import next_instant

logger = logging.getLogger(__name__)

SCRUBBED = ("pending", "invitation_tokens", "spent_tokens", "idempotency_keys")


def release(db: Connection, survey: Survey, minimum: int, keep_days: int) -> int:
    """In one transaction: if the survey has at least `minimum` pending responses, release
    them all, and delete its idempotency records released more than `keep_days` days before
    today (IDEMPOTENCY_DAYS); return how many were released. Call outside a transaction."""
    with db.transaction():
        survey_store.lock_survey(db, survey.survey_id, exclusive=True)
        released = release_locked(db, survey, minimum)
        if released:
            idempotency_store.expire_idempotency(db, survey.survey_id, days_before(today(), keep_days))
    if released:
        db.scrub(SCRUBBED)
    return released


def release_locked(db: Connection, survey: Survey, minimum: int) -> int:
    """The release itself, inside a transaction that holds the survey exclusively: if the
    pool holds at least `minimum` responses, release them all; return how many.

    The pool is read about RELEASE_CHUNK rows at a time (store.take_pending), so a release
    holds a chunk in memory however full the pool. Each chunk's rows get fresh random keys in
    a staging table of this connection (store.stage_released); then the whole release goes
    into the responses in the order of those keys (store.insert_released), so neither physical
    order, nor the log, nor keys follow arrival or the chunks; they all carry the release's
    number and day. The idempotency claims of the released groups become idempotency records,
    released that day (store.file_claims). Its statements grow with the pool: they are not
    bounded by DATABASE_STATEMENT_TIMEOUT."""
    db.unbounded_statements()
    survey_id, wanted = survey.survey_id, max(minimum, 1)
    if pending_store.pending_count(db, survey_id, wanted) < wanted:
        return 0
    day, size = today(), 0
    counts: Counter = Counter()
    joint: Counter = Counter()
    for rows, claims in pending_store.take_pending(db, survey_id):
        response_store.stage_released(db, rows)
        idempotency_store.file_claims(db, survey_id, claims, day)
        chunk_counts, chunk_joint = tallies(survey, rows)
        counts.update(chunk_counts)
        joint.update(chunk_joint)
        size += len(rows)
    response_store.insert_released(db, survey_id, day)
    count_store.add_counts(db, survey_id, counts)
    count_store.add_joint_counts(db, survey_id, joint)
    release_store.record_release(db, survey_id, day, size)
    return size


def days_before(day: str, days: int) -> str:
    """The ISO day `days` days before `day`."""
    return (date.fromisoformat(day) - timedelta(days=days)).isoformat()


def tallies(survey: Survey, rows: Sequence[str]) -> tuple[Counter, Counter]:
    """What these canonical JSON rows add to each (question id, counter) (scheme.tally; for
    forced response how often each option was reported), and to each (row question, col
    question, row option, col option) of the survey's declared cross-tabs. Rows repeat (a few
    questions with few options each), so each distinct row is parsed once."""
    counts: Counter = Counter()
    joint: Counter = Counter()
    schemes = {q.id: q.scheme for q in survey.questions}
    for row, times in Counter(rows).items():
        answers = json.loads(row)
        for qid, report in answers.items():
            for counter, amount in schemes[qid].tally(report):
                counts[qid, counter] += amount * times
        for a, b in survey.crosstabs:
            joint[a, b, answers[a], answers[b]] += times
    return counts, joint


def release_due(db: Connection, keep_days: int) -> int:
    """What the release clock runs at each scheduled instant: release every survey whose pool
    holds at least its release_batch (release); return how many responses were released. Each
    release holds its survey exclusively and checks the pool again, so replicas and workers
    whose clocks fire at the same instant release each pool once. One survey's release that
    fails (undone whole) is logged, by the survey and the error's type, and the others go on:
    it is tried again at the next instant."""
    released = 0
    for survey_id in pending_store.surveys_with_pending(db):
        try:
            survey = survey_store.get_survey(db, survey_id).survey
            released += release(db, survey, survey.release_batch, keep_days)
        except SurveyNotFound:  # deleted meanwhile, with its pool (lifecycle.delete)
            continue
        except Exception as exc:
            logger.error("the release of survey %s failed (%s); the others go on", survey_id,
                         type(exc).__name__)
    return released


class ReleaseClock:
    """A background thread that runs release_due (keeping idempotency records `keep_days`
    days) on a connection of its own at every scheduled instant (next_instant) until stopped.
    A failed run (the database unreachable) is logged, by the type of its error only, and the
    next instant tries again."""

    MAX_WAIT = 60.0  # wake at least this often, so a changed system clock is noticed

    def __init__(self, database: Database, every: float, keep_days: int):
        self._database, self._every, self._keep_days = database, every, keep_days
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="ldp-survey-release-clock")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop, and wait for a release under way to finish."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        instant = next_instant(time.time(), self._every)
        while not self._stopped.wait(min(max(instant - time.time(), 0.0), self.MAX_WAIT)):
            if time.time() < instant:
                continue
            try:
                with connection_to(self._database) as connection:
                    release_due(connection, self._keep_days)
            except Exception as exc:
                logger.error("scheduled release failed (%s); retrying at the next instant",
                             type(exc).__name__)
            instant = next_instant(time.time(), self._every)


def recover(db: Connection) -> None:
    """At start: scrub, since a crash may have cut the last scrub short. A pool that is full
    waits for the next scheduled instant, like any other."""
    if survey_store.has_surveys(db):  # a new database has nothing to scrub
        db.scrub(SCRUBBED)
