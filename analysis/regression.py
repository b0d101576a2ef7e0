"""Logistic regression of a randomized yes/no answer on covariates, by maximum likelihood.

The model (Blair, Imai and Zhou 2015, "Design and analysis of the randomized response
technique", JASA 110, 1304-1319, section 3; R package rr's rrreg(design = "forced-known")):
the true answer is yes with probability g = 1 / (1 + exp(-x'b)); forced response reports it
with probability alpha and otherwise reports yes with probability beta_yes, so

    P(report yes | x) = c g + d,   c = alpha,   d = (1 - alpha) beta_yes,

and the log-likelihood is sum_i y_i log(c g_i + d) + (1 - y_i) log(1 - c g_i - d).

Covariates are plain columns (numbers, or categories entering as indicator columns with the
first category as reference, as R's treatment contrasts do) or randomized questions. A
randomized covariate's true option t is latent: its report r has the known probabilities
P(r | t) of its mechanism, and the likelihood sums over t: a categorical covariate
misclassified with known probabilities, modelled with its true distribution as in van den
Hout and Kooiman (2006, "Estimating the linear regression model with categorical covariates
subject to randomized response", Computational Statistics and Data Analysis 50, 3311-3323)
for a linear model, here with the randomized logistic outcome above; its report matrix is
the one the cross-tabs invert (van den Hout and van der Heijden 2002):

    L_i = sum_t P(t | z_i) prod_k P_k(r_ik | t_k) P(y_i | x(z_i, t)),

with P(t | z) free (a multinomial per cell z of the plain covariates, so plain covariates
must then be categorical). Its observed information is Louis' (1982, "Finding the observed
information matrix when using the EM algorithm", JRSS B 44): per respondent
sum_t w_t (D2 log a_t + D log a_t D log a_t') - D l D l', w_t the posterior of t.

With survey weights the weighted log-likelihood is a pseudo-likelihood (Binder 1983, "On the
variances of asymptotically normal estimators from complex surveys", International
Statistical Review 51) whose estimates have the sandwich variance A^-1 B A^-1, A the weighted
observed information and B the with-replacement variance of the weighted scores, linearized
through the raking (Deville and Saerndal 1992, "Calibration estimators in survey sampling",
JASA 87: the scores replaced by their residuals on the raking margins' indicators), as R's
survey::svyglm computes it on a calibrated design (Lumley 2010, Complex Surveys, ch. 7).
"""

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import product
from statistics import NormalDist

import numpy as np
import pandas as pd
from formulaic import Formula
from scipy.optimize import minimize
from scipy.special import expit

from ldpsurvey.analysis.cells import check_cells
from ldpsurvey.analysis.data import Unsupported
from ldpsurvey.analysis.errors import AnalysisError, ConvergenceError
from ldpsurvey.analysis.weights import Weights, linearized_variance
from ldpsurvey.shared import DEFAULT_CONFIDENCE, Mechanism
from ldpsurvey.shared.stats.distributions import reported_p
from ldpsurvey.shared.stats.intervals import z_value

# A formula is variable names joined by + (main effects), : (interactions) and * (both), or 1.
NAME = r"[A-Za-z_][A-Za-z0-9_]*"
TERM = rf"(?:{NAME}(?:\s*[:*]\s*{NAME})*|1)"
FORMULA = re.compile(rf"\s*({NAME})\s*~\s*({TERM}(?:\s*\+\s*{TERM})*)\s*")
MAX_LATENT_CELLS = 256  # combinations of the randomized covariates' options, as crosstab.MAX_CELLS
GRADIENT_TOLERANCE = 1e-8  # largest |d mean log-likelihood / d parameter| accepted as converged
MAX_ITERATIONS = 1000
EXACT_COLUMNS = 2**16  # a model matrix up to this wide is counted by formulaic (Size)
TERMS_EXPANDED = 2**10  # a formula with more terms than this is not expanded by formulaic (Size)
FITTED_FLOOR = 1e-6  # a fitted P(yes) nearer 0 or 1: the MLE is at infinity (R's glm warns so)


@dataclass(frozen=True)
class Coefficient:
    """One coefficient b_j: its estimate, standard error, Wald interval estimate -+ z se, the
    Wald statistic z = estimate / se and its two-sided p-value (never 0: reported_p)."""

    name: str
    estimate: float
    standard_error: float
    ci_low: float
    ci_high: float
    z: float
    p_value: float


