"""Detecting respondents who answer No whatever the randomizer says: the symmetric
cheating-detection design.

Clark and Desharnais (1998, "Honest answers to embarrassing questions: detecting cheating in
the randomized response model", Psychological Methods 3, 160-168) split the sample at random
into two groups that use forced response with different probabilities, and model three kinds
of respondent: honest yes (share pi), honest no (beta) and non-compliers (gamma), who say No
whatever they are told. Their design forces only Yes, so a reported No comes only from
someone whose true answer is no or who does not comply: its epsilon is infinite. The
symmetric model (Ostapczuk, Moshagen, Zhao and Musch 2009, "Assessing sensitive attributes
using the randomized response technique: evidence for the importance of response symmetry",
Journal of Educational and Behavioral Statistics 34, 267-287; R package RRreg's CDMsym, Heck
and Moshagen 2018, Journal of Statistical Software 85(2)) forces Yes and No in both groups,
so each group is a forced-response mechanism (alpha_g, beta_g) of finite epsilon.

With y_g = (1 - alpha_g) beta_g[yes] the forced-yes probability of group g, a complier
reports yes with probability alpha_g [true yes] + y_g and a non-complier never, so

    lambda_g = P(yes | group g) = alpha_g pi + (1 - gamma) y_g,

two linear equations in (pi, gamma), solvable when D = alpha_2 y_1 - alpha_1 y_2 != 0:

    pi = (y_1 lambda_2 - y_2 lambda_1) / D,
    gamma = (alpha_1 (lambda_2 - y_2) - alpha_2 (lambda_1 - y_1)) / D,   beta = 1 - pi - gamma.

Each respondent's group is drawn independently of the answer and reported with it, so a
respondent's (group, report) has epsilon max_g epsilon_g: the design's epsilon.

As a question design (`design = "cheating_detection"` on a yes/no question, the scheme
`CheatingDetection`, JavaScript twin web/cheating.js) the device runs it exactly: one 53-bit
draw U0 picks the group, group 1 iff U0 < 2^52 (probability exactly 1/2), then the group's
forced response on the exact yes/no randomizer (randomizer.py) on U1, U2; the report is
[group, bit] (group 0 or 1). P(g, y | x) = P_g(y | x) / 2, so every ratio between two answers
is a ratio of the group's randomizer and the design's epsilon is the largest group's, each
computed from the integer thresholds (RandomizerEpsilon). On a device the randomizer cannot be
overridden, so a non-complier here is a report of No whatever the group's draw said: a client
that sends No regardless, or a respondent who re-answers until the report shows No. Someone
who types No as the true answer is indistinguishable from an honest No in any design.
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ldpsurvey.shared.mechanisms.forced_response import yes_no
from ldpsurvey.shared.mechanisms.protocol import (
    FieldError,
    Fields,
    OneOption,
    Report,
    Settings,
    empty_entry,
    is_index,
    percent,
)
from ldpsurvey.shared.mechanisms.randomizer import (
    Draw,
    N,
    Thresholds,
    randomize,
    realized_epsilon,
    thresholds,
)
from ldpsurvey.shared.stats.design import Mechanism, alpha_for_epsilon, as_beta
from ldpsurvey.shared.stats.distributions import chi_square_sf, reported_p
from ldpsurvey.shared.stats.estimate import (
    DEFAULT_CONFIDENCE,
    FIT_LEVEL,
    SMALL_SAMPLE,
    project_to_simplex,
)
from ldpsurvey.shared.stats.intervals import z_value
from ldpsurvey.shared.stats.posterior import best_guess_accuracy

# The default design at epsilon eps: group 1 forces yes with beta (m, 1 - m) = (no, yes),
# group 2 mirrors it, alpha the largest at eps; m on this grid minimizing Var(pi) + Var(gamma)
# at REFERENCE_SHARES (the optimum moves little with the shares, much with eps).
MINORITY_GRID = tuple(j / 100 for j in range(1, 50))
REFERENCE_SHARES = (0.3, 0.05)  # (pi, gamma)
SHARES = ("honest_yes", "honest_no", "noncompliant")
GOLDEN_STEPS = 200  # golden-section steps on a boundary edge: the bracket shrinks 0.618^200


@dataclass(frozen=True)
class CheatingDesign:
    """The two groups' forced-response mechanisms for compliers (yes/no: beta = (no, yes))."""

    groups: tuple[Mechanism, Mechanism]

    def __post_init__(self) -> None:
        if len(self.groups) != 2 or any(m.k != 2 for m in self.groups):
            raise ValueError("a cheating-detection design is two yes/no mechanisms")
        if any(m.alpha <= 0.0 for m in self.groups):
            raise ValueError("alpha = 0 reports pure noise: nothing can be estimated")
        if self.determinant == 0.0:
            raise ValueError("the two groups' designs must differ in forced yes per honest "
                             "answer (y_1 / alpha_1 != y_2 / alpha_2), or gamma is not identified")

    @classmethod
    def from_epsilon(cls, eps: float, minority: float | None = None) -> "CheatingDesign":
        """Group 1: beta = (minority, 1 - minority), group 2 the mirror, each at exactly eps
        (alpha_for_epsilon). minority None: the grid value minimizing
        Var(pi) + Var(gamma) at REFERENCE_SHARES (per respondent, groups of equal size)."""
        if minority is None:
            return min((cls.from_epsilon(eps, m) for m in MINORITY_GRID),
                       key=lambda design: design.reference_variance())
        if not 0.0 < minority < 0.5:
            raise ValueError(f"minority must be in (0, 0.5), got {minority!r}")
        beta = (minority, 1.0 - minority)
        alpha = alpha_for_epsilon(eps, beta)
        return cls((Mechanism(alpha, beta), Mechanism(alpha, beta[::-1])))

    @property
    def epsilon(self) -> float:
        """max_g epsilon_g: the group is independent of the answer, so (group, report)
        reveals no more than the group's report."""
        return max(m.epsilon for m in self.groups)

    def forced(self, group: int) -> tuple[float, float]:
        """(P(told to say yes), P(told to say no)) in group 0 or 1."""
        m = self.groups[group]
        return (1.0 - m.alpha) * m.beta[1], (1.0 - m.alpha) * m.beta[0]

    @property
    def rrreg_p(self) -> tuple[float, float, float, float]:
        """RRreg's CDMsym p: (yes_1, no_1, yes_2, no_2)."""
        return (*self.forced(0), *self.forced(1))

    @property
    def determinant(self) -> float:
        """D = alpha_2 y_1 - alpha_1 y_2 (module docstring)."""
        (a1, a2), (y1, y2) = self._alphas(), (self.forced(0)[0], self.forced(1)[0])
        return a2 * y1 - a1 * y2

    def _alphas(self) -> tuple[float, float]:
        return self.groups[0].alpha, self.groups[1].alpha

    def report_rates(self, pi: float, gamma: float) -> tuple[float, float]:
        """lambda_g = alpha_g pi + (1 - gamma) y_g for both groups."""
        return tuple(m.alpha * pi + (1.0 - gamma) * self.forced(g)[0]
                     for g, m in enumerate(self.groups))

    def solve(self, rates: Sequence[float]) -> tuple[float, float]:
        """(pi, gamma) whose report rates are `rates` (module docstring)."""
        (a1, a2), (y1, y2), (l1, l2) = self._alphas(), (self.forced(0)[0], self.forced(1)[0]), rates
        d = self.determinant
        return (y1 * l2 - y2 * l1) / d, (a1 * (l2 - y2) - a2 * (l1 - y1)) / d

    def covariance(self, variances: Sequence[float]) -> list[list[float]]:
        """Covariance of (pi, beta, gamma) estimated by `solve` from independent group rates
        of these variances v: J diag(v) J' for the linear map J from (lambda_1, lambda_2) to
        (pi, beta, gamma)."""
        (a1, a2), (y1, y2), d = self._alphas(), (self.forced(0)[0], self.forced(1)[0]), self.determinant
        pi_row, gamma_row = (-y2 / d, y1 / d), (-a2 / d, a1 / d)
        rows = (pi_row, tuple(-p - g for p, g in zip(pi_row, gamma_row, strict=True)), gamma_row)
        return [[math.fsum(r[g] * s[g] * variances[g] for g in range(2)) for s in rows]
                for r in rows]

    def reference_variance(self) -> float:
        """Var(pi) + Var(gamma) per respondent at REFERENCE_SHARES, half the sample a group
        (Var(lambda_g) = lambda_g (1 - lambda_g) / (1/2))."""
        cov = self.covariance([2.0 * lam * (1.0 - lam)
                               for lam in self.report_rates(*REFERENCE_SHARES)])
        return cov[0][0] + cov[2][2]


