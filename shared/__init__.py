"""ldp-survey's privacy math: forced-response randomized response, standard library only.

>>> m = Mechanism(alpha=0.5, beta=0.5)
>>> round(m.epsilon, 4)
1.0986
"""

from ldpsurvey.shared.mechanisms.budget import EPSILON_TOLERANCE, exceeds, total_epsilon
from ldpsurvey.shared.stats.crosstab import Cell, Conditional, CrossTab, crosstab
from ldpsurvey.shared.stats.design import (
    Mechanism,
    alpha_for_epsilon,
    epsilon,
    report_probability,
    uniform_beta,
)
from ldpsurvey.shared.stats.difference import Difference, difference
from ldpsurvey.shared.stats.estimate import (
    DEFAULT_CONFIDENCE,
    DEFAULT_METHOD,
    FIT_LEVEL,
    Estimate,
    covariance,
    estimate,
    project_to_simplex,
    standard_error,
    unbiased_estimate,
)
from ldpsurvey.shared.stats.intervals import METHODS, simultaneous_confidence
from ldpsurvey.shared.stats.likelihood import feasible_rates, fit_p_value, maximum_likelihood
from ldpsurvey.shared.stats.planning import (
    expected_margin,
    n_required,
    n_required_central_laplace,
    n_required_question,
)
from ldpsurvey.shared.stats.posterior import PosteriorBounds, best_guess_accuracy, posterior_bounds
from ldpsurvey.shared.stats.shuffle import (
    DEFAULT_DELTA,
    central_epsilon,
    closed_form_epsilon,
    numerical_epsilon,
    release_batch_required,
)
from ldpsurvey.shared.survey.manifest import (
    Question,
    Survey,
    SurveyError,
    load_definition,
    parse_definition,
    parse_manifest,
    read_definition,
)

__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_DELTA",
    "DEFAULT_METHOD",
    "EPSILON_TOLERANCE",
    "FIT_LEVEL",
    "METHODS",
    "Cell",
    "Conditional",
    "CrossTab",
    "Difference",
    "Estimate",
    "Mechanism",
    "PosteriorBounds",
    "Question",
    "Survey",
    "SurveyError",
    "alpha_for_epsilon",
    "best_guess_accuracy",
    "central_epsilon",
    "closed_form_epsilon",
    "covariance",
    "crosstab",
    "difference",
    "epsilon",
    "estimate",
    "exceeds",
    "expected_margin",
    "feasible_rates",
    "fit_p_value",
    "load_definition",
    "maximum_likelihood",
    "n_required",
    "n_required_central_laplace",
    "n_required_question",
    "numerical_epsilon",
    "parse_definition",
    "parse_manifest",
    "posterior_bounds",
    "project_to_simplex",
    "read_definition",
    "release_batch_required",
    "report_probability",
    "simultaneous_confidence",
    "standard_error",
    "total_epsilon",
    "unbiased_estimate",
    "uniform_beta",
]
