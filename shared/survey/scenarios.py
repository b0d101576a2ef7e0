"""A mock survey's scenario: the truth its simulated respondents answer from (every
question's true proportions, joint tables, a regression model and a weighting sample), read
from a scenario file (TOML) and checked against the survey, and the true answers drawn from it
(NumPy, loaded on use). The CLI's `mock` runs it end to end; bench/ draws from it too."""

import math
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ldpsurvey.shared.stats.design import BETA_SUM_TOLERANCE
from ldpsurvey.shared.survey.manifest import Survey


class ScenarioError(ValueError):
    """The scenario file cannot be used with this survey; the message names the problem."""


@dataclass(frozen=True)
class Joint:
    """A scenario's joint distribution of two questions: p[a][b] = P(rows = a, cols = b)."""

    rows: str
    cols: str
    p: list[list[float]]


@dataclass(frozen=True)
class Regression:
    """A scenario's logistic model of a yes/no outcome on randomized covariates: P(true yes |
    covariates) = 1 / (1 + exp(-x'b)), x the formula's model matrix row (formulaic, as the
    regression builds it: choice covariates as indicators, first option the reference) and b
    the true coefficients by name. cells: every combination of the covariates' options, its
    probability (the covariates drawn independently from their marginals) and P(yes) there."""

    formula: str
    outcome: str
    covariates: list[str]
    coefficients: dict[str, float]
    cells: list[tuple[tuple[int, ...], float, float]]

    @property
    def prevalence(self) -> float:
        """The outcome's true P(Yes): sum over cells of P(cell) P(yes | cell)."""
        return math.fsum(weight * p for _, weight, p in self.cells)


@dataclass(frozen=True)
class Weighting:
    """A scenario's biased sample: an openly answered yes/no or choice `covariate` whose
    options the sample holds in the shares `sample` and the population in `population` (the
    margins the weights are raked to), and a randomized yes/no `outcome` whose true P(Yes) in
    each of the covariate's levels is `prevalence`. cells: per level, as Regression's, its
    share of the sample and P(yes) there."""

    covariate: str
    options: tuple[str, ...]
    population: list[float]
    sample: list[float]
    outcome: str
    prevalence: list[float]

    @property
    def covariates(self) -> list[str]:
        return [self.covariate]

    @property
    def cells(self) -> list[tuple[tuple[int, ...], float, float]]:
        return [((level,), share, p) for level, (share, p) in
                enumerate(zip(self.sample, self.prevalence, strict=True))]

    def prevalence_in(self, shares: list[float]) -> float:
        """P(outcome = Yes) where the covariate has these shares: sum_l share_l prevalence_l
        (the law of total probability); in the population, what the weighted estimate
        targets, in the sample, what the unweighted one does."""
        return math.fsum(w * p for w, p in zip(shares, self.prevalence, strict=True))

    def margins(self) -> dict[str, dict[str, float]]:
        """The population margins as the `weights` query takes them: {covariate: {label:
        share}}."""
        return {self.covariate: dict(zip(self.options, self.population, strict=True))}


@dataclass(frozen=True)
class Truth:
    """A scenario: every question's true proportions, the joint distributions they follow
    from for the questions in a [[joint]] table, a [regression] model and a [weights] biased
    sample, if any."""

    marginals: dict[str, list[float]]
    joints: list[Joint]
    regression: Regression | None = None
    weights: Weighting | None = None

    @property
    def models(self) -> list[Regression | Weighting]:
        """What gives an outcome's true answers from its covariates' (true_answers)."""
        return [model for model in (self.regression, self.weights) if model is not None]


def _distribution(value, size: int) -> bool:
    """Whether value is a list of `size` proportions in [0, 1] summing to 1."""
    return (isinstance(value, list) and len(value) == size
            and all(isinstance(p, int | float) and 0 <= p <= 1 for p in value)
            and abs(sum(value) - 1) <= BETA_SUM_TOLERANCE)


