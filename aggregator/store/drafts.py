"""Drafts: a survey's definition (canonical JSON text) kept for its owner until it is
published under the same id (take_draft, inside the publishing transaction) or deleted.
"""

import json
from dataclasses import dataclass

from ldpsurvey.aggregator.config.ids import SURVEY_ID
from ldpsurvey.aggregator.store.connection import Connection, today


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
