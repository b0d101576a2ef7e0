"""The respondent payload: {"answers": {"<question id>": <report>, ...}}.

Every question of the survey exactly once, each value a report its scheme can produce (an
integer option index in [0, k) for forced response; scheme.check_report). Booleans where
integers belong, extra or missing questions, extra top-level fields are refused.
"""

from operator import itemgetter
from typing import Any

from ldpsurvey.aggregator.exceptions import BatchTooLarge, InvalidAnswers
from ldpsurvey.shared import Survey
from ldpsurvey.shared.mechanisms.protocol import Report

Answers = tuple[Report, ...]  # randomized reports, in the survey's question order


def parse_answers(survey: Survey, body: Any, where: str = "body") -> Answers:
    """Validate one response against the survey; raise InvalidAnswers naming the problem."""
    return _Parser(survey)(body, where)


class _Parser:
    """parse_answers for one survey, with what every response is checked against computed
    once (a batch checks thousands). `type(x) is int` refuses booleans, which are ints in
    Python; each value is checked by its question's scheme (check_report)."""

    def __init__(self, survey: Survey):
        self.expected = [q.id for q in survey.questions]
        self.keys = set(self.expected)
        self.checks = [(q.id, q.scheme.check_report) for q in survey.questions]

    def __call__(self, body: Any, where: str | None = None, index: int = 0) -> Answers:
        where = where or f"responses[{index}]"
        if type(body) is not dict or body.keys() != {"answers"}:
            raise InvalidAnswers(f"{where} must be an object with exactly one field, 'answers'")
        answers = body["answers"]
        if type(answers) is not dict:
            raise InvalidAnswers(f"{where}.answers must be an object mapping question id to "
                                 "option index")
        if answers.keys() != self.keys:
            missing = [qid for qid in self.expected if qid not in answers]
            if missing:
                raise InvalidAnswers(f"{where}.answers is missing question {missing[0]!r}")
            extra = sorted(set(answers) - self.keys)
            raise InvalidAnswers(f"{where}.answers has unknown question {extra[0][:60]!r}")
        values = tuple([answers[qid] for qid in self.expected])
        for (qid, check), value in zip(self.checks, values, strict=True):
            problem = check(value)
            if problem:
                raise InvalidAnswers(f"{where}.answers.{qid} {problem}")
        return values

    def many(self, bodies: list) -> list[Answers] | None:
        """Every body's answers if all are valid, else None (then parsing them one by one
        names the first problem). Each value is checked by its question's scheme; where a
        question's values are all ints (not booleans), each distinct value once: check_report
        is a function of the value alone."""
        shape, keys = {"answers"}, self.keys
        values = itemgetter(*self.expected)  # a tuple of the values in question order
        single = len(self.expected) == 1  # (then the value alone)
        rows = []
        for body in bodies:
            if type(body) is not dict or body.keys() != shape:
                return None
            answers = body["answers"]
            if type(answers) is not dict or answers.keys() != keys:
                return None
            rows.append((values(answers),) if single else values(answers))
        for (_, check), column in zip(self.checks, zip(*rows, strict=True), strict=True):
            checked = set(column) if set(map(type, column)) == {int} else column
            if any(check(value) for value in checked):
                return None
        return rows


def parse_batch(survey: Survey, body: Any, limit: int) -> list[Answers]:
    """{"responses": [<response>, ...]} with 1 to `limit` responses, each as parse_answers
    (its place named responses[i])."""
    if type(body) is not dict or body.keys() != {"responses"}:
        raise InvalidAnswers("body must be an object with exactly one field, 'responses'")
    responses = body["responses"]
    if not isinstance(responses, list) or not responses:
        raise InvalidAnswers("responses must be a non-empty list")
    if len(responses) > limit:
        raise BatchTooLarge(f"a batch holds at most {limit} responses, got {len(responses)}")
    parse = _Parser(survey)
    return parse.many(responses) or [parse(item, None, i) for i, item in enumerate(responses)]
