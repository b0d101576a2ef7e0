"""Released responses: the canonical row (answers_json), and the release's steps that
give them random keys and store them in a uniformly random order (stage_released,
insert_released), then the streamed read of the released rows (stored_answers).
"""

from collections.abc import Iterator
from functools import lru_cache

from ldpsurvey.aggregator.config.ids import BUCKETS, bucket_of, new_ids
from ldpsurvey.aggregator.store.connection import Connection
from ldpsurvey.aggregator.store.releases import last_release_number, released_count
from ldpsurvey.aggregator.store.surveys import SURVEYS_KEPT
from ldpsurvey.shared import Survey
from ldpsurvey.shared.mechanisms.protocol import Report, encode_many


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
