"""Privacy amplification by shuffling: the central epsilon of a release of n shuffled reports.

Feldman, McMillan and Talwar, "Hiding Among the Clones: A Simple and Nearly Optimal Analysis
of Privacy Amplification by Shuffling", FOCS 2021, arXiv:2012.12803 (FMT below).

When each of n respondents sends one eps0-LDP report and the reports are released in random
order, with nothing that links a report to its sender, the release as a whole is
(eps, delta)-DP for an eps that can be far below eps0. The bound counts on the other n - 1
reports coming from honest respondents who ran the same randomizer on their own data: reports
that the server made up, or whose answers it knows, hide nobody. n counts honest reports only.

FMT Theorem 3.2 reduces every eps0-DP local randomizer to one pair of distributions on counts.
With C ~ Bin(n - 1, e^-eps0) (the other reports that act as "clones" of the target's),
A ~ Bin(C, 1/2) and D ~ Bern(e^eps0 / (e^eps0 + 1)),

    P = (A + D, C - A + 1 - D),    Q = (A + 1 - D, C - A + D),

and the shuffled release is (eps, delta)-DP whenever P and Q are (eps, delta)-indistinguishable.
`closed_form_epsilon` is the paper's closed-form bound on that eps (Theorem 3.1);
`numerical_epsilon` computes the hockey-stick divergence of P and Q exactly (Appendix E).
Standard library only.
"""

import functools
import math

DEFAULT_DELTA = 1e-6

# numerical_epsilon costs O(sqrt(n)) per divergence evaluation; above this n it reuses the
# bound at NUMERICAL_MAX_N (the bound only falls as n grows) and the closed form.
NUMERICAL_MAX_N = 10**7
# release_batch_required looks no further than this.
BATCH_SEARCH_LIMIT = 10**9
# numerical_epsilon reports a multiple of this step (2^-24, about 6e-8), rounded up.
EPSILON_GRID = 2.0**-24

# Below this c the tails of Bin(c, 1/2) come from exact integer sums; above it, a recurrence.
_EXACT_TAILS_BELOW = 64
# Mass of C left outside the summed window, as a fraction of delta (added to delta in full).
_WINDOW_SHARE_OF_DELTA = 1e-6
_WINDOW_FLOOR = 1e-200
# Relative allowance for the rounding of math.lgamma and of the window weights (see below).
_RELATIVE_ALLOWANCE = 1e-5
# Divergence terms below this are negligible; they are bounded by it rather than computed.
_NEGLIGIBLE = 1e-280
# Above this local epsilon, e^-eps0 < 1e-304: there are no clones to hide among, and e^eps
# could overflow; numerical_epsilon returns eps0 itself.
_NO_CLONES_ABOVE = 700.0
_UNIT_ROUNDOFF = 2.0**-50  # 2^-53 with a factor 8 to spare


