"""The respondent payload: {"answers": {"<question id>": <report>, ...}}.

Every question of the survey exactly once, each value a report its scheme can produce (an
integer option index in [0, k) for forced response; scheme.check_report). Booleans where
integers belong, extra or missing questions, extra top-level fields are refused.
"""

from typing import Any

from ldpsurvey.shared import Survey
from ldpsurvey.shared.scheme import Report

from .exceptions import BatchTooLarge, InvalidAnswers

Answers = tuple[Report, ...]  # randomized reports, in the survey's question order


def parse_answers(survey: Survey, body: Any, where: str = "body") -> Answers:
    """Validate one response against the survey; raise InvalidAnswers naming the problem.
    (`type(x) is int` refuses booleans, which are ints in Python.)"""
    if type(body) is not dict or body.keys() != {"answers"}:
        raise InvalidAnswers(f"{where} must be an object with exactly one field, 'answers'")
    answers = body["answers"]
    if type(answers) is not dict:
        raise InvalidAnswers(f"{where}.answers must be an object mapping question id to option index")
    expected = [q.id for q in survey.questions]
    if answers.keys() != set(expected):
        missing = [qid for qid in expected if qid not in answers]
        if missing:
            raise InvalidAnswers(f"{where}.answers is missing question {missing[0]!r}")
        extra = sorted(set(answers) - set(expected))
        raise InvalidAnswers(f"{where}.answers has unknown question {extra[0][:60]!r}")
    values = tuple(answers[qid] for qid in expected)
    for question, value in zip(survey.questions, values, strict=True):
        problem = question.scheme.check_report(value)
        if problem:
            raise InvalidAnswers(f"{where}.answers.{question.id} {problem}")
    return values


def parse_batch(survey: Survey, body: Any, limit: int) -> list[Answers]:
    """{"responses": [<response>, ...]} with 1 to `limit` responses, each as parse_answers."""
    if type(body) is not dict or body.keys() != {"responses"}:
        raise InvalidAnswers("body must be an object with exactly one field, 'responses'")
    responses = body["responses"]
    if not isinstance(responses, list) or not responses:
        raise InvalidAnswers("responses must be a non-empty list")
    if len(responses) > limit:
        raise BatchTooLarge(f"a batch holds at most {limit} responses, got {len(responses)}")
    return [parse_answers(survey, item, f"responses[{i}]") for i, item in enumerate(responses)]
