"""A survey's life, every step of it here: a draft (its definition, editable by its owner,
seen by nobody else) is published once, under the id it had as a draft, as a signed manifest
that never changes (or a definition is published at once, under a new id, with no draft kept:
publish_new); a change after that is a copy into a new draft. An open survey is closed (what
is pending is released, no answer is taken after); a closed one may be archived (hidden from
listings, its data kept) and brought back; any survey may be deleted by its owner or an admin,
with every row of it, scrubbed from the database's files (an open one only when forced:
whether it holds answers waiting for release is never told, so it could).

Each step refuses where it makes no sense, saying what to do instead (409: AlreadyPublished
for publishing twice or editing a published survey, SurveyIsDraft, SurveyOpen for archiving
or deleting unforced an open one, ArchiveConflict)."""

from dataclasses import replace
from typing import Any

from ldpsurvey.aggregator.config.ids import new_survey_id
from ldpsurvey.aggregator.config.signing import SigningKey
from ldpsurvey.aggregator.exceptions import (
    AlreadyPublished,
    ArchiveConflict,
    EpsilonAboveCap,
    InvalidSurvey,
    SurveyIsDraft,
    SurveyOpen,
)
from ldpsurvey.aggregator.services import access, releases
from ldpsurvey.aggregator.store import drafts as draft_store
from ldpsurvey.aggregator.store import surveys as survey_store
from ldpsurvey.aggregator.store.accounts import KeyRecord
from ldpsurvey.aggregator.store.connection import Connection
from ldpsurvey.shared import Survey, SurveyError, parse_definition
from ldpsurvey.shared.mechanisms.budget import exceeds
from ldpsurvey.shared.survey import strict_json
from ldpsurvey.shared.survey.check import refusals, refused_message
from ldpsurvey.shared.survey.manifest import decode_definition

# What a deletion empties: every table holding rows of a survey or a draft.
DELETED = (*survey_store.SURVEY_TABLES, "drafts")


def checked(definition: Any, epsilon_cap: float) -> Survey:
    """A survey definition validated (InvalidSurvey) and within the server's per-question
    epsilon cap (EpsilonAboveCap)."""
    try:
        survey = parse_definition(definition)
    except SurveyError as exc:
        raise InvalidSurvey(str(exc)) from None
    for question in survey.questions:
        if exceeds(question.epsilon, epsilon_cap):
            raise EpsilonAboveCap(f"question {question.id!r}: epsilon {question.epsilon:.10g} is "
                                  f"above this server's cap {epsilon_cap:g}")
    return survey


def create_draft(db: Connection, caller: KeyRecord, definition: Any,
                 epsilon_cap: float) -> tuple[str, Survey]:
    """Keep a checked definition as a new draft the caller owns; its id and the survey."""
    survey = checked(definition, epsilon_cap)
    survey_id = new_survey_id()
    draft_store.insert_draft(db, survey_id, caller.researcher_id, _text(definition))
    return survey_id, survey


def upload_draft(db: Connection, caller: KeyRecord, name: str, raw: bytes,
                 above_default_ceilings: bool, epsilon_cap: float) -> tuple[str, Survey]:
    """A survey file (TOML, or JSON when `name` ends in .json) kept as a new draft, checked
    as `ldp-survey survey check` and `survey create` check it: InvalidSurvey naming the
    problem, or every refusal respondents with the default limits would make, each with its
    fix (shared.check.refusals), unless `above_default_ceilings`; EpsilonAboveCap."""
    try:
        definition = decode_definition(raw, name or "survey.toml")
        survey = parse_definition(definition)
    except SurveyError as exc:
        raise InvalidSurvey(str(exc)) from None
    refused = refusals(survey)
    if refused and not above_default_ceilings:
        raise InvalidSurvey(refused_message(refused))
    return create_draft(db, caller, definition, epsilon_cap)


def edit(db: Connection, caller: KeyRecord, survey_id: str, definition: Any,
         epsilon_cap: float) -> Survey:
    """Replace a draft's definition with a checked one. AlreadyPublished, SurveyNotFound."""
    access.draft(db, caller, survey_id)
    survey = checked(definition, epsilon_cap)
    if not draft_store.update_draft(db, survey_id, _text(definition)):
        raise AlreadyPublished(survey_id)  # published (or deleted) meanwhile
    return survey


def publish(db: Connection, caller: KeyRecord, survey_id: str, key: SigningKey,
            epsilon_cap: float, origin: str, form: dict[str, str]) -> Survey:
    """Publish a draft under its id: check its definition again (the cap may have changed),
    sign its manifest with the web `origin` and the `form` digests (assets.form_digests), store
    it open, owned by the draft's owner, and drop the draft, in one transaction.
    AlreadyPublished (also when another request published it first), SurveyNotFound,
    InvalidSurvey, EpsilonAboveCap."""
    found = access.draft(db, caller, survey_id)
    survey = _as_published(found.definition, survey_id, epsilon_cap, key.key_id, origin, form)
    with db.transaction():
        if not draft_store.take_draft(db, survey_id):
            raise AlreadyPublished(survey_id)
        _store_published(db, survey, key, found.owner_id)
    return survey


def publish_new(db: Connection, caller: KeyRecord, definition: Any, key: SigningKey,
                epsilon_cap: float, origin: str, form: dict[str, str]) -> Survey:
    """Publish a definition at once, as publish does a draft's (with the web `origin` and the
    `form` digests), under a new id and owned by the caller's researcher; no draft is kept.
    InvalidSurvey, EpsilonAboveCap."""
    survey = _as_published(definition, new_survey_id(), epsilon_cap, key.key_id, origin, form)
    _store_published(db, survey, key, caller.researcher_id)
    return survey