@dataclass(frozen=True)
class GroupPrevalence:
    """The model's prevalence of a true yes among respondents whose covariate `variable` is
    `level` (variable None: everyone), the mean of g over them (rr's predict(avg = TRUE) on
    the group), with its delta-method standard error and an interval symmetric on the logit
    scale (so inside (0, 1)). n: the group's respondents, weighted with weights, and for a
    randomized covariate the model's estimate (its members are not known)."""

    variable: str | None
    level: str | None
    n: float
    prevalence: float
    standard_error: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class Regression:
    """A fitted model. variance: "observed information" or, with weights, "linearization"
    (sandwich through the raking); effective_n: Kish's (sum w)^2 / sum w^2 (n unweighted);
    log_likelihood: at the estimates (weighted with weights; with randomized covariates it
    includes their reports' likelihood); covariance: of the coefficients, in their order."""

    formula: str
    outcome: str
    n: int
    effective_n: float
    randomized_covariates: tuple[str, ...]
    confidence: float
    variance: str
    log_likelihood: float
    iterations: int
    coefficients: tuple[Coefficient, ...]
    covariance: tuple[tuple[float, ...], ...]
    predicted: tuple[GroupPrevalence, ...]

    def as_dict(self) -> dict:
        """The fields under their own names (API, CLI --json)."""
        return asdict(self)


def parse_formula(formula: str) -> tuple[str, list[str]]:
    """The outcome and the covariates' names of `outcome ~ terms`, terms being variable names
    joined by +, : and * (or 1). Nothing else is accepted: formulaic evaluates Python in a
    formula's terms, and a formula may come from an HTTP query."""
    if not isinstance(formula, str) or not FORMULA.fullmatch(formula):
        raise AnalysisError(
            f"formula {formula!r}: write `outcome ~ covariate + covariate`, variable names "
            "joined by + (main effects), : (interaction) or * (both), or `outcome ~ 1`")
    outcome, terms = FORMULA.fullmatch(formula).groups()
    names = [n for n in re.findall(NAME, terms)]
    return outcome, list(dict.fromkeys(names))


@dataclass(frozen=True)
class Size:
    """The most a fit can cost, known from the questions before any data is read (rr_logistic
    builds arrays of latent_rows x parameters numbers and its Hessian takes latent_rows x
    parameters^2 products per step). parameters: the coefficients (the model matrix's columns)
    and, with randomized covariates, the T - 1 logits of P(t | cell) for every cell of the plain
    covariates; latent_rows: the units (distinct patterns of the data's columns, at most the
    respondents) times T, the combinations of the randomized covariates' options."""

    parameters: int
    latent_rows: int


def size(formula: str, levels: Mapping[str, Sequence[str] | None], randomized: Collection[str],
         respondents: int, raked: Collection[str] = ()) -> Size:
    """The Size of fitting `formula` (parse_formula) to data of the columns `levels` (each
    column's categories, None for a numeric one) and `respondents` rows (or counts), the
    columns named in `randomized` being randomized questions and those in `raked` the weights'.
    The units are as _Model.build makes them: with randomized covariates the patterns of the
    formula's and raked columns, else the data's rows. The coefficients are formulaic's
    columns for data holding every category, or past EXACT_COLUMNS the sum over the formula's
    terms of the product of their factors' categories (a bound: no coding has more)."""
    outcome, names = parse_formula(formula)
    latent = math.prod(len(levels[n]) for n in names if n in randomized)
    plain = [n for n in names if n not in randomized and levels[n] is not None]
    cells = min(respondents, math.prod(len(levels[n]) for n in plain)) if latent > 1 else 1
    keys = set([outcome, *names, *raked] if latent > 1 else levels)
    patterns = (math.inf if any(levels[n] is None for n in keys)
                else math.prod(len(levels[n]) for n in keys))
    units = int(min(respondents, patterns))
    return Size(_coefficients(formula, {n: levels[n] for n in names}) + cells * (latent - 1),
                units * latent)


