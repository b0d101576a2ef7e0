"""Tail probabilities of the beta, binomial and chi-square distributions, standard library only."""

import math


def regularized_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction
    (modified Lentz; Press et al., Numerical Recipes, 3rd ed., 6.4), using the symmetry
    I_x(a, b) = 1 - I_{1-x}(b, a) where it converges faster.
    """
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - regularized_beta(1.0 - x, b, a)
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    return math.exp(log_front) * _beta_continued_fraction(x, a, b) / a


def _beta_continued_fraction(x: float, a: float, b: float) -> float:
    """1 / (1 + d1 / (1 + d2 / (1 + ...))) with the standard coefficients d_m of I_x(a, b)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 10_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-15:
            return result
    raise ArithmeticError(f"incomplete beta did not converge for x={x}, a={a}, b={b}")


def beta_quantile(q: float, a: float, b: float) -> float:
    """The x in [0, 1] with I_x(a, b) = q: Newton's method on I_x(a, b) - q, whose derivative
    is the beta density x^(a-1) (1-x)^(b-1) / B(a, b), safeguarded by bisection (I is
    increasing in x, so [low, high] always brackets the root; a Newton step that leaves it is
    replaced by the midpoint). A handful of steps instead of bisection's fifty-odd, each of
    which costs an incomplete beta that grows slower with a + b."""
    low, high, x = 0.0, 1.0, a / (a + b)
    log_beta = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    for _ in range(200):
        excess = regularized_beta(x, a, b) - q
        if excess < 0:
            low = x
        else:
            high = x
        density = math.exp((a - 1) * math.log(x) + (b - 1) * math.log1p(-x) - log_beta)
        step = x - excess / density if density > 0 else low - 1.0
        if not low < step < high:
            step = (low + high) / 2
        if step in (low, high) or abs(step - x) <= 1e-16 * x:
            return step
        x = step
    return x


# The smallest p-value reported: tails below it underflow double precision or lie past the
# accuracy of the approximations above, so a p-value there is the bound p < P_FLOOR.
P_FLOOR = 1e-300


def reported_p(p: float) -> float:
    """A p-value as reported: max(p, P_FLOOR), never 0 (P_FLOOR reads as p < P_FLOOR; the CLI
    and the results page print it so)."""
    return max(p, P_FLOOR)


def binomial_cdf(count: int, n: int, p: float) -> float:
    """P(X <= count) for X ~ Binomial(n, p): I_{1-p}(n - count, count + 1) (Abramowitz and
    Stegun 26.5.24), 1 for count >= n."""
    if count >= n:
        return 1.0
    if count < 0:
        return 0.0
    return regularized_beta(1.0 - p, n - count, count + 1)


def binomial_sf(count: int, n: int, p: float) -> float:
    """P(X >= count) for X ~ Binomial(n, p): I_p(count, n - count + 1), 1 for count <= 0."""
    if count <= 0:
        return 1.0
    if count > n:
        return 0.0
    return regularized_beta(p, count, n - count + 1)


def chi_square_sf(x: float, df: int) -> float:
    """P(chi^2_df >= x) for an integer df >= 1, by the finite sums of Abramowitz and Stegun
    26.4.4-26.4.5: e^{-x/2} sum_{i<df/2} (x/2)^i / i! for even df; for odd df
    erfc(sqrt(x/2)) + sqrt(2x/pi) e^{-x/2} sum_{r=1}^{(df-1)/2} x^{r-1} / (1*3*...*(2r-1)).
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df!r}")
    if x <= 0.0:
        return 1.0
    if df % 2 == 0:
        term = total = math.exp(-x / 2)
        for i in range(1, df // 2):
            term *= x / (2 * i)
            total += term
        return min(1.0, total)
    term = math.sqrt(2 * x / math.pi) * math.exp(-x / 2)
    total = math.erfc(math.sqrt(x / 2))
    for r in range(1, (df + 1) // 2):
        total += term
        term *= x / (2 * r + 1)
    return min(1.0, total)
