"""The randomizer, defined exactly, so Python and the browser produce the same output bit for bit.

Every draw is a uniform 53-bit integer U in [0, 2^53): in Python `secrets.randbits(53)`, in the
browser (a >>> 5) * 2^26 + (b >>> 6) from two 32-bit words of crypto.getRandomValues.
One randomization consumes exactly two draws, U1 then U2 (always both, so the number of draws
reveals nothing):

  report the true option i        if U1 < T
  otherwise report the first j    with U2 < C_j

Thresholds, from the manifest's float alpha and beta, with N = 2^53:
  T   = floor(alpha * N)
  C_j = floor(S_j * N), S_j = ((beta_0 + beta_1) + ...) + beta_j summed left to right in IEEE
        double arithmetic; the last threshold is set to N.
Both products are exact in double arithmetic (N is a power of two), so JavaScript computes the
same integers. The realized epsilon is computed from these integers (see `realized_epsilon`),
and that is the value checked against a respondent's ceiling.
"""

import math
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

N = 2**53
Draw = Callable[[], int]


def secure_draw() -> int:
    """A uniform integer in [0, 2^53) from the operating system's CSPRNG."""
    return secrets.randbits(53)


@dataclass(frozen=True)
class Thresholds:
    """T (keep the truth iff U1 < T) and the cumulative C_1 <= ... <= C_k = 2^53."""

    keep: int
    cumulative: tuple[int, ...]

    @property
    def option_weights(self) -> tuple[int, ...]:
        """w_j = C_j - C_{j-1}: the forced option is j with probability w_j / 2^53."""
        previous = (0, *self.cumulative[:-1])
        return tuple(c - p for c, p in zip(self.cumulative, previous, strict=True))


def thresholds(alpha: float, beta: Sequence[float]) -> Thresholds:
    """The integer thresholds of the module docstring, from the manifest's alpha and beta."""
    keep = math.floor(alpha * N)
    cumulative, running = [], 0.0
    for b in beta:
        running += b
        cumulative.append(math.floor(running * N))
    cumulative[-1] = N
    result = Thresholds(keep, tuple(cumulative))
    if not 0 <= keep < N or min(result.option_weights) <= 0:
        raise ValueError("these parameters leave an option with no chance of being forced "
                         "(or alpha rounds to 1): no privacy")
    return result


def realized_epsilon(t: Thresholds) -> float:
    """Epsilon of the integer mechanism: P(j | i) = T/N [i = j] + (N - T)/N * w_j/N, so
    eps = ln(1 + T N / ((N - T) min_j w_j)), the ratio computed exactly on integers.
    """
    return math.log1p(t.keep * N / ((N - t.keep) * min(t.option_weights)))


def randomize(true_option: int, t: Thresholds, draw: Draw = secure_draw) -> int:
    """One randomized report of `true_option`, consuming exactly two draws."""
    if not 0 <= true_option < len(t.cumulative):
        raise ValueError("the answer is not one of the question's options")
    keep_draw, option_draw = draw(), draw()
    if keep_draw < t.keep:
        return true_option
    return next(j for j, c in enumerate(t.cumulative) if option_draw < c)
