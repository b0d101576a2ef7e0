import math

import numpy as np
import pytest

from ldpsurvey.shared import Mechanism, difference
from ldpsurvey.shared.stats.intervals import z_value


def test_difference_by_hand():
    """alpha 1/2, beta (0.2, 0.3, 0.5), counts (20, 30, 50): pi_hat = (0.2, 0.3, 0.5), so
    pi_0 - pi_1 = -0.1 with SE sqrt(0.2 + 0.3 - 0.1^2) / (0.5 sqrt(100)) = 0.14; the interval is
    Agresti-Min's for the reported rates with the continuity correction 1/(2 (n + 2)), shifted
    by f_0 - f_1 = -0.05 and divided by alpha."""
    d = difference(Mechanism(0.5, (0.2, 0.3, 0.5)), [20, 30, 50], 0, 1)
    assert (d.first, d.second, d.confidence) == (0, 1, 0.95)
    assert d.estimate == pytest.approx(-0.1, rel=1e-12)
    assert d.standard_error == pytest.approx(0.14, rel=1e-12)
    centre, half = -10 / 102, (z_value(0.95) * math.sqrt(51 - 100 / 102) + 0.5) / 102
    assert d.ci_low == pytest.approx((centre - half + 0.05) / 0.5, rel=1e-12)
    assert d.ci_high == pytest.approx((centre + half + 0.05) / 0.5, rel=1e-12)
    assert d.as_dict()["estimate"] == d.estimate


def test_difference_is_clipped_and_its_standard_error_never_zero():
    d = difference(Mechanism(0.9, (0.05, 0.95)), [0, 40], 0, 1)
    assert d.ci_low == -1.0 and d.ci_high < 0 and d.standard_error > 0


@pytest.mark.parametrize("first, second", [(0, 0), (0, 3), (-1, 1)])
def test_difference_refuses_bad_options(first, second):
    with pytest.raises(ValueError, match="two different options"):
        difference(Mechanism(0.5, (0.2, 0.3, 0.5)), [20, 30, 50], first, second)


@pytest.mark.parametrize("n", [50, 400])
@pytest.mark.parametrize("first, second", [(0, 1), (2, 3), (1, 3)])
def test_monte_carlo_difference_coverage_and_standard_error(n, first, second):
    """4,000 seeded surveys of a 4-option question with non-uniform beta and an empty option:
    the interval covers >= 0.93 (Monte Carlo SE about 0.0035), and the SD of the estimate
    matches the standard error at the true rates within 4 Monte Carlo SEs of an SD (1/sqrt(2R))."""
    m = Mechanism(0.6, (0.1, 0.2, 0.3, 0.4))
    truth = (0.5, 0.3, 0.2, 0.0)
    replications = 4_000
    rng = np.random.default_rng(n * 10 + first * 4 + second)
    lam = m.report_distribution(truth)
    results = [difference(m, [int(c) for c in row], first, second)
               for row in rng.multinomial(n, lam, size=replications)]
    true_difference = truth[first] - truth[second]
    coverage = np.mean([d.ci_low <= true_difference <= d.ci_high for d in results])
    assert coverage >= 0.93, coverage
    li, lj = lam[first], lam[second]
    sd = math.sqrt((li + lj - (li - lj) ** 2) / n) / m.alpha
    spread = np.std([d.estimate for d in results], ddof=1)
    assert abs(spread / sd - 1) < 4 / math.sqrt(2 * replications)