def least_terms(formula: str) -> int:
    """A lower bound on the distinct terms of `formula`'s right side, from its text alone: a
    +-separated part holding m pieces joined by * whose names are pairwise disjoint expands to
    the 2^m - 1 products of their non-empty subsets, each a term of its own."""
    least = 0
    for part in formula.split("~", 1)[1].split("+"):
        used: set[str] = set()
        disjoint = 0
        for piece in part.split("*"):
            names = set(re.findall(NAME, piece))
            if names and not names & used:
                used |= names
                disjoint += 1
        least = max(least, 2**disjoint - 1)
    return least


def _coefficients(formula: str, levels: Mapping[str, Sequence[str] | None]) -> int:
    """The model matrix's columns for covariates with these categories (None: numeric); past
    TERMS_EXPANDED terms, that lower bound (least_terms), without formulaic, whose expansion of
    k names joined by * makes 2^k - 1 terms before anything could be refused."""
    least = least_terms(formula)
    if least > TERMS_EXPANDED:
        return least
    terms = Formula(formula).rhs
    bound = sum(math.prod(len(levels[str(f)] or ()) or 1 for f in term.factors
                          if str(f) != "1") for term in terms)
    if bound > EXACT_COLUMNS:
        return bound
    rows = max([len(v) for v in levels.values() if v] + [2])
    frame = pd.DataFrame({name: pd.Categorical([values[i % len(values)] for i in range(rows)],
                                               categories=values) if values else np.arange(rows)
                          for name, values in levels.items()})
    return Formula(formula).rhs.get_model_matrix(frame).shape[1]


def rr_logistic(formula: str, data: pd.DataFrame,
                mechanisms: Mapping[str, "Mechanism | Unsupported"], *,
                weights: Weights | None = None, counts: str | None = None,
                min_cell: int | None = None, max_iterations: int = MAX_ITERATIONS,
                confidence: float = DEFAULT_CONFIDENCE) -> Regression:
    """Fit `formula` (see parse_formula) to `data` by maximum likelihood (module docstring).

    data: one row per response. Randomized questions (the keys of `mechanisms`) are
    categorical columns whose categories are the question's options in code order (the
    reported option); the outcome must be a randomized yes/no question (its second category,
    code 1, is yes). Every other column is a plain covariate: numeric, or categorical (first
    category the reference); a column whose mechanism is Unsupported (read_export: another
    mechanism than forced response) is refused, naming its question. Rows missing a used value
    are dropped. weights: raking weights for these rows (weights.rake, with the same counts).
    counts: the name of a column of non-negative integers, each row then standing for that
    many respondents alike (tallied data: a server tallies the released responses' patterns as
    it streams them). min_cell:
    refuse a group of the plain categorical covariates (each combination of their levels)
    held by 1 to min_cell - 1 respondents, so that openly answered covariates single no one
    out. max_iterations: of the trust-region solver. AnalysisError for a formula or data that
    cannot be fitted; ConvergenceError when the likelihood has no interior maximum."""
    z = z_value(confidence)
    outcome, names = parse_formula(formula)
    frame = _checked_frame(data, outcome, names, mechanisms, weights, counts)
    if min_cell:  # the groups of the plain covariates, and within them the raked cells
        check_cells(frame, [*[n for n in names if n not in mechanisms],
                            *(weights.columns if weights else ())], counts, min_cell)
    model = _Model.build(formula, frame, outcome, names, mechanisms, weights, counts)
    fit = model.fit(max_iterations)
    covariance = model.covariance(fit)
    p = model.p
    cov_b = covariance[:p, :p]
    se = np.sqrt(np.diag(cov_b))
    coefficients = tuple(
        Coefficient(name, float(b), float(s), float(b - z * s), float(b + z * s),
                    float(b / s), reported_p(2.0 * NormalDist().cdf(-abs(float(b / s)))))
        for name, b, s in zip(model.columns, fit.b, se, strict=True))
    predicted = tuple(model.prevalence(fit, covariance, variable, level, z)
                      for variable, level in [(None, None), *model.groups()])
    return Regression(
        formula=formula.strip(), outcome=outcome, n=int(model.count.sum()),
        effective_n=model.effective_n, randomized_covariates=model.randomized,
        confidence=confidence,
        variance="observed information" if weights is None else "linearization",
        log_likelihood=float(fit.log_likelihood), iterations=fit.iterations,
        coefficients=coefficients, covariance=tuple(tuple(map(float, row)) for row in cov_b),
        predicted=predicted)


