"""Optimized unary encoding (OUE; Wang, Blocki, Li and Jha, USENIX Security 2017, section 4.3)
for a choice question, with its JavaScript twin web/oue.js.

The true option v becomes k bits, one per option; bit v is reported 1 with probability P/N and
every other bit with probability Q/N, each from its own 53-bit draw U_j (exactly k draws):
bit j = [U_j < P] if j == v else [U_j < Q], with N = 2^53 and integer thresholds P > Q.

Exact epsilon of this integer mechanism. Inputs v != v' change only bits v and v'; the bits are
independent, so for every report y

    P(y | v) / P(y | v') = [P(y_v | 1) / P(y_v | 0)] [P(y_v' | 0) / P(y_v' | 1)]
                        <= (P / Q) ((N - Q) / (N - P)),

attained at y_v = 1, y_v' = 0, so epsilon = ln(P (N - Q) / ((N - P) Q)), computed from the
integers. OUE's optimal choice is p = 1/2, q = 1/(e^eps + 1) (Wang et al., eq. (10)): P = 2^52 and
Q the smallest integer with (N - Q)/Q <= e^eps, so the realized epsilon never exceeds the one
asked for. Estimates: support.py with p* = P/N, q* = Q/N (Wang et al., Theorem 2); variance at
an unheld option q(1 - q)/(p - q)^2 = 4 e^eps / (e^eps - 1)^2, independent of k.
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ldpsurvey.shared.mechanisms import support
from ldpsurvey.shared.mechanisms.protocol import (
    BIT_CELLS,
    EPSILON,
    BitReport,
    Declaration,
    FieldError,
    Fields,
    OneOption,
    Param,
    Report,
    percent,
)
from ldpsurvey.shared.mechanisms.randomizer import Draw, N

NAME = "oue"
HALF = N // 2


def _epsilon(keep: int, flip: int) -> float:
    return support.log_ratio(keep * (N - flip), (N - keep) * flip)


def flip_for_epsilon(eps: float) -> int:
    """The smallest Q with epsilon(2^52, Q) <= eps: the optimal q = 1/(e^eps + 1), rounded up."""
    flip = max(1, math.ceil(N / (math.exp(eps) + 1.0)))
    while flip > 1 and _epsilon(HALF, flip - 1) <= eps:
        flip -= 1
    while _epsilon(HALF, flip) > eps:
        flip += 1
    return flip


def thresholds(p: float, q: float) -> tuple[int, int]:
    """The integer thresholds (P, Q) = (floor(p N), floor(q N)) of manifest probabilities,
    ValueError unless 0 < Q < P < N (otherwise no privacy, or nothing to estimate)."""
    keep, flip = math.floor(p * N), math.floor(q * N)
    if not 0 < flip < keep < N:
        raise ValueError("oue needs 0 < q < p < 1")
    return keep, flip


@dataclass(frozen=True)
class UnaryEncoding(OneOption, BitReport, support.OneOfK):
    options: tuple[str, ...]
    p: float  # P(bit 1 | the respondent's option), P = floor(p N)
    q: float  # P(bit 1 | another option), Q = floor(q N)
    name: str = NAME

    def __post_init__(self) -> None:
        thresholds(self.p, self.q)

    @classmethod
    def from_epsilon(cls, options: tuple[str, ...], eps: float) -> "UnaryEncoding":
        return cls(options, HALF / N, flip_for_epsilon(eps) / N)

    @property
    def counters(self) -> int:
        """One per option (reports with its bit set), then n."""
        return len(self.options) + 1

    @property
    def epsilon(self) -> float:
        return _epsilon(*thresholds(self.p, self.q))

    realized_epsilon = epsilon

    @property
    def nominal_epsilon(self) -> float:
        return math.log(self.p * (1 - self.q) / ((1 - self.p) * self.q))

    @property
    def p_star(self) -> float:
        return self.p

    @property
    def q_star(self) -> float:
        return self.q

    def fields(self) -> dict[str, Any]:
        return {"mechanism": self.name, "p": self.p, "q": self.q}

    def randomize(self, truth: Any, draw: Draw) -> Report:
        truth = self.check_truth(truth)
        keep, flip = thresholds(self.p, self.q)
        return [int(draw() < (keep if j == truth else flip)) for j in range(len(self.options))]


    def tally(self, report: Report) -> Iterable[tuple[int, int]]:
        return [(j, 1) for j, bit in enumerate(report) if bit] + [(len(self.options), 1)]


    def simulate(self, truths: Any, rng: Any) -> list[Report]:
        """Bit j of each report is [U < P] on the true option, [U < Q] elsewhere, U uniform in
        [0, 2^53): the device's distribution exactly."""
        import numpy as np

        keep, flip = thresholds(self.p, self.q)
        truths = np.asarray(truths)
        limits = np.where(np.arange(len(self.options)) == truths[:, None], keep, flip)
        return (rng.integers(0, N, size=limits.shape) < limits).astype(np.int8).tolist()

    def best_guess(self) -> float:
        """Guess the option whose bit is set (at random among set bits, or among all when none
        is): right with probability sum_{m=0}^{k-1} C(k-1, m) q^m (1-q)^(k-1-m) [p/(m+1)] +
        (1 - p)(1 - q)^(k-1)/k, by the number m of other bits set."""
        return support.best_guess(len(self.options), self.p_star, self.q_star)

    def note(self) -> tuple[str, str]:
        return (f"The server receives one yes/no mark per option: your own option is marked "
                f"with {percent(self.p)} probability and each other option with "
                f"{percent(self.q)}.", "you would give a particular answer")

    def design(self) -> dict[str, Any]:
        return {**self.fields(), "epsilon": self.epsilon, "options": list(self.options),
                "report": "one bit per option: 1 with probability p for the respondent's "
                          "option, q for every other",
                "cells": BIT_CELLS}


def scheme_for(kind: str, options: tuple[str, ...], fields: Fields) -> UnaryEncoding:
    """OUE from p and q (a manifest) or from epsilon (a definition)."""
    if fields.has("p") or fields.has("q"):
        try:
            return UnaryEncoding(options, fields.number("p", 0.0, 1.0),
                                 fields.number("q", 0.0, 1.0))
        except ValueError as exc:
            raise FieldError("q", str(exc)) from None
    return UnaryEncoding.from_epsilon(options, fields.epsilon())


DECLARATIONS = (Declaration(
    NAME, ("choice",), "optimized unary encoding (OUE)", (
        EPSILON,
        Param("p", "number", "OUE: P(the respondent's option's bit is 1)", 0.0, 1.0),
        Param("q", "number", "OUE: P(another option's bit is 1)", 0.0, 1.0)),
    scheme_for),)