@dataclass(frozen=True)
class Share:
    """One share (honest yes, honest no or non-compliant): p_hat from `solve` (it may leave
    [0, 1]) and its standard error; p_mle the maximum-likelihood share over the simplex (the
    point shown to people); the profile-likelihood interval (profile_interval), in [0, 1] and
    around p_mle."""

    name: str
    p_hat: float
    p_mle: float
    standard_error: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class CheatingEstimate:
    """The three shares, the covariance of their p_hat (in SHARES order), the log-likelihood
    at the constrained fit, and noncompliance_detected: the non-compliant share's interval
    excludes 0 (then `warning` says so; None otherwise)."""

    n: tuple[int, int]
    yes: tuple[int, int]
    confidence: float
    epsilon: float
    shares: tuple[Share, Share, Share]
    covariance: tuple[tuple[float, ...], ...]
    log_likelihood: float
    noncompliance_detected: bool
    warning: str | None

    def as_dict(self) -> dict:
        """The fields under their own names (API, CLI --json)."""
        return asdict(self)


def log_likelihood(design: CheatingDesign, yes: Sequence[int], n: Sequence[int], pi: float,
                   gamma: float) -> float:
    """sum_g yes_g log lambda_g + (n_g - yes_g) log(1 - lambda_g): two binomials (RRreg's
    RRuni.CDMsym.ll); -inf where a reported answer has probability 0."""
    total = 0.0
    for lam, c, size in zip(design.report_rates(pi, gamma), yes, n, strict=True):
        for count, p in ((c, lam), (size - c, 1.0 - lam)):
            if count:
                if p <= 0.0:
                    return -math.inf
                total += count * math.log(p)
    return total