def _checked_frame(data: pd.DataFrame, outcome: str, names: list[str],
                   mechanisms: Mapping[str, "Mechanism | Unsupported"], weights: Weights | None,
                   counts: str | None) -> pd.DataFrame:
    """The used columns of the rows with every used value present, after checking that the
    outcome is a randomized yes/no question and each randomized column's categories match
    its mechanism. A column whose mechanism is Unsupported is refused with its reason."""
    for name in [outcome, *names]:
        if isinstance(mechanisms.get(name), Unsupported):
            raise AnalysisError(mechanisms[name].reason)
        if name not in data.columns:
            raise AnalysisError(f"no column {name!r}; the columns are {', '.join(map(str, data.columns))}")
    if outcome in names:
        raise AnalysisError(f"{outcome!r} is the outcome and cannot be a covariate too")
    if outcome not in mechanisms or mechanisms[outcome].k != 2:
        raise AnalysisError(f"the outcome {outcome!r} must be a randomized yes/no question")
    for name in [outcome, *names]:
        if name in mechanisms:
            column = data[name]
            if not isinstance(column.dtype, pd.CategoricalDtype) or len(
                    column.cat.categories) != mechanisms[name].k:
                raise AnalysisError(f"column {name!r} must be categorical with its "
                                      f"{mechanisms[name].k} options as categories")
    if weights is not None and len(weights.values) != len(data):
        raise AnalysisError(f"{len(weights.values)} weights for {len(data)} rows")
    if counts is not None:
        column = data[counts] if counts in data.columns else None
        if column is None or not pd.api.types.is_integer_dtype(column) or (column < 0).any():
            raise AnalysisError(f"counts {counts!r} must be a column of non-negative integers")
    data = data.reset_index(drop=True)  # the index: row positions, as the weights'
    kept = data[[outcome, *names]].notna().all(axis=1).to_numpy()
    if weights is not None and not kept.all():
        raise AnalysisError("rows with missing values cannot be dropped after raking: "
                              "rake the rows the regression uses")
    frame = data.loc[kept, list(dict.fromkeys(
        [outcome, *names, *(weights.columns if weights else []), *([counts] if counts else [])]))]
    if len(frame) == 0 or (counts is not None and frame[counts].sum() == 0):
        raise AnalysisError("no rows with every value of the formula")
    return frame


@dataclass(frozen=True)
class _Fit:
    b: np.ndarray  # coefficients
    theta: np.ndarray  # logits of P(t | z), (cells, T - 1)
    log_likelihood: float
    iterations: int


