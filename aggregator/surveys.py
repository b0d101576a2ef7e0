"""Surveys for researchers and pages: publish, list, close, mint invitation tokens, the
estimates document and the exports."""

import secrets
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from ldpsurvey.shared import (
    DEFAULT_CONFIDENCE,
    DEFAULT_METHOD,
    METHODS,
    Estimate,
    Survey,
    SurveyError,
    estimate,
    parse_definition,
    strict_json,
)
from ldpsurvey.shared.budget import exceeds

from . import exports, store
from .database import Connection
from .exceptions import (
    EpsilonAboveCap,
    InvalidCount,
    InvalidParameter,
    InvalidSurvey,
    NotInvitationOnly,
    SurveyClosed,
    Unauthorized,
)
from .ids import new_ids, new_tokens
from .signing import SigningKey


def empty_estimate(epsilon: float, confidence: float, method: str) -> dict:
    """Every estimate key before a question's first answer: what is known, the rest null."""
    known = {"n": 0, "reported_count": 0, "ci_method": method, "confidence": confidence,
             "epsilon": epsilon}
    return {field.name: known.get(field.name) for field in fields(Estimate)}


def publish(db: Connection, definition: Any, key: SigningKey, epsilon_cap: float) -> Survey:
    """Validate a survey definition, give it a new id, sign its manifest, store it open."""
    try:
        survey = parse_definition(definition)
    except SurveyError as exc:
        raise InvalidSurvey(str(exc)) from None
    for question in survey.questions:
        if exceeds(question.epsilon, epsilon_cap):
            raise EpsilonAboveCap(f"question {question.id!r}: epsilon {question.epsilon:.6g} "
                                  f"is above this server's cap {epsilon_cap:g}")
    survey = replace(survey, survey_id=new_ids(1)[0], key_id=key.key_id)
    store.create_survey(db, survey, key.sign(survey.manifest_bytes()))
    return survey


def published(db: Connection, survey_id: str) -> store.StoredSurvey:
    """The signed manifest, its signature and status. SurveyNotFound."""
    return store.get_survey(db, survey_id)


def open_for_answers(db: Connection, survey_id: str) -> Survey:
    """The survey, if it still takes answers. SurveyNotFound, SurveyClosed."""
    stored = store.get_survey(db, survey_id)
    if stored.status != "open":
        raise SurveyClosed()
    return stored.survey


def listing(db: Connection) -> list[dict[str, str]]:
    return [{"survey_id": sid, "status": status} for sid, status in store.list_surveys(db)]


def close(db: Connection, survey_id: str) -> None:
    """Close for good: the survey refuses answers from now on. SurveyNotFound."""
    store.close_survey(db, survey_id)


def mint_tokens(db: Connection, survey_id: str, read_body: Callable[[], Any],
                limit: int) -> list[str]:
    """`{"count": N}` single-use invitation tokens (1 <= N <= limit) for an open,
    invitation-only survey; only their hashes are stored. The body is read only once the
    survey is known to take tokens, so that is what an unknown or closed survey is told."""
    stored = store.get_survey(db, survey_id)
    if not stored.survey.invitation_only:
        raise NotInvitationOnly()
    if stored.status != "open":
        raise SurveyClosed("this survey is closed")
    body = read_body()
    count = body.get("count") if isinstance(body, dict) and set(body) == {"count"} else None
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= limit:
        raise InvalidCount(f"send {{\"count\": N}} with N from 1 to {limit}")
    tokens = new_tokens(count)
    with db.transaction():
        store.lock_open_survey(db, survey_id)  # a close meanwhile leaves no tokens behind
        store.insert_tokens(db, survey_id, tokens)
    return tokens


def results_readable(survey: Survey, caller_role: Callable[[], str | None]) -> bool:
    """Anyone reads a public-results survey's results; researchers read every survey's."""
    return survey.public_results or caller_role() == "researcher"