def _joint(table, index: int, survey: Survey, taken: set[str]) -> Joint:
    """One [[joint]] table: rows and cols two questions not given elsewhere, p a k_rows x
    k_cols matrix of proportions summing to 1."""
    where = f"[[joint]] {index + 1}"
    ids = {q.id for q in survey.questions}
    if not isinstance(table, dict) or set(table) != {"rows", "cols", "p"}:
        raise ScenarioError(f"{where} needs exactly rows, cols and p")
    rows, cols, p = table["rows"], table["cols"], table["p"]
    for qid in (rows, cols):
        if qid not in ids:
            raise ScenarioError(f"{where}: {qid!r} is not a question of the survey")
        if qid in taken:
            raise ScenarioError(f"{where}: question {qid!r} is given more than once")
        taken.add(qid)
    k_rows, k_cols = (len(survey.question(q).options) for q in (rows, cols))
    if (not isinstance(p, list) or len(p) != k_rows
            or not all(isinstance(row, list) for row in p)
            or not _distribution([x for row in p for x in row], k_rows * k_cols)
            or any(len(row) != k_cols for row in p)):
        raise ScenarioError(f"{where}: p needs {k_rows} rows of {k_cols} proportions summing to 1")
    return Joint(rows, cols, [[float(x) for x in row] for row in p])


def _weights(table, survey: Survey, given: dict, taken: set[str]) -> Weighting:
    """The [weights] table: covariate (an openly answered yes/no or choice question, not given
    elsewhere), population and sample (its options' shares in the population and in the
    sample, each summing to 1), outcome (a randomized yes/no question not given elsewhere) and
    prevalence (its true P(Yes) in each of the covariate's levels)."""
    where = "[weights]"
    keys = {"covariate", "population", "sample", "outcome", "prevalence"}
    if not isinstance(table, dict) or set(table) != keys:
        raise ScenarioError(f"{where} needs exactly {', '.join(sorted(keys))}")
    ids = {q.id: q for q in survey.questions}
    covariate, outcome = ids.get(table["covariate"]), ids.get(table["outcome"])
    if covariate is None or not covariate.disclosed or not covariate.options:
        raise ScenarioError(f"{where}: covariate {table['covariate']!r} is not an openly answered "
                    "yes/no or choice question of the survey")
    if outcome is None or outcome.type != "yes_no" or outcome.scheme.name != "forced_response":
        raise ScenarioError(f"{where}: outcome {table['outcome']!r} is not a randomized yes/no "
                    "question of the survey")
    for question in (covariate, outcome):
        if question.id in given or question.id in taken:
            raise ScenarioError(f"{where}: {question.id!r} is given elsewhere too (its truth comes "
                        f"from {where})")
    k = len(covariate.options)
    for key in ("population", "sample"):
        if not _distribution(table[key], k):
            raise ScenarioError(f"{where}: {key} needs {k} proportions summing to 1, one per option of "
                        f"{covariate.id!r}")
    prevalence = table["prevalence"]
    if not (isinstance(prevalence, list) and len(prevalence) == k and all(
            isinstance(p, int | float) and not isinstance(p, bool) and 0 <= p <= 1
            for p in prevalence)):
        raise ScenarioError(f"{where}: prevalence needs {k} probabilities, P(Yes) of {outcome.id!r} in "
                    f"each option of {covariate.id!r}")
    return Weighting(covariate.id, covariate.options, [float(x) for x in table["population"]],
                     [float(x) for x in table["sample"]], outcome.id,
                     [float(x) for x in prevalence])


def given_share(question, value, option: int) -> float:
    """A covariate's true share of `option` as its scheme reads the [truth] value."""
    try:
        return question.scheme.truth_of(value)[option]
    except ValueError as exc:
        raise ScenarioError(f"question {question.id!r} needs {exc}") from None