class _Model:
    """The likelihood over units u (respondents with equal values, counted n_u times, each
    of weight w_u) and latent combinations t of the randomized covariates' options:
    x[u, t] the covariate row, m[u, t] = P(reported covariates of u | t), cell[u] the plain
    covariates' cell of u (the multinomial P(t | cell) it draws t from)."""

    @classmethod
    def build(cls, formula, frame, outcome, names, mechanisms, weights, counts):
        randomized = tuple(n for n in names if n in mechanisms)
        plain = [n for n in names if n not in mechanisms]
        frame = frame.copy()
        for name in plain:
            if isinstance(frame[name].dtype, pd.CategoricalDtype):
                frame[name] = frame[name].cat.remove_unused_categories()
            elif not pd.api.types.is_numeric_dtype(frame[name]):
                frame[name] = pd.Categorical(frame[name])  # text: categories in sorted order
        numeric = [n for n in plain if not isinstance(frame[n].dtype, pd.CategoricalDtype)]
        if randomized and numeric:
            raise AnalysisError(f"randomized covariates ({', '.join(randomized)}) can be "
                                f"combined with categorical covariates only, not {', '.join(numeric)}")
        t_values = list(product(*(frame[n].cat.categories for n in randomized)))
        if len(t_values) > MAX_LATENT_CELLS:
            raise AnalysisError(f"the randomized covariates have {len(t_values)} combinations "
                                f"of options, above the limit of {MAX_LATENT_CELLS}")
        frame["_weight"] = weights.values[frame.index] if weights is not None else 1.0
        frame["_row"] = frame.index  # the row's position in the data (and the weights)
        frame["_count"] = frame[counts] if counts is not None else 1
        if randomized:  # units: distinct patterns, counted; P(t | z) per plain cell z
            keys = list(dict.fromkeys([outcome, *plain, *randomized,
                                       *(weights.columns if weights is not None else ())]))
            units = frame.groupby(keys, observed=True, sort=False).agg(
                _count=("_count", "sum"), _weight=("_weight", "first"),
                _row=("_row", "first")).reset_index()
            cell = (units.groupby(plain, observed=True, sort=False).ngroup().to_numpy()
                    if plain else np.zeros(len(units), dtype=int))
        else:  # units: the respondents (or rows of counts)
            units = frame.reset_index(drop=True)
            cell = np.zeros(len(units), dtype=int)
        # The design rows: every unit's plain values with every latent combination.
        blocks = []
        for t in t_values:
            block = units[plain].copy()
            for name, value in zip(randomized, t, strict=True):
                block[name] = pd.Categorical([value] * len(units),
                                             categories=frame[name].cat.categories)
            blocks.append(block)
        try:
            design = Formula(formula).rhs.get_model_matrix(pd.concat(blocks, ignore_index=True),
                                                           na_action="raise")
        except MemoryError:
            raise
        except Exception as error:  # formulaic's own message names the problem
            raise AnalysisError(f"formula {formula!r}: {error}") from error
        x = np.asarray(design, dtype=float).reshape(len(t_values), len(units), -1).transpose(1, 0, 2)
        if np.linalg.matrix_rank(x.reshape(-1, x.shape[2])) < x.shape[2]:
            raise AnalysisError("the covariates are collinear (a column is a combination of "
                                "others, or a category never occurs)")
        m = np.ones((len(units), len(t_values)))
        for k, name in enumerate(randomized):  # P(reported r_k | true t_k), known
            mechanism = mechanisms[name]
            table = np.array([[mechanism.probability(i, j) for j in range(mechanism.k)]
                              for i in range(mechanism.k)])
            true = np.array([frame[name].cat.categories.get_loc(t[k]) for t in t_values])
            m *= table[true[None, :], units[name].cat.codes.to_numpy()[:, None]]
        rows = units["_row"].to_numpy()
        return cls(list(design.columns), x, m, cell, units, t_values, names, randomized,
                   mechanisms[outcome], weights.calibration[rows] if weights is not None else None)

    def __init__(self, columns, x, m, cell, units, t_values, names, randomized, outcome,
                 calibration):
        self.columns, self.x, self.m, self.cell, self.units = columns, x, m, cell, units
        self.t_values, self.names, self.randomized = t_values, names, randomized
        self.outcome_name = units.columns[0]
        self.y = units[self.outcome_name].cat.codes.to_numpy().astype(float)
        self.count = units["_count"].to_numpy().astype(float)
        self.weight = units["_weight"].to_numpy().astype(float)
        self.calibration = calibration
        self.c, self.d = outcome.alpha, (1.0 - outcome.alpha) * outcome.beta[1]
        self.p, self.T = x.shape[2], x.shape[1]
        self.cells = int(cell.max()) + 1
        self.mass = self.count * self.weight
        self.total = self.mass.sum()
        self.effective_n = float(self.total ** 2 / (self.count * self.weight ** 2).sum())

    # --- parameters: b (p), then theta (cells x (T - 1)), the logits of P(t | cell) ---
    def split(self, params):
        b = params[:self.p]
        theta = params[self.p:].reshape(self.cells, self.T - 1)
        return b, theta

    def prior(self, theta):
        """P(t | cell): softmax of (0, theta[cell])."""
        logits = np.concatenate([np.zeros((self.cells, 1)), theta], axis=1)
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        return e / e.sum(axis=1, keepdims=True)

    def parts(self, params):
        """Per unit: log-likelihood l_u, its gradient G_u and the posterior w_ut with the
        per-(u, t) gradients G_ut and second derivatives s2_ut of log q."""
        b, theta = self.split(params)
        eta = self.x @ b  # (U, T)
        g = expit(eta)
        y = self.y[:, None]
        q = np.where(y == 1.0, self.c * g + self.d, 1.0 - self.c * g - self.d)
        dg = g * (1.0 - g)
        sign = np.where(y == 1.0, 1.0, -1.0)
        s1 = sign * self.c * dg / q  # d log q / d eta
        s2 = sign * self.c * dg * (1.0 - 2.0 * g) / q - (self.c * dg / q) ** 2
        pi = self.prior(theta)[self.cell]  # (U, T)
        a = pi * self.m * q
        total = a.sum(axis=1)
        w = a / total[:, None]
        grad_t = np.zeros((len(self.y), self.T, len(params)))
        grad_t[:, :, :self.p] = s1[:, :, None] * self.x
        if self.T > 1:
            block = np.eye(self.T)[None, :, 1:] - pi[:, None, 1:]  # d log pi_t / d theta_s
            for u_cell in range(self.cells):
                rows = self.cell == u_cell
                start = self.p + u_cell * (self.T - 1)
                grad_t[rows, :, start:start + self.T - 1] = block[rows]
        grad_u = np.matmul(w[:, None, :], grad_t)[:, 0, :]  # sum_t w_ut G_ut
        return np.log(total), grad_u, w, grad_t, s2, pi

    def objective(self, params):
        """Minus the mean (weighted) log-likelihood and its gradient."""
        ll, grad_u, *_ = self.parts(params)
        return (-(self.mass @ ll) / self.total, -(self.mass @ grad_u) / self.total)

    def hessian(self, params, parts=None):
        """The Hessian of the (weighted) log-likelihood sum, by Louis' identity (module doc)."""
        _, grad_u, w, grad_t, s2, pi = parts or self.parts(params)
        mass = self.mass
        h = _weighted_gram(mass[:, None] * w, grad_t) - _weighted_gram(mass, grad_u)
        p = self.p
        h[:p, :p] += _weighted_gram(mass[:, None] * w * s2, self.x)
        for u_cell in range(self.cells):
            rows = self.cell == u_cell
            if self.T == 1 or not rows.any():
                continue
            share = pi[rows][0, 1:]
            start = p + u_cell * (self.T - 1)
            part = slice(start, start + self.T - 1)
            h[part, part] -= mass[rows].sum() * (np.diag(share) - np.outer(share, share))
        return h

    def fit(self, max_iterations: int = MAX_ITERATIONS) -> _Fit:
        """The maximum by trust-region Newton steps (the exact Hessian); ConvergenceError
        unless every partial derivative of the mean log-likelihood is below
        GRADIENT_TOLERANCE there, the information is positive definite and no fitted
        probability (of a true yes, or of a randomized covariates' combination) is
        numerically 0 or 1 (the maximum would be at infinity)."""
        try:
            return self._fit(max_iterations)
        except np.linalg.LinAlgError as error:
            raise ConvergenceError(f"the fit failed ({error}): the likelihood has no unique "
                                   "maximum") from None

    def _fit(self, max_iterations: int) -> _Fit:
        start = np.zeros(self.p + self.cells * (self.T - 1))
        result = minimize(self.objective, start, jac=True, method="trust-exact",
                          hess=lambda params: -self.hessian(params) / self.total,
                          options={"gtol": GRADIENT_TOLERANCE * 1e-2, "maxiter": max_iterations})
        _, gradient = self.objective(result.x)
        largest = float(np.max(np.abs(gradient))) if gradient.size else 0.0
        if largest > GRADIENT_TOLERANCE or not np.all(np.isfinite(result.x)):
            raise ConvergenceError(
                f"the fit did not converge after {result.nit} iterations (largest gradient "
                f"{largest:.3g}; {result.message}): a coefficient may be running to infinity "
                "(a group where every or no true answer is yes) or there are too few responses")
        information = -self.hessian(result.x)
        if not np.all(np.linalg.eigvalsh(information) > 0):
            raise ConvergenceError(
                "the likelihood has no unique maximum (its information matrix is singular): a "
                "coefficient may be running to infinity or a category may have no responses")
        b, theta = self.split(result.x)
        g = expit(self.x @ b)
        if np.any(np.minimum(g, 1.0 - g) < FITTED_FLOOR):
            raise ConvergenceError(
                "fitted probabilities numerically 0 or 1 occurred: a coefficient is running to "
                "infinity (a group where every or no true answer is yes fits best)")
        if self.T > 1 and np.min(self.prior(theta)) < FITTED_FLOOR:
            raise ConvergenceError(
                "a combination of the randomized covariates' options has an estimated share of "
                "0 in some group: the maximum is at infinity (too few responses, or drop a "
                "covariate)")
        return _Fit(b, theta, float(self.mass @ self.parts(result.x)[0]), int(result.nit))

    def covariance(self, fit: _Fit) -> np.ndarray:
        """Inverse observed information, or with weights the sandwich A^-1 B A^-1, B the
        linearized variance of the weighted scores through the raking (module docstring)."""
        params = np.concatenate([fit.b, fit.theta.ravel()])
        parts = self.parts(params)
        inverse = np.linalg.inv(-self.hessian(params, parts))
        if self.calibration is None:
            return inverse
        middle = linearized_variance(parts[1], self.weight, self.calibration, self.count)
        return inverse @ middle @ inverse

    def groups(self) -> list[tuple[str, str]]:
        """(variable, level) for every level of every categorical covariate, in formula order."""
        return [(name, str(level)) for name in self.names
                if isinstance(self.units[name].dtype, pd.CategoricalDtype)
                for level in self.units[name].cat.categories]

    def prevalence(self, fit: _Fit, covariance: np.ndarray, variable: str | None,
                   level: str | None, z: float) -> GroupPrevalence:
        """sum mass_ut 1_G g_ut / sum mass_ut 1_G over units u and latent t, mass_ut =
        n_u w_u P(t | cell_u), with its delta-method standard error (gradient in b and
        theta; the plain covariates' distribution taken as given, as rr's predict does)."""
        params = np.concatenate([fit.b, fit.theta.ravel()])
        pi = self.prior(fit.theta)[self.cell]
        g = expit(self.x @ fit.b)
        member = self._membership(variable, level)  # (U, T)
        mass = self.mass[:, None] * pi * member
        size = mass.sum()
        if size <= 0:
            return GroupPrevalence(variable, level, 0.0, math.nan, math.nan, math.nan, math.nan)
        value = (mass * g).sum() / size
        gradient = np.zeros(len(params))
        gradient[:self.p] = np.einsum("ut,utj->j", mass * g * (1.0 - g), self.x) / size
        if self.T > 1:
            h = member * (g - value)  # d(num - value den) / d pi_t, per unit
            for u_cell in range(self.cells):
                rows = self.cell == u_cell
                p_cell = pi[rows]
                dh = p_cell * h[rows]  # pi_t h_t
                d = dh[:, 1:] - p_cell[:, 1:] * dh.sum(axis=1, keepdims=True)
                start = self.p + u_cell * (self.T - 1)
                gradient[start:start + self.T - 1] = (self.mass[rows] @ d) / size
        se = float(np.sqrt(gradient @ covariance @ gradient))
        logit = math.log(value / (1.0 - value))
        spread = z * se / (value * (1.0 - value))
        low, high = (float(expit(logit + sign * spread)) for sign in (-1, 1))
        return GroupPrevalence(variable, level, float(size), float(value), se, low, high)

    def _membership(self, variable: str | None, level: str | None) -> np.ndarray:
        """1 where unit u with latent combination t is in the group variable == level."""
        shape = (len(self.y), self.T)
        if variable is None:
            return np.ones(shape)
        if variable in self.randomized:
            k = self.randomized.index(variable)
            return np.broadcast_to(np.array([str(t[k]) == level for t in self.t_values],
                                            dtype=float), shape)
        column = self.units[variable].astype(str).to_numpy() == level
        return np.broadcast_to(column[:, None].astype(float), shape)


def _weighted_gram(weight: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """sum over the leading axes of weight * rows rows' (einsum "ut,uti,utj->ij", or with one
    leading axis "u,ui,uj->ij"), as one matrix product (BLAS: far faster than einsum)."""
    flat = rows.reshape(-1, rows.shape[-1])
    return (flat * weight.reshape(-1, 1)).T @ flat


def from_codes(frame: pd.DataFrame, options: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """frame with each named column of option codes (0, 1, ...) made categorical, its
    categories the options' labels in code order."""
    out = frame.copy()
    for name, labels in options.items():
        out[name] = pd.Categorical.from_codes(frame[name].astype(int), categories=list(labels))
    return out
