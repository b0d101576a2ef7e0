"""Forced-response randomized response.

With probability alpha the respondent reports the true option i; otherwise option j is
reported with probability beta_j. beta is a distribution over the k >= 2 options (for yes/no,
index 0 = no, 1 = yes).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

BETA_SUM_TOLERANCE = 1e-9


def as_beta(beta: float | Sequence[float]) -> tuple[float, ...]:
    """beta as a tuple over the options; a single number b means yes/no with P(yes) = b."""
    if isinstance(beta, int | float):
        return (1.0 - float(beta), float(beta))
    return tuple(float(b) for b in beta)


def validate(alpha: float, beta: Sequence[float]) -> None:
    """Raise ValueError unless 0 <= alpha < 1 and beta is a distribution with every beta_j in (0, 1).

    alpha = 1 or some beta_j = 0 would mean no privacy (an infinite epsilon).
    """
    if not (isinstance(alpha, int | float) and 0.0 <= alpha < 1.0):
        raise ValueError(f"alpha must be in [0, 1), got {alpha!r}")
    if len(beta) < 2:
        raise ValueError(f"beta needs at least 2 options, got {len(beta)}")
    for j, b in enumerate(beta):
        if not (isinstance(b, int | float) and 0.0 < b < 1.0):
            raise ValueError(f"beta[{j}] must be in (0, 1), got {b!r}")
    if abs(math.fsum(beta) - 1.0) > BETA_SUM_TOLERANCE:
        raise ValueError(f"beta must sum to 1, got {math.fsum(beta)!r}")


def report_probability(alpha: float, beta: Sequence[float], true: int, reported: int) -> float:
    """P(report j | true i) = alpha*[i == j] + (1 - alpha)*beta_j."""
    return alpha * (true == reported) + (1.0 - alpha) * beta[reported]


def epsilon(alpha: float, beta: float | Sequence[float]) -> float:
    """Exact epsilon: the largest log-ratio P(j | i) / P(j | i') over every output j.

    eps = ln(1 + alpha / ((1 - alpha) * min_j beta_j)); for yes/no this is the max over both outputs.
    """
    beta = as_beta(beta)
    validate(alpha, beta)
    return math.log1p(alpha / ((1.0 - alpha) * min(beta)))


def alpha_for_epsilon(eps: float, beta: float | Sequence[float]) -> float:
    """The largest float alpha with epsilon(alpha, beta) <= eps.

    Closed form: with r = e^eps - 1 and b = min_j beta_j, alpha = r*b / (1 + r*b)
    (for b = 1/2 that is tanh(eps/2)); then stepped with math.nextafter to the largest
    float that does not exceed eps, so a survey made "at eps" never reads back above it.
    """
    if not (isinstance(eps, int | float) and math.isfinite(eps) and eps > 0):
        raise ValueError(f"epsilon must be a positive finite number, got {eps!r}")
    beta = as_beta(beta)
    validate(0.0, beta)
    # 1/(r*b) = e^-eps / ((1 - e^-eps) b): finite at any eps, where e^eps - 1 overflows past 709.
    inverse_rb = math.exp(-eps) / (-math.expm1(-eps) * min(beta))
    alpha = min(1.0 / (inverse_rb + 1.0), math.nextafter(1.0, 0.0))
    while alpha > 0.0 and epsilon(alpha, beta) > eps:
        alpha = math.nextafter(alpha, 0.0)
    while True:
        up = math.nextafter(alpha, 1.0)
        if up >= 1.0 or epsilon(up, beta) > eps:
            return alpha
        alpha = up


def compose(alpha_p: float, beta_p: Sequence[float], alpha_i: float,
            beta_i: Sequence[float]) -> tuple[float, tuple[float, ...]]:
    """Two forced-response layers in a row are one forced response: (alpha, beta) of the whole.

    RAPPOR's permanent then instantaneous randomized response (Erlingsson, Pihur and Korolova,
    CCS 2014), for forced response. The permanent layer reports p from the true option t with
    P(p | t) = a_p [p = t] + (1 - a_p) b_p[p]; the instantaneous layer reports r from p with
    P(r | p) = a_i [r = p] + (1 - a_i) b_i[r]. Summing over p, and using sum_p P(p | t) = 1:

        P(r | t) = a_i P(r | t)_permanent + (1 - a_i) b_i[r]
                 = a_p a_i [r = t] + a_i (1 - a_p) b_p[r] + (1 - a_i) b_i[r],

    which is forced response with

        alpha   = a_p a_i
        beta[r] = (a_i (1 - a_p) b_p[r] + (1 - a_i) b_i[r]) / (1 - a_p a_i),

    a distribution: its numerators sum to a_i (1 - a_p) + 1 - a_i = 1 - a_p a_i. Plain
    arithmetic, so exact on fractions.Fraction.
    """
    alpha = alpha_p * alpha_i
    beta = tuple((alpha_i * (1 - alpha_p) * p + (1 - alpha_i) * i) / (1 - alpha)
                 for p, i in zip(beta_p, beta_i, strict=True))
    return alpha, beta


def uniform_beta(k: int) -> tuple[float, ...]:
    """The variance-optimal beta at fixed epsilon: uniform over the k options (Warner's design for k = 2)."""
    if k < 2:
        raise ValueError(f"need at least 2 options, got {k}")
    return (1.0 / k,) * k


@dataclass(frozen=True)
class Mechanism:
    """One question's randomizer: report the truth with probability alpha, else draw from beta."""

    alpha: float
    beta: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "beta", as_beta(self.beta))
        validate(self.alpha, self.beta)

    @classmethod
    def from_epsilon(cls, eps: float, beta: float | Sequence[float] | None = None,
                     k: int = 2) -> "Mechanism":
        """The mechanism at exactly eps (never above); beta defaults to uniform over k options."""
        beta = uniform_beta(k) if beta is None else as_beta(beta)
        return cls(alpha_for_epsilon(eps, beta), beta)

    @property
    def k(self) -> int:
        """Number of options."""
        return len(self.beta)

    @property
    def epsilon(self) -> float:
        """eps = ln(1 + alpha / ((1 - alpha) * min_j beta_j))."""
        return epsilon(self.alpha, self.beta)

    def probability(self, true: int, reported: int) -> float:
        """P(report `reported` | true option `true`)."""
        return report_probability(self.alpha, self.beta, true, reported)

    def then(self, instantaneous: "Mechanism") -> "Mechanism":
        """This mechanism's report randomized again by `instantaneous`, as one mechanism
        (see `compose`)."""
        return Mechanism(*compose(self.alpha, self.beta, instantaneous.alpha, instantaneous.beta))

    def report_distribution(self, true_proportions: Sequence[float]) -> tuple[float, ...]:
        """Expected reported rates lam_j = alpha*pi_j + (1 - alpha)*beta_j for true proportions pi."""
        return tuple(self.alpha * p + (1.0 - self.alpha) * b
                     for p, b in zip(true_proportions, self.beta, strict=True))