def estimates(db: Connection, survey_id: str, caller_role: Callable[[], str | None],
              confidence: str | None = None, method: str | None = None) -> dict:
    """The estimates document, for a caller who may read it, at the given confidence level and
    interval method (as text, from a query; default 0.95 and wilson). The caller's role is
    asked only for surveys whose results are not public. SurveyNotFound, Unauthorized,
    InvalidParameter."""
    stored = store.get_survey(db, survey_id)
    if not results_readable(stored.survey, caller_role):
        raise Unauthorized("this survey's results need a researcher key")
    return estimates_document(db, stored, *estimate_options(confidence, method))


@dataclass(frozen=True)
class ResultsPage:
    """A survey and, if the caller may read them, its estimates (None: a login is needed)."""

    survey: Survey
    estimates: dict | None


def results_page(db: Connection, survey_id: str,
                 caller_role: Callable[[], str | None]) -> ResultsPage:
    """The results page's content at the default confidence and method. SurveyNotFound."""
    stored = store.get_survey(db, survey_id)
    if not results_readable(stored.survey, caller_role):
        return ResultsPage(stored.survey, None)
    return ResultsPage(stored.survey, estimates_document(
        db, stored, DEFAULT_CONFIDENCE, DEFAULT_METHOD))


def estimate_options(confidence: str | None, method: str | None) -> tuple[float, str]:
    """Parse and check the confidence level in (0, 1) and the interval method."""
    method = DEFAULT_METHOD if method is None else method
    if method not in METHODS:
        raise InvalidParameter(f"method must be one of {', '.join(METHODS)}")
    try:
        level = DEFAULT_CONFIDENCE if confidence is None else float(confidence)
    except ValueError:
        level = -1.0
    if not 0.0 < level < 1.0:
        raise InvalidParameter("confidence must be a number in (0, 1)")
    return level, method


def estimates_document(db: Connection, stored: store.StoredSurvey, confidence: float,
                       method: str) -> dict:
    """Per question its parameters and, per option, the shared estimator's keys applied to
    the stored counts (null before the first answer)."""
    survey = stored.survey
    counts = store.counts(db, survey.survey_id)
    questions = []
    for question in survey.questions:
        options = [{"index": j, "option": text} for j, text in enumerate(question.options)]
        question_counts = counts[question.id]
        n = sum(question_counts)
        if n:
            for entry, result in zip(options, estimate(question.mechanism, question_counts,
                                                       confidence=confidence, method=method),
                                     strict=True):
                entry.update(result.as_dict())
        else:
            for entry in options:
                entry.update(empty_estimate(question.epsilon, confidence, method))
        questions.append({"id": question.id, "text": question.text, "type": question.type,
                          "alpha": question.mechanism.alpha,
                          "beta": list(question.mechanism.beta),
                          "epsilon": question.epsilon, "n": n,
                          "options": options})
    return {"survey_id": survey.survey_id, "title": survey.title, "status": stored.status,
            "total_epsilon": survey.total_epsilon, "confidence": confidence, "ci_method": method,
            "questions": questions}


@dataclass(frozen=True)
class Export:
    body: str
    mimetype: str
    filename: str


EXPORT_FORMATS = {"csv": (exports.to_csv, "text/csv"),
                  "jsonl": (exports.to_jsonl, "application/jsonl")}


def export(db: Connection, survey_id: str, kind: str) -> Export:
    """Every response, one per row in a random order (from the OS's CSPRNG), with the
    manifest and design parameters. SurveyNotFound."""
    stored = store.get_survey(db, survey_id)
    rows = [strict_json.loads(answers) for answers in store.stored_answers(db, survey_id)]
    secrets.SystemRandom().shuffle(rows)
    write, mimetype = EXPORT_FORMATS[kind]
    return Export(write(stored.survey, stored.manifest, rows), mimetype, f"{survey_id}.{kind}")