# Reads a [regression] table: (table, survey, the [truth] table, the questions taken) -> model.
RegressionReader = Callable[[dict, Survey, dict, set[str]], Regression]


def read_truth(path: Path, survey: Survey,
               read_regression: RegressionReader | None = None) -> Truth:
    """The scenario's truth: per question under [truth] as its scheme reads it (truth_of: P(Yes)
    for yes/no, a list of proportions for choice, per-option selection probabilities for
    multi_select, {yes, noncompliant} for a cheating-detection question), or for a pair of
    questions a [[joint]] table whose marginals they follow; a [regression] table gives its
    outcome's truth through the model (Regression), read by `read_regression` (it needs the
    analysis extra: the CLI's mock passes it). ScenarioError naming the problem."""
    try:
        scenario = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ScenarioError(str(exc)) from None
    given = scenario.get("truth", {})
    if not isinstance(given, dict) or (not given and "joint" not in scenario):
        raise ScenarioError("needs a [truth] table")
    taken: set[str] = set()
    tables = scenario.get("joint", [])
    joints = [_joint(table, i, survey, taken)
              for i, table in enumerate(tables if isinstance(tables, list) else [tables])]
    marginals = {}
    for joint in joints:
        marginals[joint.rows] = [sum(row) for row in joint.p]
        marginals[joint.cols] = [sum(column) for column in zip(*joint.p, strict=True)]
    if "regression" in scenario and read_regression is None:
        raise ScenarioError("[regression] needs the analysis extra's reader")
    regression = (read_regression(scenario["regression"], survey, given, taken)
                  if "regression" in scenario else None)
    if regression:
        marginals[regression.outcome] = [1.0 - regression.prevalence, regression.prevalence]
        taken.add(regression.outcome)
    weights = (_weights(scenario["weights"], survey, given, taken)
               if "weights" in scenario else None)
    if weights:  # the sample's truth; the population's is in the weights rows
        marginals[weights.covariate] = weights.sample
        in_sample = weights.prevalence_in(weights.sample)
        marginals[weights.outcome] = [1.0 - in_sample, in_sample]
        taken |= {weights.covariate, weights.outcome}
    for question in survey.questions:
        if question.id in taken:
            if question.id in given:
                raise ScenarioError(f"question {question.id!r} is given more than once")
            continue
        try:
            marginals[question.id] = question.scheme.truth_of(given.get(question.id))
        except ValueError as exc:
            raise ScenarioError(f"question {question.id!r} needs {exc}") from None
    return Truth(marginals, joints, regression, weights)


def true_answers(truth: Truth, survey: Survey, respondents: int, rng) -> dict:
    """Each question's true answers of the simulated respondents (NumPy arrays): drawn from
    the joint distribution for the questions of a [[joint]] table, an outcome of a
    [regression] or [weights] table from its covariates, else independently."""
    import numpy as np  # the sim extra: loaded on use, so the model's types load without it

    from ldpsurvey.shared.sim import simulation

    answers = {}
    for joint in truth.joints:
        k_cols = len(joint.p[0])
        cells = simulation.true_answers([x for row in joint.p for x in row], respondents, rng)
        answers[joint.rows], answers[joint.cols] = cells // k_cols, cells % k_cols
    outcomes = {model.outcome for model in truth.models}
    for question in survey.questions:
        if question.id not in answers and question.id not in outcomes:
            answers[question.id] = question.scheme.draw_answers(truth.marginals[question.id],
                                                                respondents, rng)
    for model in truth.models:  # the outcome: yes with the model's P(yes) in each one's cell
        cell = np.zeros(respondents, dtype=np.int64)
        for name in model.covariates:  # the cell's index in itertools.product order
            k = len(survey.question(name).options)
            cell = cell * k + answers[name]
        p_yes = np.array([p for _, _, p in model.cells])[cell]
        answers[model.outcome] = (rng.random(respondents) < p_yes).astype(np.int8)
    return answers


