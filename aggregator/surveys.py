"""Surveys for researchers and pages: publish, list, close, mint invitation tokens, the
estimates document and the exports."""

from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, replace
from typing import Any

from ldpsurvey.shared import (
    DEFAULT_CONFIDENCE,
    DEFAULT_METHOD,
    METHODS,
    Estimate,
    Question,
    Survey,
    SurveyError,
    estimate,
    parse_definition,
)
from ldpsurvey.shared.budget import exceeds
from ldpsurvey.shared.shuffle import central_epsilon

from . import access, exports, releases, store
from .database import Connection
from .exceptions import (
    EpsilonAboveCap,
    InvalidCount,
    InvalidParameter,
    InvalidSurvey,
    NotInvitationOnly,
    SurveyClosed,
    SurveyNotFound,
    Unauthorized,
)
from .ids import new_survey_id, new_tokens
from .signing import SigningKey
from .store import KeyRecord


def empty_estimate(epsilon: float, confidence: float, method: str) -> dict:
    """Every estimate key before a question's first answer: what is known, the rest null."""
    known = {"n": 0, "reported_count": 0, "ci_method": method, "confidence": confidence,
             "epsilon": epsilon}
    return {field.name: known.get(field.name) for field in fields(Estimate)}


def publish(db: Connection, caller: KeyRecord, definition: Any, key: SigningKey,
            epsilon_cap: float) -> Survey:
    """Validate a survey definition, give it a new id, sign its manifest, store it open and
    owned by the caller's researcher."""
    try:
        survey = parse_definition(definition)
    except SurveyError as exc:
        raise InvalidSurvey(str(exc)) from None
    for question in survey.questions:
        epsilon = question.epsilon
        if exceeds(epsilon, epsilon_cap):
            raise EpsilonAboveCap(f"question {question.id!r}: epsilon {epsilon:.10g} is above "
                                  f"this server's cap {epsilon_cap:g}")
    survey = replace(survey, survey_id=new_survey_id(), key_id=key.key_id)
    store.create_survey(db, survey, key.sign(survey.manifest_bytes()), caller.researcher_id)
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


def listing(db: Connection, caller: KeyRecord) -> list[dict[str, str]]:
    """The surveys the caller owns or shares (an admin: all), with their status."""
    return [{"survey_id": sid, "status": status}
            for sid, status in store.list_surveys(db, access.listed_for(caller))]


def close(db: Connection, caller: KeyRecord, survey_id: str) -> None:
    """Close for good: release whatever is pending (a final batch can be small), refuse
    answers from now on, delete the idempotency records and unspent tokens.
    SurveyNotFound, Forbidden (see access.check)."""
    access.check(db, caller, survey_id, access.MANAGE)
    with db.transaction():
        store.lock_survey(db, survey_id, exclusive=True)
        releases.release_locked(db, store.get_survey(db, survey_id).survey, minimum=1)
        store.mark_closed(db, survey_id)
    db.scrub(releases.SCRUBBED)


def mint_tokens(db: Connection, caller: KeyRecord, survey_id: str,
                read_body: Callable[[], Any], limit: int) -> list[str]:
    """`{"count": N}` single-use invitation tokens (1 <= N <= limit) for an open,
    invitation-only survey the caller manages; only their hashes are stored. The body is read
    only once the survey is known to take tokens, so that is what an unknown or closed survey
    is told."""
    access.check(db, caller, survey_id, access.MANAGE)
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


def estimates(db: Connection, survey_id: str, caller: KeyRecord | None, central_delta: float,
              confidence: str | None = None, method: str | None = None) -> dict:
    """The estimates document for this caller (None: anonymous), at the given confidence
    level and interval method (as text, from a query; default 0.95 and the default method),
    with the central epsilon at delta at most `central_delta`.
    SurveyNotFound, Unauthorized (see reader_of), InvalidParameter."""
    stored = store.get_survey(db, survey_id)
    reader = reader_of(db, stored.survey, caller)
    if reader is None:
        raise Unauthorized("this survey's results need a researcher key")
    return estimates_document(db, stored, *estimate_options(confidence, method),
                              researcher=reader, central_delta=central_delta)


def reader_of(db: Connection, survey: Survey, caller: KeyRecord | None) -> bool | None:
    """Whether the caller reads the survey's results as one of its researchers (True) or as
    the public (False, a public-results survey); None: only with a key. A key that may not
    use the survey gets SurveyNotFound, as for an unknown survey."""
    if access.may_read(db, caller, survey.survey_id):
        return True
    if survey.public_results:
        return False
    if caller is None or caller.role == "relay":
        return None
    raise SurveyNotFound(survey.survey_id)


@dataclass(frozen=True)
class ResultsPage:
    """A survey and, if the caller may read them, its estimates (None: a login is needed);
    `researcher` when the caller reads them as one of its researchers, not as the public."""

    survey: Survey
    estimates: dict | None
    researcher: bool = False


