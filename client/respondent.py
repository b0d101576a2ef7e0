"""Answering a survey: randomize on this device (once), then send only the randomized answers."""

import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from ldpsurvey.shared.randomizer import Draw, randomize, secure_draw

from . import http
from .state import LocalState
from .verify import VerifiedSurvey

SUBMIT_RETRIES = 4


@dataclass(frozen=True)
class Submission:
    """Exactly what will be sent: randomized answers and the idempotency key. No true answer."""

    survey_id: str
    answers: dict[str, int]
    idempotency_key: str
    already_submitted: bool

    def body(self) -> dict:
        return {"answers": self.answers}


def unanswered(verified: VerifiedSurvey, state: LocalState) -> list[str]:
    """Questions this device has not randomized yet: only these need a true answer."""
    memo = state.memo(verified.aggregator, verified.survey.survey_id)
    return [q.id for q in verified.survey.questions if q.id not in memo["answers"]]


def prepare(verified: VerifiedSurvey, true_answers: Mapping[str, int], state: LocalState,
            draw: Draw = secure_draw) -> Submission:
    """Randomize each question not randomized before and remember the result (and one
    idempotency key) before anything is sent. A question answered before keeps its earlier
    randomized answer whatever is passed now, so answering again reveals nothing new.
    """
    survey = verified.survey
    memo = state.memo(verified.aggregator, survey.survey_id)
    for question in survey.questions:
        if question.id in memo["answers"]:
            continue
        if question.id not in true_answers:
            raise ValueError(f"question {question.id!r} needs an answer")
        memo["answers"][question.id] = randomize(true_answers[question.id],
                                                 verified.thresholds[question.id], draw)
    memo["idempotency_key"] = memo["idempotency_key"] or secrets.token_urlsafe(24)
    state.remember(verified.aggregator, survey.survey_id, memo)
    return Submission(survey.survey_id, {q.id: memo["answers"][q.id] for q in survey.questions},
                      memo["idempotency_key"], memo["submitted"])


def submit(verified: VerifiedSurvey, submission: Submission, state: LocalState,
           token: str | None = None, retries: int = SUBMIT_RETRIES) -> dict:
    """POST the randomized answers with the Idempotency-Key (and Survey-Token when invited);
    network failures are retried with the same key, so the server counts the answer once."""
    headers = {"Idempotency-Key": submission.idempotency_key}
    if token:
        headers["Survey-Token"] = token
    url = f"{verified.aggregator}/api/surveys/{submission.survey_id}/responses"
    result = http.request("POST", url, json_body=submission.body(), headers=headers,
                          retries=retries).json()
    memo = state.memo(verified.aggregator, submission.survey_id)
    memo["submitted"] = True
    state.remember(verified.aggregator, submission.survey_id, memo)
    return result
