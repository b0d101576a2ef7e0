"""Analyses beyond the estimates, on ldpsurvey.analysis. It is loaded on first use, so a
server without the `analysis` extra starts and answers everything else; these answer 501."""

import json
from collections import Counter

from ldpsurvey.shared import Survey
from ldpsurvey.shared.forced_response import NAME as FORCED_RESPONSE

from . import store
from .database import Connection
from .exceptions import AnalysisUnavailable, InvalidParameter, RegressionFailed

MAX_FORMULA = 1000  # characters of a regression formula
TALLY = "_n"  # the tally's count column: no question id starts with "_"


def regression(db: Connection, survey: Survey, formula: str, confidence: float) -> dict | None:
    """analysis.rr_logistic of `formula` (question ids) over the released responses, tallied
    as they stream (one count per distinct pattern of the formula's answers: memory bounded
    by the patterns, not the responses), with each question's reported mechanism; None before
    the first release. InvalidParameter for a formula that is not one of the survey's
    questions or cannot be fitted, RegressionFailed when the fit has no maximum,
    AnalysisUnavailable without the extra."""
    try:
        import pandas as pd

        from ldpsurvey.analysis import AnalysisError, ConvergenceError, rr_logistic
        from ldpsurvey.analysis.regression import parse_formula
    except ImportError:
        raise AnalysisUnavailable("regression needs the analysis extra on the server: "
                                  "pip install 'ldp-survey[analysis]'") from None
    try:
        outcome, names = parse_formula(formula)
    except AnalysisError as error:
        raise InvalidParameter(f"regress: {error}") from None
    questions = {q.id: q for q in survey.questions}
    used = list(dict.fromkeys([outcome, *names]))
    unknown = [name for name in used if name not in questions]
    if unknown:
        raise InvalidParameter(f"regress: {unknown[0]!r} is no question of this survey; the "
                               f"questions are {', '.join(questions)}")
    other = [name for name in used if questions[name].scheme.name != FORCED_RESPONSE]
    if other:
        raise InvalidParameter(f"regress: {other[0]!r} uses {questions[other[0]].scheme.name}: "
                               "regression is for forced-response questions")
    through = store.last_release_number(db, survey.survey_id)
    tally = Counter(tuple(answers[q] for q in used)
                    for answers in map(json.loads, store.stored_answers(db, survey.survey_id, through)))
    if not tally:
        return None
    frame = pd.DataFrame(list(tally), columns=used)
    for name in used:
        frame[name] = pd.Categorical.from_codes(frame[name], categories=questions[name].options)
    frame[TALLY] = list(tally.values())
    try:
        fit = rr_logistic(formula, frame, {q: questions[q].reported_mechanism for q in used},
                          counts=TALLY, confidence=confidence)
    except AnalysisError as error:
        raise InvalidParameter(f"regress: {error}") from None
    except ConvergenceError as error:
        raise RegressionFailed(str(error)) from None
    return fit.as_dict()


def regression_formula(value: str | None) -> str | None:
    """A `regress` query value: None, or a formula of at most MAX_FORMULA characters."""
    if value is None:
        return None
    if not value.strip() or len(value) > MAX_FORMULA:
        raise InvalidParameter(f"regress must be a formula of 1 to {MAX_FORMULA} characters, "
                               "such as smoked ~ sleep + drinks")
    return value