def results_page(db: Connection, survey_id: str, caller: KeyRecord | None,
                 central_delta: float) -> ResultsPage:
    """The results page's content at the default confidence and method for the caller of a
    session (None: not logged in). SurveyNotFound (see reader_of)."""
    stored = store.get_survey(db, survey_id)
    reader = reader_of(db, stored.survey, caller)
    if reader is None:
        return ResultsPage(stored.survey, None)
    return ResultsPage(stored.survey, estimates_document(
        db, stored, DEFAULT_CONFIDENCE, DEFAULT_METHOD, researcher=reader,
        central_delta=central_delta), researcher=reader)


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
                       method: str, researcher: bool, central_delta: float) -> dict:
    """Per question its parameters and, per option, the shared estimator's keys applied to
    the counts of released responses (null before the first release); the survey's release
    batch, the shuffle-amplified central epsilon (`central`) and, for researchers only, how
    many responses wait for release."""
    survey = stored.survey
    counts = store.counts(db, survey.survey_id)
    questions = []
    for question in survey.questions:
        options = [{"index": j, "option": text} for j, text in enumerate(question.options)]
        question_counts = counts[question.id]
        n = sum(question_counts)
        if n:
            # a concept question's reports went through two layers: invert both, composed
            for entry, result in zip(options, estimate(question.reported_mechanism,
                                                       question_counts, confidence=confidence,
                                                       method=method),
                                     strict=True):
                entry.update(result.as_dict())
        else:
            for entry in options:
                entry.update(empty_estimate(question.epsilon, confidence, method))
        questions.append({"id": question.id, "text": question.text, "type": question.type,
                          "alpha": question.mechanism.alpha,
                          "beta": list(question.mechanism.beta),
                          "epsilon": question.epsilon, "n": n,
                          "options": options, **concept_fields(question)})
    document = {"survey_id": survey.survey_id, "title": survey.title, "status": stored.status,
                "total_epsilon": survey.total_epsilon, "confidence": confidence,
                "ci_method": method, "release_batch": survey.release_batch,
                "questions": questions}
    document["central"] = central(survey, store.smallest_release(db, survey.survey_id),
                                  questions[0]["n"] if questions else 0, central_delta)
    if researcher:
        document["pending"] = store.pending_count(db, survey.survey_id)
    return document


def concept_fields(question: Question) -> dict:
    """For a concept question: the concept, irr_alpha and the composed (alpha, beta) that its
    estimates invert; nothing for other questions."""
    if question.concept is None:
        return {}
    m = question.reported_mechanism
    return {"concept": question.concept, "irr_alpha": question.irr_alpha,
            "reported": {"alpha": m.alpha, "beta": list(m.beta)}}


ASSUMES = ("The central epsilon holds only if the other responses in each release come from "
           "honest respondents: whoever can add responses (anyone, on a survey open to all; "
           "its owner, an admin or its relay key with a batch, on one not invitation-only) can "
           "fill a release around one respondent and isolate them. Against that, each "
           "respondent has only the local epsilon.")


def central(survey: Survey, smallest_release: int | None, released: int,
            delta_setting: float) -> dict:
    """What someone who sees only released batches can learn about one respondent: each
    report (all its answers, local epsilon eps0 = the survey's realized total) is shuffled among
    the others of its release (Feldman, McMillan and Talwar, FOCS 2021; shared/shuffle.py).
    Per release with n = the smallest release so far; over the whole survey (against someone
    who sees only the final export) with n = the released responses; each at most eps0, and
    eps0 itself before any release. One delta for both: min(CENTRAL_DELTA, 1 / (10 n))."""
    eps0 = survey.total_epsilon
    delta = min(delta_setting, 1 / (10 * released)) if released else delta_setting
    return {"delta": delta,
            "epsilon_per_release": central_epsilon(eps0, smallest_release, delta)
            if smallest_release else eps0,
            "epsilon_whole_survey": central_epsilon(eps0, released, delta) if released else eps0,
            "assumes": ASSUMES}


@dataclass(frozen=True)
class Export:
    body: Iterator[str]  # read from the database only as it is iterated
    mimetype: str
    filename: str


EXPORT_FORMATS = {"csv": (exports.to_csv, "text/csv"),
                  "jsonl": (exports.to_jsonl, "application/jsonl")}


def export(db: Connection, caller: KeyRecord, survey_id: str, kind: str,
           central_delta: float) -> Export:
    """Every released response, one per row in a random order, with the manifest, design
    parameters and central epsilon, streamed. SurveyNotFound, Forbidden (access.check).

    The order is that of the responses' ids: 96 bits from the OS's CSPRNG drawn at release,
    independent of the answers and of arrival. Sorting independent, identically distributed
    keys gives each of the n! orders the same chance (they are exchangeable; two equal keys
    have a chance below n^2 / 2^97), so the order is uniformly random, yet needs no shuffle in
    memory: the database reads the rows in its index's order. It is the same in every export."""
    access.check(db, caller, survey_id, access.READ)
    stored = store.get_survey(db, survey_id)
    write, mimetype = EXPORT_FORMATS[kind]
    return Export(_export_body(db, stored, write, central_delta), mimetype,
                  f"{survey_id}.{kind}")


def _export_body(db: Connection, stored: store.StoredSurvey, write: Callable,
                 central_delta: float) -> Iterator[str]:
    """The export's pieces, header and rows read in one snapshot, so they agree even while
    releases go on."""
    survey_id = stored.survey.survey_id
    with db.snapshot():
        amplified = central(stored.survey, store.smallest_release(db, survey_id),
                            store.released_count(db, survey_id), central_delta)
        yield from write(stored.survey, stored.manifest, amplified,
                         store.stored_answers(db, survey_id))
