"""Shares: which researchers a survey is shared with (its owner is on the survey's own row).
"""

from ldpsurvey.aggregator.store.connection import Connection


def is_shared(db: Connection, survey_id: str, researcher_id: str) -> bool:
    """Whether the survey is shared with the researcher (its owner is told by the survey's
    row: StoredSurvey.owner_id)."""
    return bool(db.query("SELECT 1 FROM shares WHERE survey_id = ? AND researcher_id = ?",
                         (survey_id, researcher_id)))


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
