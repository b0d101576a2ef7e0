"""Analyses beyond the estimates, on ldpsurvey.analysis: the regression of a randomized yes/no
answer on covariates and survey weights raked to population margins of openly answered
questions. It is loaded on first use, so a server without the `analysis` extra starts and
answers everything else; these answer 501.

In a survey with openly answered (disclosed) questions, every regression group and weighting
margin level must hold 0 or at least min_cell respondents (the MIN_CELL setting), so that the
open answers single no one out.

Every analysis is bounded before any work (analysis.regression.Size against the caller's
Budget: AnalysisTooLarge) and fitted in a process of its own under that budget (budgets.py)."""

import importlib
import json
from collections import Counter

from ldpsurvey.aggregator.exceptions import (
    AnalysisTooLarge,
    AnalysisUnavailable,
    InvalidParameter,
    RegressionFailed,
)
from ldpsurvey.aggregator.services.budgets import LIMITS, Budget, Runner
from ldpsurvey.aggregator.store import releases as release_store
from ldpsurvey.aggregator.store import responses as response_store
from ldpsurvey.aggregator.store.connection import Connection
from ldpsurvey.shared import Survey

TALLY = "_n"  # the tally's count column: no question id starts with "_"


def analysis_package():
    """The analysis package, or AnalysisUnavailable without the extra."""
    try:
        analysis = importlib.import_module("ldpsurvey.analysis")
    except ImportError:
        raise AnalysisUnavailable("regression and weights need the analysis extra on the "
                                  "server: pip install 'ldp-survey[analysis]'") from None
    return analysis


def regression(db: Connection, survey: Survey, formula: str, confidence: float,
               min_cell: int, runner: Runner, budget: Budget) -> dict | None:
    """analysis.rr_logistic of `formula` (question ids; openly answered questions are plain
    covariates) over the released responses, tallied as they stream, within `budget`; None
    before the first release. InvalidParameter for a formula that is not one of the survey's
    questions, cannot be fitted or has a group below min_cell; AnalysisTooLarge (before any
    work), AnalysisStopped, AnalysisBusy; RegressionFailed when the fit has no maximum."""
    analysis = analysis_package()
    used = _formula_questions(analysis, survey, formula)
    _affordable(analysis, db, survey, formula, used, (), budget)
    with runner.slot(budget):
        tallied = _tally(survey, db, used)
        if tallied is None:
            return None
        frame, mechanisms = tallied
        return runner.run(budget, fit_regression, formula, frame, mechanisms, confidence,
                          _min_cell(survey, min_cell), budget.iterations)


def weighted(db: Connection, survey: Survey, margins: dict, formula: str | None,
             confidence: float, min_cell: int, runner: Runner, budget: Budget) -> dict | None:
    """analysis.weighted_results over the released responses, tallied as they stream (one
    count per distinct pattern of the survey's yes/no and choice answers and the formula's),
    raked to `margins` {question id: {option label: share}}, the questions of other schemes
    listed as left out with the reason, within `budget`; None before the first release.
    InvalidParameter for margins or a formula that cannot be used; AnalysisTooLarge,
    AnalysisStopped, AnalysisBusy, RegressionFailed."""
    analysis = analysis_package()
    _known(survey, "weights", margins)
    for name in margins:  # its reports are no option of its own: neither tallied nor raked
        scheme = survey.question(name).scheme.name
        if scheme not in _TALLIED:
            raise InvalidParameter(f"weights: {analysis.data.unsupported(name, scheme).reason}")
    used = _formula_questions(analysis, survey, formula) if formula is not None else []
    columns = [q.id for q in survey.questions
               if q.id in used or q.id in margins or (q.options and q.scheme.name in _TALLIED)]
    if formula is not None:
        _affordable(analysis, db, survey, formula, columns, margins, budget)
    with runner.slot(budget):
        tallied = _tally(survey, db, columns)
        if tallied is None:
            return None
        frame, mechanisms = tallied
        mechanisms |= {q.id: analysis.data.unsupported(q.id, q.scheme.name)  # said left out
                       for q in survey.questions if q.scheme.name not in _TALLIED}
        return runner.run(budget, fit_weighted, frame, mechanisms, margins, formula,
                          confidence, _min_cell(survey, min_cell), budget.iterations)


