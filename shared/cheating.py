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
"""

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from .estimate import DEFAULT_CONFIDENCE, clip_unit, cover
from .intervals import z_value
from .mechanism import Mechanism, alpha_for_epsilon

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
    point shown to people); the Wald interval p_hat -+ z se clipped to [0, 1] and widened to
    contain p_mle (estimate.cover)."""

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


def estimate_cheating(design: CheatingDesign, yes: Sequence[int], n: Sequence[int], *,
                      confidence: float = DEFAULT_CONFIDENCE) -> CheatingEstimate:
    """The shares of honest yes, honest no and non-compliers from each group's yes count
    and size (module docstring). Standard errors as RRreg's: each group's rate with variance
    lambda_g (1 - lambda_g) / (n_g - 1), the unbiased estimate of a binomial proportion's
    variance, at the constrained fit's rates (the observed ones wherever `solve` lands in the
    simplex, where the estimates equal RRreg's CDMsym; never 0 or 1 unless the fit puts them
    there), through `covariance`."""
    if len(yes) != 2 or len(n) != 2:
        raise ValueError("give the yes count and the size of each of the two groups")
    for c, size in zip(yes, n, strict=True):
        if any(isinstance(v, bool) or not isinstance(v, int) for v in (c, size)):
            raise ValueError("counts and sizes must be integers")
        if size < 2 or not 0 <= c <= size:
            raise ValueError("each group needs at least 2 reports and 0 <= yes <= its size")
    z = z_value(confidence)
    pi, gamma = design.solve([c / size for c, size in zip(yes, n, strict=True)])
    mle = maximum_likelihood(design, yes, n)
    cov = design.covariance([lam * (1.0 - lam) / (size - 1)
                             for lam, size in zip(design.report_rates(*mle), n, strict=True)])
    points = (pi, 1.0 - pi - gamma, gamma)
    mle_points = (mle[0], 1.0 - mle[0] - mle[1], mle[1])
    shares = []
    for j, name in enumerate(SHARES):
        se = math.sqrt(max(cov[j][j], 0.0))
        low, high = cover(clip_unit(points[j] - z * se), clip_unit(points[j] + z * se),
                          mle_points[j])
        shares.append(Share(name, points[j], mle_points[j], se, low, high))
    detected = shares[2].ci_low > 0.0
    return CheatingEstimate(
        n=tuple(n), yes=tuple(yes), confidence=confidence, epsilon=design.epsilon,
        shares=tuple(shares), covariance=tuple(tuple(row) for row in cov),
        log_likelihood=log_likelihood(design, yes, n, *mle),
        noncompliance_detected=detected,
        warning=(f"some respondents answer No whatever they are told: the non-compliant "
                 f"share's {confidence:.0%} interval excludes 0, so a plain forced-response "
                 "estimate of this question would be biased" if detected else None))