def _store_published(db: Connection, survey: Survey, key: SigningKey, owner_id: str) -> None:
    """Sign the survey's manifest and store it open, owned by `owner_id`."""
    survey_store.create_survey(db, survey, key.sign(survey.manifest_bytes()), owner_id)


def preview(db: Connection, caller: KeyRecord, survey_id: str, epsilon_cap: float,
            key_id: str, origin: str, form: dict[str, str]) -> Survey:
    """A draft as publishing it now would make it (checked, with this id, key, origin and form), for
    its preview; nothing is signed or stored. AlreadyPublished, SurveyNotFound, InvalidSurvey,
    EpsilonAboveCap."""
    return _as_published(access.draft(db, caller, survey_id).definition, survey_id,
                         epsilon_cap, key_id, origin, form)


def _as_published(definition: Any, survey_id: str, epsilon_cap: float, key_id: str,
                  origin: str, form: dict[str, str]) -> Survey:
    """A definition checked, as published with this id, key, web origin and form digests."""
    return replace(checked(definition, epsilon_cap), survey_id=survey_id, key_id=key_id,
                   origin=origin, form=form)


def copy(db: Connection, caller: KeyRecord, survey_id: str,
         epsilon_cap: float) -> tuple[str, Survey]:
    """A new draft, owned by the caller, with the definition of a survey the caller may read
    (a draft of theirs, or a published survey: definition_of its manifest)."""
    try:
        definition = definition_of(access.check(db, caller, survey_id, access.READ).survey)
    except SurveyIsDraft:
        definition = access.draft(db, caller, survey_id).definition
    return create_draft(db, caller, definition, epsilon_cap)


# The manifest's fields the aggregator adds at publishing; a definition has none of them.
PUBLISHED_FIELDS = ("format", "survey_id", "key_id", "origin", "form", "total_epsilon")


def definition_of(survey: Survey) -> dict:
    """A definition that parses to the same survey but for its id, key, origin and form: the
    manifest's fields without those the aggregator adds, each question by its alpha and beta
    (its epsilon follows from them), the release batch as the survey reads it (a manifest of
    format /1 has none: 1) and the cross-tabs always listed."""
    manifest = survey.manifest()
    definition = {name: value for name, value in manifest.items()
                  if name not in PUBLISHED_FIELDS and value is not None}
    definition["release_batch"] = survey.release_batch
    definition["crosstabs"] = [list(pair) for pair in survey.crosstabs]
    definition["questions"] = [{name: value for name, value in question.items()
                                if name != "epsilon"} for question in manifest["questions"]]
    return definition


def close(db: Connection, caller: KeyRecord, survey_id: str) -> None:
    """Close for good: release whatever is pending (a final batch can be small), refuse
    answers from now on, delete the idempotency records and unspent tokens.
    SurveyNotFound, Forbidden (see access.check)."""
    access.check(db, caller, survey_id, access.MANAGE)
    with db.transaction():
        survey_store.lock_survey(db, survey_id, exclusive=True)
        releases.release_locked(db, survey_store.get_survey(db, survey_id).survey, minimum=1)
        survey_store.mark_closed(db, survey_id)  # after: with the records the release just filed
    db.scrub(releases.SCRUBBED)


def archive(db: Connection, caller: KeyRecord, survey_id: str, archived: bool = True) -> None:
    """Archive a closed survey (hidden from listings, its data kept), or with archived=False
    bring it back. SurveyOpen, ArchiveConflict, SurveyIsDraft, SurveyNotFound, Forbidden."""
    access.check(db, caller, survey_id, access.MANAGE)
    with db.transaction():
        if survey_store.lock_survey(db, survey_id, exclusive=True) != "closed":
            raise SurveyOpen(f"survey {survey_id} is open: close it first (`ldp-survey survey "
                             f"close {survey_id}`); only a closed survey is archived")
        if not survey_store.mark_archived(db, survey_id, archived):
            raise ArchiveConflict(f"survey {survey_id} is "
                                  f"{'already' if archived else 'not'} archived")


def delete(db: Connection, caller: KeyRecord, survey_id: str, force: bool) -> None:
    """Delete a draft, or a published survey with its responses (released and pending),
    counters, releases, tokens, idempotency records, shares and relay scopes, then scrub what
    the deleted rows leave in the database's files. An open survey only with `force`: whether
    answers wait in its pool is never told (it would date them), so every open survey may
    hold some. Owner or admin. SurveyOpen, SurveyNotFound, Forbidden."""
    try:
        access.check(db, caller, survey_id, access.MANAGE)
    except SurveyIsDraft:
        with db.transaction():
            taken = draft_store.take_draft(db, survey_id)
        if not taken:  # published meanwhile: delete it as the published survey it now is
            delete(db, caller, survey_id, force)
            return
    else:
        with db.transaction():
            if survey_store.lock_survey(db, survey_id, exclusive=True) == "open" and not force:
                raise SurveyOpen(
                    f"survey {survey_id} is open and may hold answers (how many wait for "
                    "release is never shown): close it first, or delete it anyway with force "
                    "(`ldp-survey survey delete --force`, DELETE ...?force=true)")
            survey_store.delete_survey(db, survey_id)
    db.scrub(DELETED)


def _text(definition: Any) -> str:
    """A checked definition as stored: canonical JSON text."""
    return strict_json.dumps(definition).decode()