def maximum_likelihood(design: CheatingDesign, yes: Sequence[int],
                       n: Sequence[int]) -> tuple[float, float]:
    """(pi, gamma) maximizing log_likelihood over pi, gamma >= 0, pi + gamma <= 1.

    The rates are affine in (pi, gamma) and the log-likelihood concave in the rates, so it is
    concave here: the solution of `solve` at the observed rates when that lies in the
    simplex, else the best point of its three edges (pi = 0, gamma = 0, beta = 0), each a
    concave function of one variable maximized by golden-section search (Kiefer 1953)."""
    pi, gamma = design.solve([c / size for c, size in zip(yes, n, strict=True)])
    if pi >= 0.0 and gamma >= 0.0 and pi + gamma <= 1.0:
        return pi, gamma
    edges = (lambda t: (0.0, t), lambda t: (t, 0.0), lambda t: (t, 1.0 - t))
    candidates = [edge(_golden(lambda t, edge=edge: log_likelihood(design, yes, n, *edge(t))))
                  for edge in edges]
    return max(candidates, key=lambda point: log_likelihood(design, yes, n, *point))


def _golden(f) -> float:
    """The maximizer over [0, 1] of a concave f, by golden-section search (endpoints too)."""
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    low, high = 0.0, 1.0
    for _ in range(GOLDEN_STEPS):
        left, right = high - ratio * (high - low), low + ratio * (high - low)
        if f(left) < f(right):
            low = left
        else:
            high = right
    middle = (low + high) / 2.0
    return max((0.0, middle, 1.0), key=f)


