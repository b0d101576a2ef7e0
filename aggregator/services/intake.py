"""Accepting responses: validate them against their survey, then store them in the survey's
pending pool with their idempotency claim, and spend their token, in one transaction, all or
nothing.
Intake never releases: pools are released at scheduled instants (releases.py), so no request
is slower, or answered differently, for filling one."""

from dataclasses import dataclass
from typing import Any

from ldpsurvey.aggregator.exceptions import (
    BatchOnInvitationOnly,
    OriginNotAllowed,
    TokenRejected,
    TokenRequired,
)
from ldpsurvey.aggregator.services import access
from ldpsurvey.aggregator.services.answers import Answers, parse_answers, parse_batch
from ldpsurvey.aggregator.store import idempotency as idempotency_store
from ldpsurvey.aggregator.store import pending as pending_store
from ldpsurvey.aggregator.store import responses as response_store
from ldpsurvey.aggregator.store import surveys as survey_store
from ldpsurvey.aggregator.store import tokens as token_store
from ldpsurvey.aggregator.store.accounts import KeyRecord
from ldpsurvey.aggregator.store.connection import Connection
from ldpsurvey.shared import Survey
from ldpsurvey.shared.http_contract import SURVEY_TOKEN


@dataclass(frozen=True)
class Accepted:
    """How many responses the request stored; `replayed` when it repeated an earlier request
    (same Idempotency-Key and body), which is answered as the first and counted once."""

    survey_id: str
    accepted: int
    replayed: bool


def accept_one(db: Connection, survey_id: str, body: Any, idempotency_key: str | None,
               token: str | None, origin: str | None = None) -> Accepted:
    """One respondent's randomized answers. An invitation-only survey needs a token, which is
    spent with the answers; other surveys ignore it. A browser's request names its page's
    `origin` (the Origin header): the survey's own or one of its form_origins, else
    OriginNotAllowed (a survey published before format /5 names no origin: any). The survey's
    manifest is read once per process (store.published_survey); a survey deleted since is
    unknown (404) to a valid request in its transaction, and to an invalid one before its
    error."""
    survey = survey_store.published_survey(db, survey_id)
    try:
        if origin is not None and survey.origin is not None and origin not in (
                survey.origin, *survey.form_origins):
            raise OriginNotAllowed(origin)
        answers = parse_answers(survey, body)
        if not survey.invitation_only:
            token = None
        elif token is None:
            raise TokenRequired()
        elif not SURVEY_TOKEN.fullmatch(token):
            raise TokenRejected()
    except Exception as exc:
        refused = exc  # checked outside this block, so no error it raises chains this one
    else:
        return _store(db, survey, [answers], idempotency_key, token)
    survey_store.get_survey(db, survey_id)  # SurveyNotFound if it was deleted
    raise refused


def accept_batch(db: Connection, caller: KeyRecord, survey_id: str, body: Any,
                 idempotency_key: str | None, limit: int) -> Accepted:
    """Many responses at once from a key that may fill the survey (access.check): all stored
    or none. Never on an invitation-only survey, where each response needs its own token.
    SurveyNotFound, Forbidden, BatchOnInvitationOnly."""
    survey = access.check(db, caller, survey_id, access.FILL).survey
    if survey.invitation_only:
        raise BatchOnInvitationOnly()
    return _store(db, survey, parse_batch(survey, body, limit), idempotency_key, None)


def _store(db: Connection, survey: Survey, responses: list[Answers],
           idempotency_key: str | None, token: str | None) -> Accepted:
    """The intake transaction: open check, then the responses go to the pending pool with the
    request's idempotency claim, a whole batch from a researcher or relay as well, then the
    token is spent. A retry (a claim released before, or pending) is answered as its first
    request and spends nothing. When it commits they are on disk (acknowledged); concurrent
    requests may share the commit (grouped). What needs no query (the sealed rows, the
    claim's keyed hashes) is computed before it."""
    survey_id = survey.survey_id
    rows = response_store.answers_json(survey, responses)
    sealed = pending_store.sealed_pending(db, survey, rows)
    claim = (None if idempotency_key is None
             else idempotency_store.idempotency_claim(db, idempotency_key, "\n".join(rows)))

    def intake(tx: Connection) -> Accepted:
        survey_store.lock_open_survey(tx, survey_id)
        earlier = None if claim is None else idempotency_store.released_claim(tx, survey_id, claim)
        if earlier is not None:
            return Accepted(survey_id, earlier, replayed=True)
        if not pending_store.insert_pending(tx, survey_id, sealed, len(rows), claim):
            return Accepted(survey_id, idempotency_store.pending_claim(tx, survey_id, claim), replayed=True)
        if token is not None:
            token_store.spend_token(tx, survey_id, token)  # TokenRejected undoes the insert
        return Accepted(survey_id, len(rows), replayed=False)

    return db.grouped(intake)
