"""Estimates from support counts: the shared estimator of unary encoding, local hashing and
per-option bits (Wang et al., "Locally Differentially Private Protocols for Frequency
Estimation", USENIX Security 2017, section 4: the "pure" protocols).

A pure protocol gives each report a support set; option j is in it with probability p* when j
is the respondent's (or one of their selected) options and q* otherwise, whatever else the
respondent holds. So with c_j the number of reports supporting j out of n, c_j is
Binomial(n, lam_j), lam_j = q* + pi_j (p* - q*), which is exactly a yes/no forced response with

    alpha = p* - q*,   beta_yes = q* / (1 - alpha)

(P(yes | yes) = alpha + (1 - alpha) beta_yes = p*, P(yes | no) = q*). Each option's unbiased
estimate (c_j/n - q*)/(p* - q*) (Wang et al., Theorem 2), its standard error
sqrt(lam (1 - lam)/n)/(p* - q*), its exact interval for lam mapped through the same line and its
constrained point are those of estimate.estimate on the counts (n - c_j, c_j) of that yes/no
design, so every interval method applies unchanged.
"""

import math
from collections.abc import Callable, Sequence
from typing import Any

from ldpsurvey.shared.mechanisms.protocol import Settings, empty_entry
from ldpsurvey.shared.stats.design import Mechanism
from ldpsurvey.shared.stats.estimate import FIT_LEVEL, cover, estimate, project_to_simplex
from ldpsurvey.shared.stats.intervals import simultaneous_confidence
from ldpsurvey.shared.stats.planning import expected_margin


def yes_no_design(p_star: float, q_star: float) -> Mechanism:
    """The yes/no forced response whose reports of "supports j" have the same law."""
    alpha = p_star - q_star
    beta_yes = q_star / (1.0 - alpha)
    return Mechanism(alpha, (1.0 - beta_yes, beta_yes))


def variance_at_zero(p_star: float, q_star: float) -> float:
    """n Var(pi_hat_j) for an option nobody holds: q*(1 - q*) / (p* - q*)^2 (Wang et al. 2017,
    eq. (2)); the comparison `auto` makes between mechanisms at one epsilon."""
    return q_star * (1.0 - q_star) / (p_star - q_star) ** 2


def entries(counts: Sequence[int], n: int, p_star: float, q_star: float, epsilon: float,
            labels: Sequence[str], settings: Settings, simplex: bool) -> list[dict[str, Any]]:
    """Per option: estimate.estimate's keys for option j from (n - c_j, c_j) under
    yes_no_design, at level simultaneous_confidence(confidence, k) when simultaneous. With
    `simplex` (exactly one option each) p_hat_clipped and p_mle become the projection of the
    unbiased estimates onto the simplex (the constrained point, Wang et al. 2020, "Locally
    differentially private frequency estimation with consistency", NDSS), the interval widened
    to contain it (estimate.cover). fit_p_value is the question's: Bonferroni over the options'
    yes/no fit tests, min(1, k min_j p_j)."""
    if n == 0:
        return [{"index": j, "option": label, **empty_entry(epsilon, settings)}
                for j, label in enumerate(labels)]
    k = len(labels)
    design = yes_no_design(p_star, q_star)
    level = simultaneous_confidence(settings.confidence, k) if settings.simultaneous else (
        settings.confidence)
    per_option = [estimate(design, [n - c, c], confidence=level, method=settings.method)[1]
                  .as_dict() for c in counts]
    fit = min(1.0, k * min(e["fit_p_value"] for e in per_option))
    points = project_to_simplex([e["p_hat"] for e in per_option]) if simplex else None
    result = []
    for j, (label, entry) in enumerate(zip(labels, per_option, strict=True)):
        entry.update(confidence=settings.confidence, epsilon=epsilon, fit_p_value=fit,
                     design_consistent=fit >= FIT_LEVEL)
        if points is not None:
            entry["p_hat_clipped"] = entry["p_mle"] = points[j]
            entry["ci_low"], entry["ci_high"] = cover(entry["ci_low"], entry["ci_high"], points[j])
        result.append({"index": j, "option": label, **entry})
    return result


