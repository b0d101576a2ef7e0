"""Who may do what with a survey.

An admin key may do anything to any survey. A researcher may do anything to the surveys they
own, and read (estimates, exports, results page) those shared with them. A relay key may only
fill (submit batches to) the surveys named when it was made (or, made before keys had owners,
the surveys of then that were not invitation-only). A survey the caller may not use at all
answers as an unknown one would (SurveyNotFound), so its existence is not confirmed; one it
may read but not change answers Forbidden.

Drafts are never shared: only their owner and admins see or change them. Asked of a draft it
may use, something only a published survey has answers SurveyIsDraft; asked to change a
published survey as a draft, AlreadyPublished.
"""

from collections.abc import Callable

from ldpsurvey.aggregator.exceptions import (
    AlreadyPublished,
    Forbidden,
    InvalidShare,
    ResearcherNotFound,
    SurveyIsDraft,
    SurveyNotFound,
)
from ldpsurvey.aggregator.store import accounts as account_store
from ldpsurvey.aggregator.store import drafts as draft_store
from ldpsurvey.aggregator.store import shares as share_store
from ldpsurvey.aggregator.store import surveys as survey_store
from ldpsurvey.aggregator.store.accounts import KeyRecord
from ldpsurvey.aggregator.store.connection import Connection

READ, MANAGE, FILL = "read", "manage", "fill"
WORDS = {MANAGE: "close, share, archive, delete or mint tokens for", FILL: "submit batches to"}


def check(db: Connection, caller: KeyRecord, survey_id: str,
          action: str) -> survey_store.StoredSurvey:
    """The published survey, if the caller may `action` (READ, MANAGE or FILL) it, else
    SurveyNotFound, Forbidden, or SurveyIsDraft for a draft of the caller's (see the module's
    rules)."""
    try:
        return permitted(db, caller, survey_store.get_survey(db, survey_id), action)
    except SurveyNotFound:
        if _draft_of(db, caller, survey_id) is not None:
            raise SurveyIsDraft(survey_id) from None
        raise


def draft(db: Connection, caller: KeyRecord, survey_id: str) -> draft_store.Draft:
    """The draft, if the caller owns it or is an admin; AlreadyPublished if it is a published
    survey the caller may manage; else SurveyNotFound or Forbidden, as check."""
    found = _draft_of(db, caller, survey_id)
    if found is None:
        permitted(db, caller, survey_store.get_survey(db, survey_id), MANAGE)
        raise AlreadyPublished(survey_id)
    return found


def _draft_of(db: Connection, caller: KeyRecord, survey_id: str) -> draft_store.Draft | None:
    """The draft, if there is one the caller owns or is an admin (relays: never)."""
    found = draft_store.get_draft(db, survey_id)
    if found is None or caller.role == "relay" or (
            caller.role == "researcher" and found.owner_id != caller.researcher_id):
        return None
    return found


def permitted(db: Connection, caller: KeyRecord, stored: survey_store.StoredSurvey,
              action: str) -> survey_store.StoredSurvey:
    """A published survey already read (its owner with it), if the caller may `action` it;
    else SurveyNotFound or Forbidden (the module's rules). Reads only what the survey's row
    does not tell: whether it is shared with a researcher who does not own it, or whether a
    relay key was made for it."""
    survey_id = stored.survey.survey_id
    if caller.role == "researcher" and stored.owner_id != caller.researcher_id:
        if not share_store.is_shared(db, survey_id, caller.researcher_id):
            raise SurveyNotFound(survey_id)
        if action != READ:
            raise Forbidden(f"only the survey's owner or an admin may {WORDS[action]} it")
    if caller.role == "relay" and not (
            action == FILL and account_store.relay_may_fill(db, caller.api_key_id, survey_id)):
        raise Forbidden("this relay key may only submit batches to the surveys it was made for")
    return stored


def may_read(db: Connection, caller: KeyRecord | None,
             stored: survey_store.StoredSurvey) -> bool:
    """Whether the caller (None: anonymous) may read the results of a published survey
    already read."""
    if caller is None or caller.role == "relay":
        return False
    try:
        permitted(db, caller, stored, READ)
    except SurveyNotFound:
        return False
    return True


def listed_for(caller: KeyRecord) -> str | None:
    """Whose surveys a listing shows: the researcher's, or None (all) for an admin."""
    return None if caller.role == "admin" else caller.researcher_id


def share(db: Connection, caller: KeyRecord, survey_id: str, name: str) -> list[str]:
    """Share the survey with the researcher called `name` (nothing if it already is), as its
    owner or an admin; return the names it is shared with after. SurveyNotFound, Forbidden,
    ResearcherNotFound, InvalidShare (the owner)."""
    return _change_share(db, caller, survey_id, name, share_store.share)


def unshare(db: Connection, caller: KeyRecord, survey_id: str, name: str) -> list[str]:
    """Stop sharing the survey with the researcher called `name`; as share."""
    return _change_share(db, caller, survey_id, name, share_store.unshare)


def _change_share(db: Connection, caller: KeyRecord, survey_id: str, name: str,
                  change: Callable[[Connection, str, str], None]) -> list[str]:
    stored = check(db, caller, survey_id, MANAGE)
    with db.transaction():
        researcher_id = account_store.researcher_id_of(db, name)
        if researcher_id is None:
            raise ResearcherNotFound(name)
        if stored.owner_id == researcher_id:
            raise InvalidShare(f"{name!r} owns this survey")
        change(db, survey_id, researcher_id)
        return share_store.shared_with(db, survey_id)


def shares(db: Connection, caller: KeyRecord, survey_id: str) -> list[str]:
    """The names the survey is shared with, for its owner or an admin."""
    check(db, caller, survey_id, MANAGE)
    return share_store.shared_with(db, survey_id)
