"""Survey weights raked to population margins, and weighted estimates of proportions.

Raking (iterative proportional fitting; Deming and Stephan 1940, "On a least squares
adjustment of a sampled frequency table when the expected marginal totals are known", Annals
of Mathematical Statistics 11) scales the weights, one margin after another, until every
weighted margin matches the population's: the raking-ratio calibration estimator of Deville
and Saerndal (1992, "Calibration estimators in survey sampling", JASA 87), the weights of R's
survey::rake and survey::calibrate(calfun = "raking").

Standard errors are by linearization through the calibration (Deville and Saerndal 1992,
section 3; Lumley 2010, Complex Surveys, section 7.4): an estimator's influence values are
replaced by their residuals e_i on the margins' indicator columns (least squares weighted by
the design weights before raking: 1 for the equal-probability sample raking starts from),
and treating the sample as drawn with replacement with one stratum, as survey::svydesign(ids
= ~1) does, Var = n / (n - 1) sum_i (w_i e_i)^2 for a total (divided by (sum w)^2 for a mean).
The effective sample size is Kish's (1965, Survey Sampling, section 11.7): (sum w)^2 / sum w^2.
"""

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ldpsurvey.analysis.cells import check_cells
from ldpsurvey.analysis.errors import AnalysisError, ConvergenceError
from ldpsurvey.shared import DEFAULT_CONFIDENCE, Mechanism, unbiased_estimate
from ldpsurvey.shared.stats.distributions import beta_quantile
from ldpsurvey.shared.stats.estimate import clip_unit
from ldpsurvey.shared.stats.intervals import check_confidence, clopper_pearson, z_value

RAKING_TOLERANCE = 1e-10  # largest |weighted share / population share - 1| accepted
MAX_RAKING_ITERATIONS = 1000  # full sweeps over the margins
EDGE = 1e-12  # a weighted rate this near 0 or 1 is that end (rounding of sums of weights)


@dataclass(frozen=True)
class Weights:
    """Raking weights for the rows of a data frame (in row order; with counts, each row's
    respondents each get its weight, and sum count w is the number of respondents), the raked
    columns, the indicator matrix of their margins (an intercept and one
    column per non-reference level: what linearization residualizes on), Kish's effective
    sample size and the sweeps raking took."""

    values: np.ndarray
    columns: tuple[str, ...]
    calibration: np.ndarray
    effective_n: float
    iterations: int
    counts: np.ndarray | None = None  # respondents per row (None: one each)

    def summary(self) -> dict:
        """What a report shows of the weights: the raked columns, respondents, Kish's
        effective sample size, the smallest and largest weight and the sweeps raking took."""
        count = np.ones(len(self.values)) if self.counts is None else self.counts
        used = self.values[count > 0]
        return {"margins": list(self.columns), "n": int(count.sum()),
                "effective_n": self.effective_n, "min_weight": float(used.min()),
                "max_weight": float(used.max()), "iterations": self.iterations}


@dataclass(frozen=True)
class WeightedEstimate:
    """One option's weighted estimate: reported_rate = sum w [report = j] / sum w, p_hat the
    unbiased (reported_rate - (1 - alpha) beta_j) / alpha (it may leave [0, 1]), p_hat_clipped
    (p_hat clipped to [0, 1]: the point shown, inside the interval), its linearization
    standard error, and the interval from Korn and Graubard's (weighted_estimates)."""

    n: int
    effective_n: float
    epsilon: float
    reported_rate: float
    p_hat: float
    p_hat_clipped: float
    standard_error: float
    confidence: float
    ci_low: float
    ci_high: float

    def as_dict(self) -> dict:
        """The fields under their own names (API, CLI --json)."""
        return asdict(self)


SHARE_TOTALS = (1.0, 100.0)  # a margin's shares, or its percentages
SHARE_TOLERANCE = 1e-6  # relative: |sum / total - 1| accepted


