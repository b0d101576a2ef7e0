"""Answering a survey: randomize on this device (once), then send only the randomized answers."""

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ldpsurvey.client import http, ledger
from ldpsurvey.client.state import LocalState
from ldpsurvey.client.verified import VerifiedSurvey
from ldpsurvey.client.verify import check_unchanged, parameters
from ldpsurvey.shared import Question, Survey
from ldpsurvey.shared.http_contract import REPLAYED_HEADER
from ldpsurvey.shared.mechanisms.protocol import Report
from ldpsurvey.shared.mechanisms.randomizer import Draw, randomize, secure_draw

SUBMIT_RETRIES = 4


@dataclass(frozen=True)
class Submission:
    """Exactly what will be sent: randomized answers and the idempotency key. No true answer."""

    survey_id: str
    answers: dict[str, Report]
    idempotency_key: str
    already_submitted: bool

    def body(self) -> dict:
        return {"answers": self.answers}


def body_size(survey: Survey) -> int:
    """The size every response body to `survey` is padded to: the largest possible body (every
    report its scheme's longest, scheme.largest_report: for forced response the highest option
    index) rounded up to a whole http.BODY_SIZE_CLASS. So every response to one survey has one
    size on the wire, and surveys of similar size share it."""
    largest = Submission(survey.survey_id, {q.id: q.scheme.largest_report()
                                            for q in survey.questions}, "", False)
    return http.size_class(len(http.json_bytes(largest.body())))


def unanswered(verified: VerifiedSurvey, state: LocalState) -> list[str]:
    """Questions that need a true answer: not randomized before for this survey, and not a
    concept whose permanent answer this device keeps with the same settings."""
    record = state.record(verified.key_id, verified.survey.survey_id)
    reused = {qid for qid, status in ledger.concept_status(verified, state).items()
              if status == "reused"}
    return [q.id for q in verified.survey.questions
            if q.id not in record["answers"] and q.id not in reused]


def prepare(verified: VerifiedSurvey, true_answers: Mapping[str, Any], state: LocalState,
            draw: Draw = secure_draw) -> Submission:
    """Randomize each question not randomized before and remember the result (and one
    idempotency key) before anything is sent. A question answered before keeps its earlier
    randomized answer whatever is passed now, so answering again reveals nothing new. A
    concept question reports a fresh randomization of the concept's permanent answer, drawn
    from the true answer only the first time.
    """
    survey = verified.survey
    with state.transaction():  # another run may have answered it since it was fetched
        check_unchanged(verified, state)
        record = state.record(verified.key_id, survey.survey_id)
        for question in survey.questions:
            if question.id in record["answers"]:
                continue
            if question.concept is None:
                report = question.scheme.randomize(_true_answer(question, true_answers), draw)
            else:
                report = randomize(permanent_answer(verified, question, true_answers, state,
                                                    draw), verified.instantaneous[question.id],
                                   draw)
            record["answers"][question.id] = report
        record["idempotency_key"] = record["idempotency_key"] or secrets.token_urlsafe(24)
        record.update(title=survey.title, parameters=parameters(survey))
        state.remember(verified.key_id, survey.survey_id, record)
    return Submission(survey.survey_id, {q.id: record["answers"][q.id] for q in survey.questions},
                      record["idempotency_key"], record["submitted"])


def _true_answer(question: Question, true_answers: Mapping[str, Any]) -> Any:
    """The question's true answer, checked by its scheme (ValueError)."""
    if question.id not in true_answers:
        raise ValueError(f"question {question.id!r} needs an answer")
    return question.scheme.check_truth(true_answers[question.id])


def permanent_answer(verified: VerifiedSurvey, question: Question,
                     true_answers: Mapping[str, int], state: LocalState, draw: Draw) -> int:
    """The concept's permanent randomized answer on this device for these settings, whichever
    aggregator asks: drawn with the question's own mechanism from the true answer the first
    time and kept."""
    key = ledger.concept_key(question)
    kept = state.permanent(key)
    if kept is None:
        kept = {"answer": randomize(_true_answer(question, true_answers),
                                    verified.thresholds[question.id], draw),
                "charged_by": None, "keys": []}
        state.keep_permanent(key, kept)
    return kept["answer"]


def submit(verified: VerifiedSurvey, submission: Submission, state: LocalState,
           token: str | None = None, retries: int = SUBMIT_RETRIES) -> dict:
    """Charge the ledger (once, before the first attempt; TrustError if the survey changed since
    it was prepared), then POST the randomized answers
    with the Idempotency-Key (and Survey-Token when invited); network failures are retried
    with the same key, so the server counts the answer once (a retry more than the server's
    IDEMPOTENCY_DAYS after the answer's release would be counted again). Returns the server's reply
    (survey_id, accepted) and `replayed`: whether the server said (Idempotent-Replayed) that it
    had stored these answers before and counted them once."""
    with state.transaction():
        check_unchanged(verified, state)
        ledger.charge(verified, state)
    headers = {"Idempotency-Key": submission.idempotency_key}
    if token:
        headers["Survey-Token"] = token
    url = f"{verified.aggregator}/api/surveys/{submission.survey_id}/responses"
    response = http.request("POST", url, json_body=submission.body(), headers=headers,
                            retries=retries, padded_size=body_size(verified.survey))
    replayed = {name.lower(): value for name, value in response.headers.items()}.get(
        REPLAYED_HEADER.lower()) == "true"
    reply = response.json()
    result = {**(reply if isinstance(reply, dict) else {}), "replayed": replayed}
    with state.transaction():
        record = state.record(verified.key_id, submission.survey_id)
        record["submitted"] = True
        state.remember(verified.key_id, submission.survey_id, record)
    return result