# The profile's points: each share fixed at psi leaves a segment of the simplex, t in [0, 1].
SEGMENTS = (lambda psi, t: (psi, t * (1.0 - psi)),  # honest yes = psi
            lambda psi, t: (t * (1.0 - psi), (1.0 - t) * (1.0 - psi)),  # honest no = psi
            lambda psi, t: (t * (1.0 - psi), psi))  # non-compliant = psi
BISECTIONS = 50  # halvings of [0, 1]: 2^-50, about 1e-15


def profile(design: CheatingDesign, yes: Sequence[int], n: Sequence[int], share: int,
            psi: float) -> float:
    """max log_likelihood over the simplex's points whose share `share` (SHARES order) is psi:
    the segment SEGMENTS[share](psi, t), along which the rates are affine in t, so the
    log-likelihood is concave in t and its maximum is where the derivative
    sum_g dlambda_g/dt (yes_g / lambda_g - (n_g - yes_g) / (1 - lambda_g)) changes sign
    (bisection; the segment's ends where it never does)."""
    segment = SEGMENTS[share]
    start = design.report_rates(*segment(psi, 0.0))
    slope = [b - a for a, b in zip(start, design.report_rates(*segment(psi, 1.0)), strict=True)]
    low, high = 0.0, 1.0
    for _ in range(BISECTIONS):
        t = (low + high) / 2.0
        rising = 0.0
        for lam0, d, c, size in zip(start, slope, yes, n, strict=True):
            if d:  # lambda in (0, 1) at every t in (0, 1) of a segment of more than a point
                lam = lam0 + d * t
                rising += d * (c / lam - (size - c) / (1.0 - lam))
        low, high = (t, high) if rising > 0.0 else (low, t)
    return max(log_likelihood(design, yes, n, *segment(psi, t)) for t in (0.0, low, 1.0))


def profile_interval(design: CheatingDesign, yes: Sequence[int], n: Sequence[int], share: int,
                     point: float, top: float, confidence: float) -> tuple[float, float]:
    """The profile-likelihood interval of one share (Venzon and Moolgavkar 1988, "A method
    for computing profile-likelihood-based confidence intervals", Applied Statistics 37;
    Pawitan 2001, In All Likelihood, 3.4): {psi : 2 (top - profile(psi)) <= z^2}, top the
    log-likelihood at the constrained fit, whose share is `point`. profile is concave in psi
    (a concave function maximized over the rest of a convex set), so each end is one
    crossing, found by bisection between the point and 0 or 1. At a share on the simplex's
    edge the statistic's law is a mixture of chi^2_0 and chi^2_1 (Self and Liang 1987), so
    the chi^2_1 cut z^2 is conservative there. A share of 1 fixes both parameters (a
    vertex): a point hypothesis, its statistic at most chi^2_2 in the tail (Self and Liang
    1987), so 1 is in the interval when 2 (top - profile(1)) <= -2 ln(1 - confidence),
    chi^2_2's quantile (with the chi^2_1 cut the honest-no share of 1 covered 0.90 at eps 1,
    n = 200)."""
    z = z_value(confidence)
    floor = top - z * z / 2.0

    def end(outer: float) -> float:
        cut = top + math.log(1.0 - confidence) if outer == 1.0 else floor
        if profile(design, yes, n, share, outer) >= cut:
            return outer
        inside, outside = point, outer
        for _ in range(BISECTIONS):
            middle = (inside + outside) / 2.0
            inside, outside = ((middle, outside) if profile(design, yes, n, share, middle) >= floor
                               else (inside, middle))
        return outside

    return end(0.0), end(1.0)


