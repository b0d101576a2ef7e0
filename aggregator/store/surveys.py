"""Published surveys: the signed manifest, its status (open, closed), archiving, the
locks a release, a close or intake holds on one, listings, and deletion with every row of it.
Each function runs over a `Connection`; those that change several rows say whether they open
their own transaction or must be called inside the caller's.
"""

import json
from dataclasses import dataclass
from functools import lru_cache

from ldpsurvey.aggregator.config.ids import SURVEY_ID
from ldpsurvey.aggregator.exceptions import SurveyClosed, SurveyNotFound
from ldpsurvey.aggregator.store.connection import Connection, today
from ldpsurvey.shared import Survey, parse_manifest


@dataclass(frozen=True)
class StoredSurvey:
    """A published survey as stored: its signed manifest, status, whether it is archived, and
    the researcher who owns it (None: made before keys had owners)."""

    manifest: bytes
    signature: bytes
    status: str
    archived: bool = False
    owner_id: str | None = None

    @property
    def survey(self) -> Survey:
        return _parse(self.manifest)


SURVEYS_KEPT = 1024  # surveys whose parsed manifest and row format a process keeps


@lru_cache(maxsize=SURVEYS_KEPT)
def _parse(manifest: bytes) -> Survey:
    """Manifests are immutable, so each is parsed once per process."""
    return parse_manifest(manifest)


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
    """The stored survey with its owner; SurveyNotFound if there is none."""
    _known_form(survey_id)
    rows = db.query("SELECT manifest, signature, status, archived_day, owner_id FROM surveys "
                    "WHERE survey_id = ?", (survey_id,))
    if not rows:
        raise SurveyNotFound(survey_id)
    manifest, signature, status, archived_day, owner_id = rows[0]
    return StoredSurvey(manifest.encode(), bytes.fromhex(signature), status,
                        archived_day is not None, owner_id)


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
