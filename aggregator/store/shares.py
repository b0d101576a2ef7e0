"""Shares: which researchers a survey is shared with, and what a researcher holds of a
survey (owner, shared or nothing).
"""

from ldpsurvey.aggregator.exceptions import SurveyNotFound
from ldpsurvey.aggregator.store.connection import Connection
from ldpsurvey.aggregator.store.surveys import known_form


def access_of(db: Connection, survey_id: str, researcher_id: str) -> str | None:
    """'owner', 'shared' or None: what the researcher holds of the survey. SurveyNotFound."""
    known_form(survey_id)
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