def estimate_cheating(design: CheatingDesign, yes: Sequence[int], n: Sequence[int], *,
                      confidence: float = DEFAULT_CONFIDENCE) -> CheatingEstimate:
    """The shares of honest yes, honest no and non-compliers from each group's yes count
    and size (module docstring). Standard errors as RRreg's: each group's rate with variance
    lambda_g (1 - lambda_g) / (n_g - 1), the unbiased estimate of a binomial proportion's
    variance, at the constrained fit's rates (the observed ones wherever `solve` lands in the
    simplex, where the estimates equal RRreg's CDMsym; never 0 or 1 unless the fit puts them
    there), through `covariance`. Intervals: each share's profile-likelihood interval
    (profile_interval; the Wald interval p_hat -+ z se it replaced covered 0.92 at n = 50,
    eps 1 and 2, and gave a share of 1 the width 0 whenever every report said No,
    bench/coverage.py)."""
    if len(yes) != 2 or len(n) != 2:
        raise ValueError("give the yes count and the size of each of the two groups")
    for c, size in zip(yes, n, strict=True):
        if any(isinstance(v, bool) or not isinstance(v, int) for v in (c, size)):
            raise ValueError("counts and sizes must be integers")
        if size < 2 or not 0 <= c <= size:
            raise ValueError("each group needs at least 2 reports and 0 <= yes <= its size")
    z_value(confidence)  # refuses a bad level before any work
    pi, gamma = design.solve([c / size for c, size in zip(yes, n, strict=True)])
    mle = maximum_likelihood(design, yes, n)
    cov = design.covariance([lam * (1.0 - lam) / (size - 1)
                             for lam, size in zip(design.report_rates(*mle), n, strict=True)])
    points = (pi, 1.0 - pi - gamma, gamma)
    mle_points = (mle[0], 1.0 - mle[0] - mle[1], mle[1])
    top = log_likelihood(design, yes, n, *mle)
    shares = []
    for j, name in enumerate(SHARES):
        se = math.sqrt(max(cov[j][j], 0.0))
        low, high = profile_interval(design, yes, n, j, mle_points[j], top, confidence)
        shares.append(Share(name, points[j], mle_points[j], se, low, high))
    detected = shares[2].ci_low > 0.0
    return CheatingEstimate(
        n=tuple(n), yes=tuple(yes), confidence=confidence, epsilon=design.epsilon,
        shares=tuple(shares), covariance=tuple(tuple(row) for row in cov),
        log_likelihood=top,
        noncompliance_detected=detected,
        warning=(f"some respondents answer No whatever they are told: the non-compliant "
                 f"share's {confidence:.0%} interval excludes 0, so a plain forced-response "
                 "estimate of this question would be biased" if detected else None))


# --- the question design ----------------------------------------------------------------------

DESIGN = "cheating_detection"  # the question's `design`
FIELDS = {"design", "epsilon", "groups"}  # a definition gives epsilon or groups
LABELS = ("Yes (honest)", "No (honest)", "No regardless (non-compliant)")  # SHARES, in words
HALF = N // 2  # group 1 iff U0 < HALF: probability exactly 1/2
CI_METHOD = "profile-likelihood"


def fit_p_value(yes: Sequence[int], n: Sequence[int], fitted: float) -> float:
    """The likelihood-ratio test of the design on the two groups' counts: G = 2 (l_sat -
    fitted), `fitted` the log-likelihood at the constrained fit (CheatingEstimate), l_sat the
    two binomials at the observed rates. G is 0 whenever `solve` lands in the simplex; under
    the design it is asymptotically chi-bar-squared (a mixture of chi^2_0, chi^2_1, chi^2_2:
    Self and Liang 1987), whose tail never exceeds chi^2_2's, which this p-value uses
    (conservative), as likelihood.fit_p_value does for choice questions; never 0 (reported_p)."""
    saturated = 0.0
    for c, size in zip(yes, n, strict=True):
        saturated += math.fsum(count * math.log(count / size) for count in (c, size - c) if count)
    return reported_p(chi_square_sf(max(0.0, 2.0 * (saturated - fitted)), 2))