def covariance(options: list[dict[str, Any]], n: int,
               off_diagonal: Callable[[int, int], float]) -> list[list[float]] | None:
    """The covariance matrix of the unbiased estimates: the standard errors squared on the
    diagonal, off_diagonal(j, l) elsewhere; None before the first report."""
    if n == 0:
        return None
    k = len(options)
    return [[options[i]["standard_error"] ** 2 if i == j else off_diagonal(i, j)
             for j in range(k)] for i in range(k)]


def one_of_k_covariance(options: list[dict[str, Any]], n: int) -> list[list[float]] | None:
    """For protocols where each respondent holds exactly one option and, given it, option j's
    and l's support events are independent or share only the hash (OUE, OLH): Cov(pi_hat_j,
    pi_hat_l) = -pi_j pi_l / n for j != l. Derivation: E[s_j s_l] = (pi_j + pi_l) p* q* +
    (1 - pi_j - pi_l) q*^2 with q* = 1/g for OLH (a pair of options collides with probability
    1/g over the seed), lam_j lam_l = q*^2 + q* (p* - q*)(pi_j + pi_l) + pi_j pi_l (p* - q*)^2,
    so Cov(s_j, s_l) = -pi_j pi_l (p* - q*)^2; divided by n (p* - q*)^2. Evaluated at the
    projected shares (p_mle)."""
    return covariance(options, n, lambda i, j: -options[i]["p_mle"] * options[j]["p_mle"] / n)


class SupportMargin:
    """The expected half-width with n reports on the worst option, for the schemes estimated
    here (planning.expected_margin of the yes/no design with their p* and q*)."""

    p_star: float
    q_star: float

    def expected_margin(self, n: int, confidence: float = 0.95) -> float:
        return expected_margin(yes_no_design(self.p_star, self.q_star), n, confidence)


def best_guess(k: int, p_star: float, q_star: float) -> float:
    """How often guessing an option the report supports (at random among them, or among all k
    when none is) is right, answers equally likely, support events independent given the
    answer (exact for OUE, for OLH with the hash taken as a random function): by the number m
    of other options supported, sum_m C(k-1, m) q*^m (1-q*)^(k-1-m) p*/(m+1), plus
    (1 - p*)(1 - q*)^(k-1)/k when none is. It is the best guess: p* > q*, so a supported
    option is likelier than an unsupported one."""
    return sum(math.comb(k - 1, m) * q_star ** m * (1 - q_star) ** (k - 1 - m) * p_star / (m + 1)
               for m in range(k)) + (1 - p_star) * (1 - q_star) ** (k - 1) / k


def log_ratio(numerator: int, denominator: int) -> float:
    """ln(numerator / denominator) for positive integers, the quotient correctly rounded
    first (integer true division), so epsilon is exact to a float's last bit."""
    return math.log(numerator / denominator)


class OneOfK(SupportMargin):
    """What OUE and OLH share beyond the margin: each respondent holds exactly one of k options,
    so the per-option estimates are projected onto the simplex and covary as
    one_of_k_covariance says."""

    epsilon: float
    options: tuple[str, ...]

    def summary(self, counts: Sequence[int], settings: Settings) -> dict[str, Any]:
        """The scheme's fields, epsilon, n (the last counter), per option `entries` projected
        onto the simplex and their covariance (one_of_k_covariance)."""
        n = counts[-1]
        options = entries(counts[:-1], n, self.p_star, self.q_star, self.epsilon, self.options,
                          settings, simplex=True)
        return {**self.fields(), "epsilon": self.epsilon, "n": n, "options": options,
                "covariance": one_of_k_covariance(options, n)}
