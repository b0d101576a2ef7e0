"""Analyses researchers publish beyond proportions, on NumPy, SciPy and formulaic (the
`analysis` extra): logistic regression of a randomized yes/no answer on covariates
(`regression`), survey weights raked to population margins (`weights`) and both together
on an export (`results.weighted_results`). Imports `shared`
only; the aggregator loads it on first use, so a server without the extra still starts."""

from ldpsurvey.analysis.data import read_export
from ldpsurvey.analysis.errors import AnalysisError, ConvergenceError
from ldpsurvey.analysis.regression import Coefficient, GroupPrevalence, Regression, rr_logistic
from ldpsurvey.analysis.results import weighted_results
from ldpsurvey.analysis.weights import (
    WeightedEstimate,
    Weights,
    load_margins,
    rake,
    weighted_estimates,
)

__all__ = [
    "AnalysisError",
    "Coefficient",
    "ConvergenceError",
    "GroupPrevalence",
    "Regression",
    "WeightedEstimate",
    "Weights",
    "load_margins",
    "rake",
    "read_export",
    "rr_logistic",
    "weighted_estimates",
    "weighted_results",
]