@dataclass(frozen=True)
class CheatingDetection(OneOption):
    """The scheme of a yes/no question asked with the two-group cheating-detection design
    (module docstring): report [group, bit], four counters (reports of bit y in group g at
    2g + y), estimates of the three SHARES from estimate_cheating."""

    options: tuple[str, ...]
    cdm: CheatingDesign  # the two groups' mechanisms and the estimator
    type: str = "yes_no"
    name: str = DESIGN
    counters: int = 4

    @property
    def groups(self) -> tuple[Mechanism, Mechanism]:
        return self.cdm.groups

    @property
    def thresholds(self) -> tuple[Thresholds, Thresholds]:
        return tuple(thresholds(m.alpha, m.beta) for m in self.groups)

    def group_epsilon(self, group: int) -> float:
        """The group's randomizer's epsilon: its integer thresholds' (randomizer.realized_epsilon)
        or the float formula's where larger, as forced response publishes (RandomizerEpsilon)."""
        return max(realized_epsilon(self.thresholds[group]), self.groups[group].epsilon)

    @property
    def epsilon(self) -> float:
        """max_g of group_epsilon (module docstring): what is published, capped and charged."""
        return max(self.group_epsilon(g) for g in range(2))

    @property
    def realized_epsilon(self) -> float:
        return max(realized_epsilon(t) for t in self.thresholds)

    @property
    def nominal_epsilon(self) -> float:
        return self.cdm.epsilon

    def fields(self) -> dict[str, Any]:
        return {"design": self.name, "groups": [{"alpha": m.alpha, "beta": list(m.beta)}
                                                for m in self.groups]}

    def parse_text(self, text: str) -> int:
        return yes_no(text.strip().lower(), self.options)

    def randomize(self, truth: Any, draw: Draw) -> Report:
        """[group, report]: U0 picks the group, then the group's randomizer on U1, U2."""
        truth = self.check_truth(truth)
        group = int(draw() >= HALF)
        return [group, randomize(truth, self.thresholds[group], draw)]

    def check_report(self, value: Any) -> str | None:
        if not (type(value) is list and len(value) == 2 and all(is_index(v, 2) for v in value)):
            return "must be [group, answer]: a list of two integers, each 0 or 1"
        return None

    def largest_report(self) -> Report:
        return [1, 1]

    def tally(self, report: Report) -> Iterable[tuple[int, int]]:
        return ((2 * report[0] + report[1], 1),)

    def summary(self, counts: Sequence[int], settings: Settings) -> dict[str, Any]:
        """design, groups (each with alpha, beta, epsilon, n and yes), epsilon, n, per share
        (SHARES, labelled LABELS) the estimate keys from estimate_cheating (profile-likelihood intervals,
        whatever method is asked), the covariance of the three p_hat, the log-likelihood and
        noncompliance_detected with its `warning`. With fewer than 2 reports in a group the
        shares are null (their standard errors need n_g - 1 > 0)."""
        sizes = [counts[2 * g] + counts[2 * g + 1] for g in range(2)]
        yes = [counts[2 * g + 1] for g in range(2)]
        n = sum(sizes)
        groups = [{"alpha": m.alpha, "beta": list(m.beta), "epsilon": self.group_epsilon(g),
                   "n": sizes[g], "yes": yes[g]} for g, m in enumerate(self.groups)]
        document = {"design": self.name, "groups": groups, "epsilon": self.epsilon, "n": n}
        if min(sizes) < 2:
            entry = {**empty_entry(self.epsilon, settings), "n": n, "reported_count": None,
                     "ci_method": CI_METHOD}
            return {**document, "covariance": None, "log_likelihood": None,
                    "noncompliance_detected": None, "warning": None,
                    "options": [{"index": j, "option": label, "share": share, **entry}
                                for j, (share, label) in enumerate(zip(SHARES, LABELS,
                                                                       strict=True))]}
        fit = estimate_cheating(self.cdm, yes, sizes, confidence=settings.confidence)
        p_value = fit_p_value(yes, sizes, fit.log_likelihood)
        clipped = project_to_simplex([s.p_hat for s in fit.shares])
        small = f"small sample: n = {n} < {SMALL_SAMPLE}" if n < SMALL_SAMPLE else None
        options = []
        for j, (share, label) in enumerate(zip(fit.shares, LABELS, strict=True)):
            notes = [w for w in (small, fit.warning if j == 2 else None) if w]
            options.append({
                "index": j, "option": label, "share": share.name, "n": n,
                "reported_count": None, "reported_rate": None, "p_hat": share.p_hat,
                "p_hat_clipped": clipped[j], "p_mle": share.p_mle,
                "standard_error": share.standard_error, "ci_low": share.ci_low,
                "ci_high": share.ci_high, "ci_method": CI_METHOD,
                "confidence": settings.confidence, "fit_p_value": p_value,
                "design_consistent": p_value >= FIT_LEVEL, "epsilon": self.epsilon,
                "warning": "; ".join(notes) or None})
        return {**document, "covariance": [list(row) for row in fit.covariance],
                "log_likelihood": fit.log_likelihood,
                "noncompliance_detected": fit.noncompliance_detected, "warning": fit.warning,
                "options": options}

    def simulate(self, truths: Any, rng: Any) -> list[Report]:
        """Reports of simulated behaviours (draw_answers: 0 honest no, 1 honest yes, 2 a
        non-complier): the group [U0 >= 2^52], U0 uniform in [0, 2^53), then the group's
        randomizer (simulation.randomize_many) on the true answer, and a non-complier's
        report replaced by No. The device's distribution for compliers exactly."""
        import numpy as np

        from ldpsurvey.shared.sim import simulation

        truths = np.asarray(truths)
        group = (rng.integers(0, N, size=truths.size, dtype=np.int64) >= HALF).astype(np.int8)
        answer = np.minimum(truths, 1).astype(np.int8)
        bits = np.where(group == 1,
                        simulation.randomize_many(answer, self.thresholds[1], rng),
                        simulation.randomize_many(answer, self.thresholds[0], rng))
        bits[truths == 2] = 0
        return np.stack([group, bits], axis=1).tolist()

    def truth_of(self, value: Any) -> list[float]:
        """A scenario's shares: {yes = pi, noncompliant = gamma} (honest no the rest), or a
        number, P(Yes) with everyone complying. Returned in SHARES order."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = {"yes": value, "noncompliant": 0.0}
        need = ("{ yes = P(honest Yes), noncompliant = share answering No regardless }, two "
                "numbers >= 0 summing to at most 1")
        if not (isinstance(value, dict) and set(value) == {"yes", "noncompliant"}
                and all(isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1
                        for v in value.values())
                and value["yes"] + value["noncompliant"] <= 1 + 1e-9):
            raise ValueError(need)
        pi, gamma = float(value["yes"]), float(value["noncompliant"])
        return [pi, max(0.0, 1.0 - pi - gamma), gamma]

    def draw_answers(self, truth: Sequence[float], n: int, rng: Any) -> Any:
        """Behaviours (simulate): 0 honest no, 1 honest yes, 2 non-complier."""
        from ldpsurvey.shared.sim import simulation

        pi, beta, gamma = truth
        return simulation.true_answers([beta, pi, gamma], n, rng)

    def best_guess(self) -> float:
        """The group is seen with the report: the mean over the two equally likely groups of
        each group's best-guess accuracy."""
        return math.fsum(best_guess_accuracy(m.alpha, m.beta) for m in self.groups) / 2

    def expected_margin(self, n: int, confidence: float = 0.95) -> float:
        """z sqrt(max_j Cov_jj) with n/2 reports a group at the worst rates lambda_g = 1/2
        (each share's variance is sum_g J_jg^2 lambda_g (1 - lambda_g) / n_g: largest there)."""
        cov = self.cdm.covariance([0.25 / (n / 2)] * 2)
        return z_value(confidence) * math.sqrt(max(cov[j][j] for j in range(3)))

    def design(self) -> dict[str, Any]:
        """The groups' forced-response parameters (each as rr's forced-known design), RRreg's
        CDMsym p and what a report holds."""
        groups = [{"group": g + 1, "alpha": m.alpha, "beta": list(m.beta),
                   "epsilon": self.group_epsilon(g),
                   "rr_forced_known": {"p": m.alpha, "p1": self.cdm.forced(g)[0],
                                       "p0": self.cdm.forced(g)[1]}}
                  for g, m in enumerate(self.groups)]
        return {**self.fields(), "epsilon": self.epsilon, "options": list(self.options),
                "groups": groups, "group_probability": 0.5,
                "rrreg_cdmsym_p": list(self.cdm.rrreg_p),
                "report": "the group (1 or 2, drawn with probability 1/2 each) and the answer, "
                          "kept with probability alpha, else Yes with probability beta[1] of "
                          "the group; shares of honest Yes, honest No and of respondents "
                          "answering No regardless (Clark and Desharnais 1998, symmetric)",
                "cells": "QID_group the group, 1 or 2 (RRreg's coding), in every export; QID "
                         "the reported answer: its label (codes: its code)"}

    def columns(self, qid: str) -> list[str]:
        return [f"{qid}_group", qid]

    def cells(self, report: Report, codes: bool) -> list[str]:
        """The group as 1 or 2 (RRreg's group coding) and the answer's label, or with `codes`
        its index."""
        group, bit = report
        return [str(group + 1), str(bit) if codes else self.options[bit]]

    def shown_report(self, report: Report) -> str:
        return f"group {report[0] + 1}: {self.options[report[1]]}"

    plain_report = shown_report  # a group and an option are plain words already

    def note(self) -> tuple[str, str]:
        parts = []
        for g, m in enumerate(self.groups):
            parts.append(f"in group {g + 1} it receives your own answer with "
                         f"{percent(m.alpha)} probability, and otherwise Yes with "
                         f"{percent(m.beta[1])} and No with {percent(m.beta[0])}")
        return ("Your device puts you in one of two groups at random, and the server learns "
                f"which: {'; '.join(parts)}.", "you would say Yes")