def read_margins(table: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Population margins {column: {level: share}} as shares: each column's values must sum to
    1 (shares) or 100 (percentages) within SHARE_TOLERANCE, so that a typo is an error rather
    than a silent renormalization; they are then divided by their sum (exactly 1 after).
    AnalysisError unless every value is a positive finite number, every column has at least
    two levels and its values sum so."""
    if not isinstance(table, Mapping) or not table:
        raise AnalysisError("margins must map each column to {level: population share}")
    margins = {}
    for column, levels in table.items():
        if not isinstance(levels, Mapping) or len(levels) < 2:
            raise AnalysisError(f"margin {column!r} needs a share for each of at least 2 levels")
        for level, share in levels.items():
            if isinstance(share, bool) or not isinstance(share, int | float) or not (
                    math.isfinite(share) and share > 0):
                raise AnalysisError(f"margin {column!r}, level {level!r}: the share must be a "
                                    f"positive number, got {share!r}")
        total = math.fsum(levels.values())
        if not any(abs(total / unit - 1.0) <= SHARE_TOLERANCE for unit in SHARE_TOTALS):
            raise AnalysisError(f"margin {column!r}: the shares sum to {total:.6g}, not 1 (or "
                                "100 for percentages)")
        margins[str(column)] = {str(level): share / total for level, share in levels.items()}
    return margins


def load_margins(path: str | Path) -> dict[str, dict[str, float]]:
    """Population margins from a file (read_margins checks them): JSON
    {"column": {"level": share, ...}, ...}, or CSV with the header column,level,share and one
    row per level. AnalysisError for a file of neither shape."""
    text = Path(path).read_text(encoding="utf-8")
    if str(path).endswith(".json"):
        try:
            return read_margins(json.loads(text))
        except json.JSONDecodeError as error:
            raise AnalysisError(f"{path}: not JSON ({error})") from None
    rows = list(csv.DictReader(text.splitlines()))
    if not rows or set(rows[0]) != {"column", "level", "share"}:
        raise AnalysisError(f"{path}: a CSV of margins has the header column,level,share")
    table: dict[str, dict[str, float]] = {}
    for number, row in enumerate(rows, start=2):
        try:
            share = float(row["share"])
        except (TypeError, ValueError):
            raise AnalysisError(f"{path}, line {number}: share {row['share']!r} is no number") from None
        table.setdefault(row["column"], {})[row["level"]] = share
    return read_margins(table)


def rake(data: pd.DataFrame, margins: Mapping[str, Mapping[str, float]], *,
         randomized: Sequence[str] = (), counts: str | None = None,
         min_cell: int | None = None, tolerance: float = RAKING_TOLERANCE,
         max_iterations: int = MAX_RAKING_ITERATIONS) -> Weights:
    """Weights that make each column's weighted shares equal the margins (module docstring),
    starting from equal weights and summing to the number of respondents. counts: a column of
    respondents per row (tallied data, as rr_logistic takes). Columns named in `randomized`
    are refused: their reported shares are not their population's. min_cell: refuse a level
    held by fewer respondents (open answers must not single anyone out). AnalysisError for a
    column that is missing, randomized, or has a level with no margin, a margin level with no
    row or (min_cell) too few, alone or together with the other margins' levels (cells.py);
    ConvergenceError when the margins cannot all be met (for
    example a combination of levels that the margins need and no row has)."""
    margins = read_margins(margins)
    count = (np.ones(len(data)) if counts is None
             else data[counts].to_numpy().astype(float))
    n = count.sum()
    if n < 2:
        raise AnalysisError("raking needs at least 2 rows")
    codes = {}
    for column, shares in margins.items():
        if column in randomized:
            raise AnalysisError(f"{column!r} is a randomized question: its reported shares are "
                                "not the population's, so it cannot be raked; rake on openly "
                                "answered questions")
        if column not in data.columns:
            raise AnalysisError(f"no column {column!r} to rake")
        values = data[column].astype(str).to_numpy()
        unmatched = sorted(set(values) - set(shares))
        if unmatched:
            raise AnalysisError(f"column {column!r} has level {unmatched[0]!r} with no "
                                "population margin")
        held = {level: count[values == level].sum() for level in shares}
        empty = [level for level, size in held.items() if size == 0]
        if empty:
            raise AnalysisError(f"margin {column!r}, level {empty[0]!r}: no row has it")
        small = [level for level, size in held.items() if min_cell and size < min_cell]
        if small:
            raise AnalysisError(f"margin {column!r}, level {small[0]!r}: fewer than {min_cell} "
                                "respondents, too few to weight without singling them out")
        codes[column] = (values, shares)
    if min_cell and len(codes) > 1:  # the cells the weights are constant on
        frame = data[list(codes)].astype(str).assign(**({counts: data[counts]} if counts else {}))
        check_cells(frame, list(codes), counts, min_cell)
    weights = np.ones(len(data))
    for sweep in range(1, max_iterations + 1):
        for values, shares in codes.values():
            for level, share in shares.items():
                rows = values == level
                weights[rows] *= share * n / (count[rows] @ weights[rows])
        if _largest_gap(weights, codes, count) < tolerance:
            return Weights(weights, tuple(margins), indicators(codes),
                           float((count @ weights) ** 2 / (count @ weights ** 2)), sweep,
                           None if counts is None else count)
    raise ConvergenceError(
        f"raking did not meet the margins after {max_iterations} sweeps (largest relative gap "
        f"{_largest_gap(weights, codes, count):.3g}): the margins may need a combination of levels "
        "that no row has")


def _largest_gap(weights: np.ndarray, codes: Mapping, count: np.ndarray) -> float:
    """max |weighted share / population share - 1| over every margin's levels."""
    mass = count * weights
    total = mass.sum()
    return max(abs(mass[values == level].sum() / (share * total) - 1.0)
               for values, shares in codes.values() for level, share in shares.items())


def indicators(codes: Mapping) -> np.ndarray:
    """An intercept and, per margin, the indicator of each level but the first: the span of
    the margins' indicators, whose residuals linearization takes."""
    columns = [np.ones(len(next(iter(codes.values()))[0]))]
    for values, shares in codes.values():
        columns += [(values == level).astype(float) for level in list(shares)[1:]]
    return np.column_stack(columns)


def linearized_variance(influence: np.ndarray, weights: np.ndarray, calibration: np.ndarray,
                        count: np.ndarray | None = None) -> np.ndarray:
    """The covariance of sum_i w_i z_i over a raked sample, z_i the influence values (one
    row per unit of count_u respondents alike, default 1): the residuals e of z on the
    calibration columns (least squares weighted by the design weights before raking, 1 per
    respondent), then the with-replacement, one-stratum variance of the x_i = w_i e_i,
    n / (n - 1) sum_i (x_i - xbar)(x_i - xbar)' (Deville and Saerndal 1992; what
    survey::svyrecvar computes for a calibrated svydesign(ids = ~1))."""
    count = np.ones(len(influence)) if count is None else count
    root = np.sqrt(count)[:, None]
    coefficients, *_ = np.linalg.lstsq(root * calibration, root * influence, rcond=None)
    x = weights[:, None] * (influence - calibration @ coefficients)
    n = count.sum()
    centred = x - (count @ x) / n
    return n / (n - 1.0) * np.einsum("u,ui,uj->ij", count, centred, centred)


def t_quantile(confidence: float, df: float) -> float:
    """The two-sided Student t quantile: t^2 / (df + t^2) is Beta(1/2, df/2) (Johnson, Kotz
    and Balakrishnan 1995, Continuous Univariate Distributions 2, 28.2)."""
    u = beta_quantile(confidence, 0.5, df / 2.0)
    return math.sqrt(df * u / (1.0 - u))


def weighted_estimates(reports: pd.Series, mechanism: Mechanism | None, weights: Weights, *,
                       confidence: float = DEFAULT_CONFIDENCE) -> tuple[WeightedEstimate, ...]:
    """Per option j of a question (reports: its categorical column, categories in code order;
    one row per row of the weights, each standing for weights.counts respondents), the
    weighted estimate (WeightedEstimate) with the linearization standard error of the weighted
    reported rate (a ratio: influence values [r_i = j] - rate_j), divided by alpha. mechanism
    None: an openly answered question, whose rate is the estimate (alpha 1, epsilon 0).

    Interval: Korn and Graubard's (1998, "Confidence intervals for proportions with small
    expected number of positive counts estimated from survey data", Survey Methodology 24):
    the Clopper-Pearson interval of the reported rate at the effective sample size
    n* = rate (1 - rate) / Var(rate), at most Kish's effective n (and that where the rate is
    0 or 1: with few reports of an option Var(rate) rests on them and n* capped at n covered
    0.90 at eps 5, n = 200 for a share of 0.03), times
    (z / t_df)^2, df = (sum w_i^2)^2 / sum w_i^4, at most n - 1: Satterthwaite's (1946)
    degrees of freedom of the variance sum_i w_i^2 e_i^2 (linearized_variance) when the e_i^2
    are alike (Korn and Graubard take the design's n - 1; with a few heavy weights the
    variance rests on fewer respondents); n* rate successes of n*, mapped through
    (x - (1 - alpha) beta_j) / alpha, clipped to [0, 1] and widened to p_hat_clipped (the
    Wald interval p_hat -+ z se it replaced covered 0.66 at eps 5, n = 50 for a share of 0.03,
    bench/coverage.py)."""
    if len(reports) != len(weights.values):
        raise AnalysisError(f"{len(weights.values)} weights for {len(reports)} rows")
    check_confidence(confidence)
    count = np.ones(len(reports)) if weights.counts is None else weights.counts
    w = weights.values
    codes = reports.cat.codes.to_numpy()
    if (codes < 0).any():
        raise AnalysisError("weighted estimates need every row's report")
    k = len(reports.cat.categories)
    onehot = (codes[:, None] == np.arange(k)[None, :]).astype(float)
    total = (count * w).sum()
    rates = (count * w) @ onehot / total
    variance = np.diag(linearized_variance(onehot - rates, w, weights.calibration,
                                           count)) / total ** 2
    df = min(count.sum() - 1.0, float((count @ w ** 2) ** 2 / (count @ w ** 4)))
    z = z_value(confidence)
    alpha = 1.0 if mechanism is None else mechanism.alpha
    forced = [0.0] * k if mechanism is None else [(1.0 - alpha) * b for b in mechanism.beta]
    n = float(count.sum())
    estimates = []
    for j, (rate, var) in enumerate(zip(rates, variance, strict=True)):
        p_hat = float(rate) if mechanism is None else unbiased_estimate(
            float(rate), alpha, mechanism.beta[j])
        se = math.sqrt(var) / alpha
        x = float(rate) if EDGE < rate < 1.0 - EDGE else float(round(rate))  # 1 - 1e-16: 1
        n_star = (min(weights.effective_n, x * (1.0 - x) / var)
                  * (z / t_quantile(confidence, df)) ** 2
                  if var > 0.0 and 0.0 < x < 1.0 else weights.effective_n)
        low, high = (clip_unit((end - forced[j]) / alpha)
                     for end in clopper_pearson(n_star * x, n_star, confidence))
        estimates.append(WeightedEstimate(
            n=int(n), effective_n=weights.effective_n, reported_rate=float(rate),
            p_hat=p_hat, p_hat_clipped=clip_unit(p_hat), standard_error=se,
            ci_low=min(low, clip_unit(p_hat)), ci_high=max(high, clip_unit(p_hat)),
            confidence=confidence,
            epsilon=0.0 if mechanism is None else mechanism.epsilon))
    return tuple(estimates)
