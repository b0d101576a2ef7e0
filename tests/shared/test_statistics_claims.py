"""The statements of docs/statistics.md about which estimate to cite, computed exactly by binomial sums."""

import math

from ldpsurvey.shared import Mechanism, estimate


def exact_means(mechanism: Mechanism, n: int, truth: float) -> tuple[float, float, float]:
    """E[p_hat], E[p_hat_clipped], E[p_mle] of the Yes option at true proportion `truth`."""
    lam = mechanism.alpha * truth + (1 - mechanism.alpha) * mechanism.beta[1]
    means = [0.0, 0.0, 0.0]
    for yes in range(n + 1):
        weight = math.comb(n, yes) * lam ** yes * (1 - lam) ** (n - yes)
        e = estimate(mechanism, [n - yes, yes])[1]
        for i, value in enumerate((e.p_hat, e.p_hat_clipped, e.p_mle)):
            means[i] += weight * value
    return tuple(means)


def test_clipping_biases_near_0_and_the_unbiased_estimate_does_not():
    """At a true share of 0 (beta 0.5, n = 50) the clipped estimate and the MLE are biased
    upward, by 0.049 at alpha 0.5 and 0.090 at alpha 0.3; the unbiased estimate is not."""
    for alpha, bias in ((0.5, 0.049), (0.3, 0.090)):
        unbiased, clipped, mle = exact_means(Mechanism(alpha, 0.5), 50, 0.0)
        assert abs(unbiased) < 1e-12
        assert abs(clipped - bias) < 0.0005 and abs(mle - clipped) < 1e-12
    m = Mechanism(0.5, 0.5)
    interior = exact_means(m, 50, 0.5)
    assert abs(interior[0] - 0.5) < 1e-12 and abs(interior[1] - 0.5) < 0.01