def _group(value: Any, where: str) -> Mechanism:
    """One group of a definition's or manifest's `groups`: {alpha, beta}, beta P(forced Yes)
    or [P(forced No), P(forced Yes)]."""
    if not isinstance(value, dict) or set(value) != {"alpha", "beta"}:
        raise FieldError("groups", f"{where} must be {{alpha, beta}}")
    alpha, beta = value["alpha"], value["beta"]
    numbers = [alpha, *(beta if isinstance(beta, list) else [beta])]
    if any(isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
           for v in numbers) or not 0.0 < alpha < 1.0:
        raise FieldError("groups", f"{where}: alpha must be a number in (0, 1) and beta "
                         "P(forced Yes) in (0, 1) or [P(forced No), P(forced Yes)]")
    try:
        return Mechanism(float(alpha), as_beta(beta))
    except ValueError as exc:
        raise FieldError("groups", f"{where}: {exc}") from None


def scheme_for(options: tuple[str, ...], fields: Fields) -> CheatingDetection:
    """The scheme from `groups` (two {alpha, beta}: a manifest, or explicit designs) or from
    `epsilon` alone (CheatingDesign.from_epsilon: both groups at exactly that epsilon)."""
    if fields.has("groups") == fields.has("epsilon"):
        raise FieldError("epsilon", "give exactly one of epsilon (both groups derived at it) "
                         "or groups (two {alpha, beta})")
    if fields.has("epsilon"):
        return CheatingDetection(options, CheatingDesign.from_epsilon(fields.epsilon()))
    groups = fields.data["groups"]
    if not isinstance(groups, list) or len(groups) != 2:
        raise FieldError("groups", "must be a list of two groups, each {alpha, beta}")
    mechanisms = tuple(_group(g, f"group {j + 1}") for j, g in enumerate(groups))
    try:
        scheme = CheatingDetection(options, CheatingDesign(mechanisms))
        scheme.thresholds  # noqa: B018 -- refuses parameters the randomizer cannot realize
    except ValueError as exc:
        raise FieldError("groups", str(exc)) from None
    return scheme
