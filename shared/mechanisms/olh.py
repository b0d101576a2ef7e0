"""Optimized local hashing (OLH; Wang, Blocki, Li and Jha, USENIX Security 2017, section 4.4) for
a choice question, with its JavaScript twin web/olh.js.

The device draws a seed s, hashes its true option v to h = H_s(v) in [0, g) and reports
(s, y), y the forced-response randomization (randomizer.py, alpha, uniform beta over g values)
of h. Specified exactly, so Python and the browser agree byte for byte:

    s    = U1 >> 21, the top 32 bits of the first 53-bit draw (uniform in [0, 2^32))
    H_s  = xxh32(ASCII decimal digits of v, seed s) mod g  (XXH32, Collet; the hash pure-LDP
           and Wang et al.'s reference code use, so reports are interchangeable with theirs)
    y    = randomizer.randomize(h, thresholds(alpha, uniform_beta(g))) on draws U2, U3

Three draws always. g = round(e^eps) + 1 (Wang et al., eq. (14): g = e^eps + 1, an integer).

Exact epsilon: the seed is drawn independently of v, so P((s, y) | v) = 2^-32 P(y | H_s(v)), and
the ratio for v, v' is that of the g-option forced response between H_s(v) and H_s(v'): 1 when
they collide, else at most its exact integer epsilon (randomizer.realized_epsilon), attained
for a seed that separates them. The hash's quality matters only to the estimates, which assume
(as pure-LDP and the paper do) that two options collide with probability 1/g over the seed.

Estimates: a report supports option j when H_s(j) = y; support.py with p* = alpha + (1 - alpha)/g
and q* = 1/g (Wang et al., section 4.4), so with alpha from eps p* = e^eps / (e^eps + g - 1).
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ldpsurvey.shared.mechanisms import support
from ldpsurvey.shared.mechanisms.protocol import (
    EPSILON,
    Declaration,
    FieldError,
    Fields,
    OneOption,
    Param,
    RandomizerEpsilon,
    Report,
    is_index,
    percent,
)
from ldpsurvey.shared.mechanisms.randomizer import Draw, Thresholds, randomize, thresholds
from ldpsurvey.shared.stats.design import Mechanism, alpha_for_epsilon, uniform_beta

NAME = "olh"
SEEDS = 2**32
SEED_SHIFT = 21  # 53 - 32
MAX_G = 2**20  # far beyond any epsilon a survey allows (g = e^eps + 1)
PRIME32 = (0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1)
MASK = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & MASK


def xxh32(data: bytes, seed: int) -> int:
    """XXH32 of fewer than 16 bytes (Collet, xxHash specification, "XXH32 algorithm
    description", steps 1b, 4, 5 and 6): acc = seed + PRIME5 + len, each 4-byte little-endian
    lane then each byte mixed in, then the avalanche."""
    if len(data) >= 16:
        raise ValueError("this xxh32 hashes option numbers (fewer than 16 bytes)")
    p1, p2, p3, p4, p5 = PRIME32
    acc = (seed + p5 + len(data)) & MASK
    whole = len(data) - len(data) % 4
    for i in range(0, whole, 4):
        acc = (_rotl((acc + int.from_bytes(data[i:i + 4], "little") * p3) & MASK, 17) * p4) & MASK
    for byte in data[whole:]:
        acc = (_rotl((acc + byte * p5) & MASK, 11) * p1) & MASK
    acc ^= acc >> 15
    acc = (acc * p2) & MASK
    acc ^= acc >> 13
    acc = (acc * p3) & MASK
    return acc ^ (acc >> 16)


def hashed(option: int, seed: int, g: int) -> int:
    """H_s(option) = xxh32(decimal digits of option, seed) mod g."""
    return xxh32(str(option).encode("ascii"), seed) % g


def g_for_epsilon(eps: float) -> int:
    """g = round(e^eps) + 1, at least 2 (Wang et al. 2017, eq. (14); pure-LDP's choice)."""
    return max(2, min(MAX_G, round(math.exp(eps)) + 1))


@dataclass(frozen=True)
class LocalHashing(OneOption, RandomizerEpsilon, support.OneOfK):
    options: tuple[str, ...]
    g: int
    alpha: float  # the forced response over the g hash values: keep h with probability alpha
    name: str = NAME

    def __post_init__(self) -> None:
        if type(self.g) is not int or not 2 <= self.g <= MAX_G:
            raise ValueError(f"g must be a whole number from 2 to {MAX_G}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError("alpha must be in (0, 1)")
        self.thresholds  # noqa: B018 -- refuses parameters with no privacy

    @classmethod
    def from_epsilon(cls, options: tuple[str, ...], eps: float) -> "LocalHashing":
        g = g_for_epsilon(eps)
        return cls(options, g, alpha_for_epsilon(eps, uniform_beta(g)))

    @property
    def thresholds(self) -> Thresholds:
        return thresholds(self.alpha, uniform_beta(self.g))

    @property
    def counters(self) -> int:
        """One per option (reports supporting it), then n."""
        return len(self.options) + 1

    @property
    def mechanism(self) -> Mechanism:
        """The forced response over the g hash values."""
        return Mechanism(self.alpha, uniform_beta(self.g))

    @property
    def p_star(self) -> float:
        return self.alpha + (1.0 - self.alpha) / self.g

    @property
    def q_star(self) -> float:
        return 1.0 / self.g

    def fields(self) -> dict[str, Any]:
        return {"mechanism": self.name, "g": self.g, "alpha": self.alpha}

    def randomize(self, truth: Any, draw: Draw) -> Report:
        seed = draw() >> SEED_SHIFT
        return [seed, randomize(hashed(self.check_truth(truth), seed, self.g), self.thresholds,
                                draw)]


    def check_report(self, value: Any) -> str | None:
        if (type(value) is not list or len(value) != 2 or not is_index(value[0], SEEDS)
                or not is_index(value[1], self.g)):
            return (f"must be [seed, value]: a seed from 0 to {SEEDS - 1} and a hash value "
                    f"from 0 to {self.g - 1}")
        return None

    def largest_report(self) -> Report:
        return [SEEDS - 1, self.g - 1]

    def tally(self, report: Report) -> Iterable[tuple[int, int]]:
        seed, value = report
        return [(j, 1) for j in range(len(self.options)) if hashed(j, seed, self.g) == value] + [
            (len(self.options), 1)]


    def simulate(self, truths: Any, rng: Any) -> list[Report]:
        """Seeds uniform in [0, 2^32), the true options hashed with them
        (simulation.hashed_many), then simulation.randomize_many over the g values: the
        device's distribution."""
        from ldpsurvey.shared.sim import simulation

        seeds = rng.integers(0, SEEDS, size=len(truths))
        values = simulation.randomize_many(simulation.hashed_many(truths, seeds, self.g),
                                           self.thresholds, rng)
        return [[int(s), int(v)] for s, v in zip(seeds, values, strict=True)]

    def best_guess(self) -> float:
        """Guess among the options the report supports (all when none does): with the hash as
        a random function, the true option is supported with probability p*, each other with
        1/g independently, so as for OUE with p = p*, q = 1/g."""
        return support.best_guess(len(self.options), self.p_star, self.q_star)

    def design(self) -> dict[str, Any]:
        return {**self.fields(), "epsilon": self.epsilon, "options": list(self.options),
                "p_star": self.p_star, "q_star": self.q_star,
                "hash": "xxh32(decimal digits of the option's code, seed) mod g",
                "report": "[seed, value]: value is the hash of the respondent's option, kept "
                          "with probability alpha, else uniform over the g values",
                "cells": "QID_seed the seed and QID_value the reported hash value (0 to g - 1), "
                         "both whole numbers, in every export"}

    def columns(self, qid: str) -> list[str]:
        return [f"{qid}_seed", f"{qid}_value"]

    def cells(self, report: Report, codes: bool) -> list[str]:
        return [str(report[0]), str(report[1])]

    def shown_report(self, report: Report) -> str:
        return f"seed {report[0]}, hash value {report[1]}"

    def plain_report(self, report: Report) -> str:
        return "a code that fits several answers"

    def note(self) -> tuple[str, str]:
        return (f"The server receives a random seed and a number from 0 to {self.g - 1}: your "
                f"answer hashed with that seed, kept with {percent(self.p_star)} probability, "
                f"so many options fit each report.", "you would give a particular answer")


def scheme_for(kind: str, options: tuple[str, ...], fields: Fields) -> LocalHashing:
    """OLH from g and alpha (a manifest) or from epsilon (a definition)."""
    if fields.has("g") or fields.has("alpha"):
        try:
            return LocalHashing(options, fields.count("g", 2, MAX_G),
                                fields.number("alpha", 0.0, 1.0))
        except ValueError as exc:
            raise FieldError("alpha", str(exc)) from None
    return LocalHashing.from_epsilon(options, fields.epsilon())


DECLARATIONS = (Declaration(
    NAME, ("choice",), "optimized local hashing (OLH)", (
        EPSILON,
        Param("g", "integer", "OLH: the number of hash values", 2, MAX_G),
        Param("alpha", "number", "OLH: P(the true hash value is reported)", 0.0, 1.0)),
    scheme_for),)
