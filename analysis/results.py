"""What `ldp-survey results --weights FILE`, the estimates endpoint's `weights` and this Python
API on an exported file report: raking weights to population margins of openly answered
questions (weights.rake), the weighted estimate of every option of every question
(weights.weighted_estimates, SEs by linearization) and, with a formula, the weighted regression
(regression.rr_logistic, sandwich SEs through the raking), with Kish's effective sample size."""

from collections.abc import Mapping

import pandas as pd

from ldpsurvey.analysis.data import Unsupported
from ldpsurvey.analysis.regression import MAX_ITERATIONS, rr_logistic
from ldpsurvey.analysis.weights import rake, weighted_estimates
from ldpsurvey.shared import DEFAULT_CONFIDENCE, Mechanism


def weighted_results(data: pd.DataFrame, mechanisms: Mapping[str, "Mechanism | Unsupported"],
                     margins: Mapping[str, Mapping[str, float]], *, formula: str | None = None,
                     counts: str | None = None, min_cell: int | None = None,
                     max_iterations: int = MAX_ITERATIONS,
                     confidence: float = DEFAULT_CONFIDENCE) -> dict:
    """{"weights": Weights.summary(), "confidence", "questions": [{"id", "disclosed",
    "options": [{"option", **WeightedEstimate}]}], "left_out": [{"id", "reason"}], "regression"
    (with a formula)}. data: one row per response (read_export), or per pattern with `counts`
    respondents; mechanisms: the randomized questions' (the keys may not be margins), those
    read_export marks Unsupported left out with the reason; every other categorical column is
    an openly answered question, estimated by its weighted share. min_cell, max_iterations: as
    rake and rr_logistic take them. AnalysisError, ConvergenceError as they raise them."""
    weights = rake(data, margins, randomized=list(mechanisms), counts=counts, min_cell=min_cell,
                   max_iterations=max_iterations)
    questions = []
    left_out = {m.question: m.reason for m in mechanisms.values() if isinstance(m, Unsupported)}
    for column in data.columns:
        unsupported = isinstance(mechanisms.get(column), Unsupported)
        if column == counts or unsupported or not isinstance(data[column].dtype,
                                                             pd.CategoricalDtype):
            continue
        estimates = weighted_estimates(data[column], mechanisms.get(column), weights,
                                       confidence=confidence)
        questions.append({"id": column, "disclosed": column not in mechanisms, "options": [
            {"option": str(level), **estimate.as_dict()}
            for level, estimate in zip(data[column].cat.categories, estimates, strict=True)]})
    result = {"weights": weights.summary(), "confidence": confidence, "questions": questions,
              "left_out": [{"id": qid, "reason": reason} for qid, reason in left_out.items()]}
    if formula is not None:
        result["regression"] = rr_logistic(formula, data, mechanisms, weights=weights,
                                           counts=counts, min_cell=min_cell,
                                           max_iterations=max_iterations,
                                           confidence=confidence).as_dict()
    return result