def _validate(epsilon_local: float, n: int, delta: float) -> None:
    if not (isinstance(epsilon_local, int | float) and not isinstance(epsilon_local, bool)
            and math.isfinite(epsilon_local) and epsilon_local > 0.0):
        raise ValueError(f"local epsilon must be a positive finite number, got {epsilon_local!r}")
    if not (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not (isinstance(delta, int | float) and not isinstance(delta, bool) and 0.0 < delta < 1.0):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")


def _closed_form_applies(epsilon_local: float, n: int, delta: float) -> bool:
    """FMT Theorem 3.1's condition: eps0 <= ln(n / (16 ln(4/delta)))."""
    _validate(epsilon_local, n, delta)
    return epsilon_local <= math.log(n / (16.0 * math.log(4.0 / delta)))


def closed_form_epsilon(epsilon_local: float, n: int, delta: float = DEFAULT_DELTA) -> float | None:
    """FMT Theorem 3.1, in the encoding of the paper's published code (apple/ml-shuffling-
    amplification, closedformanalysis):

        a = 8 sqrt(e^eps0 ln(4/delta) / n),  c = 8 e^eps0 / n,  eps1 = ln(1 + a + c),
        eps = ln(1 + (1 - e^-eps0) / (1 + e^(-eps0 - eps1)) * (a + c)).

    Valid only when eps0 <= ln(n / (16 ln(4/delta))); None otherwise (then eps0 itself is
    the only safe central epsilon this bound gives). The value can exceed eps0 near the edge
    of validity: `central_epsilon` takes the minimum.
    """
    if not _closed_form_applies(epsilon_local, n, delta):
        return None
    e0 = math.exp(epsilon_local)
    a = 8.0 * math.sqrt(e0 * math.log(4.0 / delta) / n)
    c = 8.0 * e0 / n
    eps1 = math.log1p(a + c)
    return math.log1p(-math.expm1(-epsilon_local) / (1.0 + math.exp(-epsilon_local - eps1)) * (a + c))


@functools.lru_cache(maxsize=64)
def _clone_window(epsilon_local: float, n: int, delta: float) -> tuple[int, tuple[float, ...], float]:
    """The law of C ~ Bin(n - 1, p), p = e^-eps0, on a window around its mode.

    Returns (c_lo, weights, outside): weights[i] bounds P(C = c_lo + i) from above and
    `outside` bounds P(C outside the window). Weights are built from the mode by the exact
    ratios P(c + 1)/P(c) = (N - c) p / ((c + 1)(1 - p)) and divided by their own sum, which
    is below the full sum, 1: each is an upper bound. A side stops once the rest of it, at
    most w(c) r / (1 - r) since the ratios r keep falling away from the mode (a geometric
    series), is below max(1e-6 delta, 1e-200) / 2 of the window.
    """
    big_n = n - 1
    p = math.exp(-epsilon_local)
    if big_n == 0 or p == 0.0:
        return 0, (1.0,), 0.0
    odds = p / -math.expm1(-epsilon_local)
    share = max(_WINDOW_SHARE_OF_DELTA * delta, _WINDOW_FLOOR) / 2.0
    mode = min(big_n, int((big_n + 1) * p))
    up, rest_up, c, total = [1.0], 0.0, mode, 1.0
    while c < big_n:
        ratio = (big_n - c) / (c + 1) * odds
        if ratio < 1.0 and up[-1] * ratio / (1.0 - ratio) <= share * total:
            rest_up = up[-1] * ratio / (1.0 - ratio)
            break
        up.append(up[-1] * ratio)
        total += up[-1]
        c += 1
    down, rest_down, c, last = [], 0.0, mode, 1.0
    while c > 0:
        ratio = c / ((big_n - c + 1) * odds)
        if ratio < 1.0 and last * ratio / (1.0 - ratio) <= share * total:
            rest_down = last * ratio / (1.0 - ratio)
            break
        last *= ratio
        down.append(last)
        total += last
        c -= 1
    weights = tuple(w / total for w in [*reversed(down), *up])
    return mode - len(down), weights, (rest_up + rest_down) / total


@functools.lru_cache(maxsize=_EXACT_TAILS_BELOW)
def _exact_tails(c: int) -> tuple[float, ...]:
    """P(Bin(c, 1/2) >= k) for k = 0..c + 1, from exact integer sums (correctly rounded)."""
    tails, suffix = [0.0] * (c + 2), 0
    for k in range(c, -1, -1):
        suffix += math.comb(c, k)
        tails[k] = suffix / (1 << c)
    return tuple(tails)


def _divergence_small(c: int, a_coef: float, b_coef: float, beta: float) -> float:
    """h(c) (see _hockey_stick_delta) from the exact tails, for small c."""
    tails = _exact_tails(c)

    def tail(k: int) -> float:
        return 1.0 if k <= 0 else tails[k] if k <= c + 1 else 0.0

    t = min(int(beta * (c + 1)) + 1, c + 1)
    return max(0.0, *(a_coef * tail(j - 1) - b_coef * tail(j) for j in (t - 1, t, t + 1)))


def _divergence_sum_large(c0: int, weights: tuple[float, ...], a_coef: float, b_coef: float,
                          beta: float) -> float:
    """sum_i weights[i] h(c0 + i) for c0 >= _EXACT_TAILS_BELOW, plus an error allowance.

    For each c it needs S_c(k) = P(Bin(c, 1/2) >= k) at k = t - 2 .. t + 1 around the
    threshold t, which moves up by 0 or 1 as c grows. Starting from c0 (pmf in log space via
    math.lgamma, tail summed until the rest, a geometric series, is below 2^-60 of it), it
    walks c up with S_{c+1}(k) = S_c(k) + b_c(k - 1)/2 and Pascal's rule for the pmf b, and k
    up with S_c(k + 1) = S_c(k) - b_c(k): O(1) per c. Once a computed h falls below 1e-280,
    every later h is bounded by that (h does not grow with c, see _hockey_stick_delta) and the
    walk stops. The result adds a bound on the rounding of the walk: every operation is exact
    to 2^-53 relative, so after s steps each pmf value is off by at most 3 s 2^-53 relative and
    each tail by s 2^-53 of the largest tail plus the pmf errors summed (counted as
    s^2 2^-53 times the largest pmf value); both are taken 8 times over.
    """
    t = min(int(beta * (c0 + 1)) + 1, c0 + 1)
    k = t - 2
    log_b = (math.lgamma(c0 + 1) - math.lgamma(k + 1) - math.lgamma(c0 - k + 1)
             - c0 * math.log(2.0))
    if 2 * k >= c0 and log_b + math.log(c0 + 1) < math.log(_NEGLIGIBLE):
        # h(c) <= h(c0) <= S_c0(k) <= (c0 + 1) b_c0(k): negligible for the whole walk.
        return math.fsum(weights) * _NEGLIGIBLE
    b1 = math.exp(log_b)
    b0 = b1 * k / (c0 - k + 1)
    tail, term, a, steps = 0.0, b1, k, 0
    while term > 0.0:
        tail += term
        steps += 1
        ratio = (c0 - a) / (a + 1)
        if a >= c0 or (ratio < 1.0 and term * ratio / (1.0 - ratio) <= 2.0**-60 * tail):
            break
        term *= ratio
        a += 1
    total, largest_tail, largest_pmf, cut = 0.0, tail, max(b0, b1), 0.0
    for i, weight in enumerate(weights):
        c = c0 + i
        if i:
            before = b0 * (k - 1) / (c - k + 1)  # b_{c-1}(k - 2)
            tail += 0.5 * b0
            b1, b0 = 0.5 * (b1 + b0), 0.5 * (b0 + before)
            steps += 1
        t = int(beta * (c + 1)) + 1
        while k < t - 2 and k < c - 1:
            tail -= b1
            b0, b1 = b1, b1 * (c - k) / (k + 1)
            k += 1
            steps += 1
        s1 = tail - b1
        b2 = b1 * (c - k) / (k + 1)
        s2 = s1 - b2
        s3 = s2 - b2 * (c - k - 1) / (k + 2)
        # the three candidate thresholds t - 1, t, t + 1
        h = a_coef * tail - b_coef * s1
        h2 = a_coef * s1 - b_coef * s2
        h3 = a_coef * s2 - b_coef * s3
        if h2 > h:
            h = h2
        if h3 > h:
            h = h3
        if tail > largest_tail:
            largest_tail = tail
        if b0 > largest_pmf:
            largest_pmf = b0
        if b1 > largest_pmf:
            largest_pmf = b1
        if h < _NEGLIGIBLE:
            cut = math.fsum(weights[i:]) * _NEGLIGIBLE
            break
        total += weight * h
    rounding = (a_coef + b_coef) * _UNIT_ROUNDOFF * steps * (largest_tail + steps * largest_pmf)
    return total + cut + rounding


def _hockey_stick_delta(epsilon_local: float, n: int, delta: float, eps: float) -> float:
    """An upper bound on the hockey-stick divergence D_{e^eps}(P || Q) of FMT Theorem 3.2,
    the delta at which the shuffled release is eps-DP (FMT Appendix E; the published code
    calls it deltacomp). D(Q || P) is the same: mirroring a -> C + 1 - a swaps P and Q.

    Conditioned on C = c, P puts alpha = e^eps0 / (1 + e^eps0) on A + 1 and 1 - alpha on A
    (the first count); Q the reverse. With b_c the Bin(c, 1/2) pmf, S_c(k) = P(Bin(c, 1/2) >= k)
    and E = e^eps, P_c(a) - E Q_c(a) > 0 exactly when a > beta (c + 1), so

        h(c) = max_t [A S_c(t - 1) - B S_c(t)],  A = alpha - E (1 - alpha),  B = E alpha - (1 - alpha),
        beta = B / (A + B),  delta(eps) = sum_c P(C = c) h(c),

    the max attained at t = floor(beta (c + 1)) + 1; t - 1, t and t + 1 are all tried, so a
    rounding of beta never lowers h. h(c) does not grow with c: P_{c+1}, Q_{c+1} are P_c, Q_c
    plus an independent fair coin, and post-processing cannot raise a divergence. For
    eps >= eps0, A <= 0 and h = 0.

    Conservative at every cut: C's window adds its outside mass in full, negligible h are
    bounded rather than dropped, the walk's rounding is bounded and added, and the total is
    multiplied by 1 + 1e-5 for the relative error of math.lgamma's pmf (arguments up to 1e7,
    values up to 1.6e8: a few 1e-8 each) and of the window weights.
    """
    c_lo, weights, outside = _clone_window(epsilon_local, n, delta)
    if eps >= epsilon_local:
        return outside
    em = math.exp(-epsilon_local)
    a_coef = -math.expm1(eps - epsilon_local) / (1.0 + em)
    b_coef = (math.exp(eps) - em) / (1.0 + em)
    beta = b_coef / (a_coef + b_coef)
    small = max(0, min(len(weights), _EXACT_TAILS_BELOW - c_lo))
    total = sum(weights[i] * _divergence_small(c_lo + i, a_coef, b_coef, beta) for i in range(small))
    if small < len(weights):
        total += _divergence_sum_large(c_lo + small, weights[small:], a_coef, b_coef, beta)
    return (1.0 + _RELATIVE_ALLOWANCE) * total + outside


def _smallest_grid_epsilon(epsilon_local: float, n: int, delta: float, start: float) -> float:
    """The smallest multiple of EPSILON_GRID whose divergence bound is <= delta.

    The search keeps a bracket (lo, hi] of grid points, hi checked (bound <= delta), lo not,
    and narrows it by interpolating ln(bound / delta) (the Illinois rule, with a bisection
    step whenever the bracket has failed to halve twice running) until they are neighbours.
    The answer is hi: the tolerance is rounded up to the grid, and the result is a checked
    upper bound. `start`, a known bound (the closed form or eps0), sets the first hi.
    """

    def gap(k: int) -> tuple[bool, float]:
        bound = _hockey_stick_delta(epsilon_local, n, delta, k * EPSILON_GRID)
        return bound <= delta, math.log(max(bound, 1e-300) / delta)

    hi = math.ceil(start / EPSILON_GRID)
    ok, f_hi = gap(hi)
    if not ok:
        hi = math.ceil(epsilon_local / EPSILON_GRID)
        ok, f_hi = gap(hi)
        if not ok:  # only for a delta near 1e-200 and below: no bound but eps0 itself
            return epsilon_local
    lo = 0
    ok, f_lo = gap(lo)
    if ok:
        return 0.0
    kept, slow = 0, 0
    while hi - lo > 1:
        width = hi - lo
        if slow >= 2:
            k = (lo + hi) // 2
        else:
            k = min(max(round(lo + width * f_lo / (f_lo - f_hi)), lo + 1), hi - 1)
        ok, f = gap(k)
        if ok:
            hi, f_hi = k, f
            f_lo, kept = (f_lo / 2, kept + 1) if kept > 0 else (f_lo, 1)
        else:
            lo, f_lo = k, f
            f_hi, kept = (f_hi / 2, kept - 1) if kept < 0 else (f_hi, -1)
        slow = slow + 1 if hi - lo > width / 2 else 0
    return hi * EPSILON_GRID


@functools.lru_cache(maxsize=1024)
def numerical_epsilon(epsilon_local: float, n: int, delta: float = DEFAULT_DELTA) -> float:
    """An upper bound on the central epsilon from FMT's numerical method (Appendix E): the
    smallest eps at which the hockey-stick divergence of P and Q (FMT Theorem 3.2, see
    _hockey_stick_delta) is <= delta, found by search over eps.

    An upper bound at every step: the divergence is computed with conservative truncation and
    rounding allowances (_hockey_stick_delta), and the search returns a checked multiple of
    EPSILON_GRID = 2^-24, rounded up (_smallest_grid_epsilon). Never above eps0 or the closed
    form where it applies (both are bounds too; the minimum is returned). One evaluation costs
    O(sqrt(n)); for n > NUMERICAL_MAX_N = 1e7 the bound at n = 1e7 is used (the bound does not
    grow with n: C ~ Bin(n - 1, p) only grows), with the closed form. For eps0 > 700 it is
    eps0 (e^-eps0 < 1e-304: nothing to hide among). Cached.
    """
    _validate(epsilon_local, n, delta)
    bound = float(epsilon_local)
    closed = closed_form_epsilon(epsilon_local, n, delta)
    if closed is not None:
        bound = min(bound, closed)
    if epsilon_local > _NO_CLONES_ABOVE:
        return bound
    if n > NUMERICAL_MAX_N:
        return min(bound, numerical_epsilon(epsilon_local, NUMERICAL_MAX_N, delta))
    return min(bound, _smallest_grid_epsilon(epsilon_local, n, delta, bound))


def central_epsilon(epsilon_local: float, n: int, delta: float = DEFAULT_DELTA) -> float:
    """The central epsilon of a shuffled release of n honest eps0-LDP reports, at delta:
    min(eps0, closed form where valid, numerical bound) (FMT Theorems 3.1 and 3.2), which is
    what numerical_epsilon returns."""
    return numerical_epsilon(epsilon_local, n, delta)


def _smallest_closed_form_batch(epsilon_local: float, target: float, delta: float) -> int | None:
    """The smallest n <= BATCH_SEARCH_LIMIT whose closed form applies and is <= target."""

    def within(n: int) -> bool:
        closed = closed_form_epsilon(epsilon_local, n, delta)
        return closed is not None and closed <= target

    if not within(BATCH_SEARCH_LIMIT):
        return None
    lo, hi = 0, BATCH_SEARCH_LIMIT
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if within(mid) else (mid, hi)
    return hi


def release_batch_required(epsilon_local: float, target: float,
                           delta: float = DEFAULT_DELTA) -> int | None:
    """The smallest release batch n whose central epsilon (central_epsilon) is <= target, or
    None if no n up to BATCH_SEARCH_LIMIT = 1e9 reaches it.

    The bound does not grow with n, so the search is a binary search over n. The closed form
    (cheap) is searched over the whole range; the numerical bound, one divergence evaluation
    at the grid point just below target per step (the same test central_epsilon's search
    makes), only up to NUMERICAL_MAX_N = 1e7 (above it, numerical_epsilon uses the value at
    1e7), by doubling from n = 1 and then bisecting.
    """
    _validate(epsilon_local, 1, delta)
    if not (isinstance(target, int | float) and math.isfinite(target) and target > 0.0):
        raise ValueError(f"target epsilon must be a positive finite number, got {target!r}")
    if target >= epsilon_local:
        return 1
    closed = _smallest_closed_form_batch(epsilon_local, target, delta)
    if epsilon_local > _NO_CLONES_ABOVE:  # numerical_epsilon is eps0 there
        return closed
    limit = NUMERICAL_MAX_N if closed is None else min(NUMERICAL_MAX_N, closed - 1)
    at = math.floor(target / EPSILON_GRID) * EPSILON_GRID

    def within(n: int) -> bool:
        return _hockey_stick_delta(epsilon_local, n, delta, at) <= delta

    if limit < 1 or not within(limit):
        return closed
    lo, hi = 0, 1
    while hi < limit and not within(hi):
        lo, hi = hi, min(2 * hi, limit)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if within(mid) else (mid, hi)
    return hi
