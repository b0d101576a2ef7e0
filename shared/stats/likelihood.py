"""The constrained maximum-likelihood fit of one question, and the test of the stated design.

Forced response (Boruch 1971) reports option j with probability lam_j = alpha*pi_j + f_j,
f_j = (1 - alpha)*beta_j. With pi on the probability simplex the reported rates the design
allows are exactly {lam : lam_j >= f_j, sum lam_j = 1} (the upper bounds alpha + f_j follow
from the others' floors).
"""

import math
from collections.abc import Sequence

from ldpsurvey.shared.stats.design import Mechanism
from ldpsurvey.shared.stats.distributions import binomial_cdf, chi_square_sf, reported_p


def floors(mechanism: Mechanism) -> tuple[float, ...]:
    """f_j = (1 - alpha)*beta_j: the reported rate of option j when nobody holds it."""
    return tuple((1.0 - mechanism.alpha) * b for b in mechanism.beta)


def feasible_rates(mechanism: Mechanism, counts: Sequence[int]) -> tuple[float, ...]:
    """The reported rates at the maximum-likelihood fit, lam~ = argmax sum_j c_j log lam_j over
    the rates the design allows (lam_j >= f_j, sum lam_j = 1).

    The log-likelihood is concave, so the KKT conditions (Boyd and Vandenberghe 2004, 5.5.3)
    characterize the optimum: c_j / lam_j = mu - nu_j with nu_j >= 0 and nu_j (lam_j - f_j) = 0,
    that is lam_j = max(c_j / mu, f_j), with mu making the rates sum to 1. On the options held
    at their floor (the set A) that gives mu = sum_{j not in A} c_j / (1 - sum_{j in A} f_j);
    A starts with the options never reported and takes every option with c_j / f_j < mu until
    none is left (mu only grows as A grows, so at most k rounds). For yes/no this is the
    reported rate clipped to [f_1, alpha + f_1].
    """
    floor = floors(mechanism)
    held = {j for j, count in enumerate(counts) if count == 0}
    while True:
        mu = sum(c for j, c in enumerate(counts) if j not in held) / (
            1.0 - math.fsum(floor[j] for j in held))
        lower = {j for j, c in enumerate(counts) if j not in held and c < mu * floor[j]}
        if not lower:
            return tuple(floor[j] if j in held else c / mu for j, c in enumerate(counts))
        held |= lower


def maximum_likelihood(mechanism: Mechanism, counts: Sequence[int]) -> tuple[float, ...]:
    """pi_mle = (lam~ - f) / alpha: the maximum-likelihood true proportions over the probability
    simplex (what R package rr, Blair, Imai and Zhou 2015, reports for the forced design with
    known parameters). It equals the unbiased estimate wherever that lies in the simplex;
    clipped to [0, 1], where rounding in (lam - f) / alpha could otherwise carry it past 1
    by a few ulps (1 + 2e-16 at an all-yes count)."""
    alpha = mechanism.alpha
    return tuple(min(1.0, max(0.0, (lam - f) / alpha))
                 for lam, f in zip(feasible_rates(mechanism, counts), floors(mechanism), strict=True))


def fit_p_value(mechanism: Mechanism, counts: Sequence[int]) -> float:
    """The p-value of a goodness-of-fit test of the stated design (alpha, beta) on the counts.

    k = 2: the exact one-sided binomial p-value of the count at the nearest rate the design
    allows, P(X_j <= c_j | n, f_j) for the option j reported less often than its floor f_j
    (at most one of the two can be), else 1.
    k > 2: the likelihood-ratio test of the constrained fit against the unrestricted
    multinomial, G = 2 sum_j c_j log(c_j / (n lam~_j)). Under a correct design G is
    asymptotically chi-bar-squared, a mixture of chi^2_0 ... chi^2_{k-1} whose weights depend on
    the unknown true proportions (Self and Liang 1987; Silvapulle and Sen 2005, ch. 3); its tail
    never exceeds chi^2_{k-1}'s, which this p-value uses, so the test is conservative.
    Never 0: distributions.reported_p.
    """
    n = sum(counts)
    if len(counts) == 2:
        return reported_p(min(binomial_cdf(c, n, f) if c / n < f else 1.0
                              for c, f in zip(counts, floors(mechanism), strict=True)))
    fitted = feasible_rates(mechanism, counts)
    g = 2.0 * math.fsum(c * math.log(c / (n * lam)) for c, lam in zip(counts, fitted, strict=True) if c)
    return reported_p(chi_square_sf(g, len(counts) - 1))