def fit_regression(formula: str, frame, mechanisms: dict, confidence: float,
                   min_cell: int | None, iterations: int) -> dict:
    """What `regression` runs in its budgeted process."""
    analysis = analysis_package()
    return _run(analysis, "regress", lambda: analysis.rr_logistic(
        formula, frame, mechanisms, counts=TALLY, confidence=confidence, min_cell=min_cell,
        max_iterations=iterations).as_dict())


def fit_weighted(frame, mechanisms: dict, margins: dict, formula: str | None,
                 confidence: float, min_cell: int | None, iterations: int) -> dict:
    """What `weighted` runs in its budgeted process."""
    analysis = analysis_package()
    return _run(analysis, "weights", lambda: analysis.weighted_results(
        frame, mechanisms, margins, formula=formula, counts=TALLY, confidence=confidence,
        min_cell=min_cell, max_iterations=iterations))


def _affordable(analysis, db: Connection, survey: Survey, formula: str, columns: list[str],
                raked, budget: Budget) -> None:
    """AnalysisTooLarge, before any work, when fitting `formula` to the released responses'
    `columns` (raked on `raked`) would take more parameters or latent rows than `budget`."""
    questions = {q.id: q for q in survey.questions}
    levels = {name: list(questions[name].options) or None for name in columns}
    randomized = [name for name in columns if not questions[name].disclosed]
    size = analysis.regression.size(formula, levels, randomized,
                                    release_store.released_count(db, survey.survey_id), list(raked))
    for field, what in (("parameters", "parameters"), ("latent_rows", "latent rows (units "
                        "times combinations of the randomized covariates' options)")):
        value, limit = getattr(size, field), getattr(budget, field)
        if value > limit:
            raise AnalysisTooLarge(f"regress: this model has {value} {what}, above the limit of "
                                   f"{limit} ({LIMITS[field]}{budget.setting}): fit fewer "
                                   "covariates or interactions")


_TALLIED = ("forced_response", "disclosed")  # schemes whose report is the option (or number)


def _min_cell(survey: Survey, min_cell: int) -> int | None:
    """min_cell for a survey with an openly answered question, else no minimum."""
    return min_cell if survey.opened else None


def _known(survey: Survey, option: str, names) -> None:
    """InvalidParameter, prefixed with the option's name, for the first of `names` that is
    no question of the survey."""
    ids = [q.id for q in survey.questions]
    for name in names:
        if name not in ids:
            raise InvalidParameter(f"{option}: {name!r} is no question of this survey; the "
                                   f"questions are {', '.join(ids)}")


def _formula_questions(analysis, survey: Survey, formula: str) -> list[str]:
    """The formula's outcome and covariates, each a forced-response or open question."""
    try:
        outcome, names = analysis.regression.parse_formula(formula)
    except analysis.AnalysisError as error:
        raise InvalidParameter(f"regress: {error}") from None
    questions = {q.id: q for q in survey.questions}
    used = list(dict.fromkeys([outcome, *names]))
    _known(survey, "regress", used)
    for name in used:
        if questions[name].scheme.name not in _TALLIED:
            raise InvalidParameter(f"regress: {name!r} uses {questions[name].scheme.name}; a "
                                   "regression takes yes/no and choice questions randomized by "
                                   "forced response, and openly answered questions")
    return used


def _tally(survey: Survey, db: Connection, used: list[str]):
    """The released responses' patterns of the `used` questions as a frame (categorical
    columns of option labels; an open number's column numeric) with their counts in TALLY,
    and the randomized ones' reported mechanisms; None before the first release."""
    import pandas as pd

    questions = {q.id: q for q in survey.questions}
    through = release_store.last_release_number(db, survey.survey_id)
    tally = Counter(tuple(answers[q] for q in used)
                    for answers in map(json.loads, response_store.stored_answers(db, survey.survey_id,
                                                                        through)))
    if not tally:
        return None
    frame = pd.DataFrame(list(tally), columns=used)
    for name in used:
        if questions[name].options:
            frame[name] = pd.Categorical.from_codes(frame[name],
                                                    categories=questions[name].options)
    frame[TALLY] = list(tally.values())
    return frame, {q: questions[q].reported_mechanism for q in used if not questions[q].disclosed}


def _run(analysis, name: str, fit):
    """fit(), its AnalysisError as InvalidParameter (prefixed with the option's name) and its
    ConvergenceError as RegressionFailed."""
    try:
        return fit()
    except analysis.AnalysisError as error:
        raise InvalidParameter(f"{name}: {error}") from None
    except analysis.ConvergenceError as error:
        raise RegressionFailed(str(error)) from None
