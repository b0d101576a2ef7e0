"""Forced response (k-RR) as a scheme: yes/no and choice questions, the option index reported
with probability alpha, else an option drawn from beta (mechanism.py holds the math, randomizer.py
the exact integer randomizer; its JavaScript twin is web/randomizer.js).

A concept question's reports go through a second, instantaneous layer (irr_alpha, uniform beta):
its estimates invert both layers composed (`reported`), while its epsilon is the permanent
layer's (every report is post-processing of the one permanent answer).
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ldpsurvey.shared.mechanisms.protocol import (
    OneOption,
    RandomizerEpsilon,
    Report,
    Settings,
    empty_entry,
    is_index,
    option_from_text,
    percent,
)
from ldpsurvey.shared.mechanisms.randomizer import Draw, Thresholds, randomize, thresholds
from ldpsurvey.shared.stats.design import Mechanism, uniform_beta
from ldpsurvey.shared.stats.estimate import covariance, estimate
from ldpsurvey.shared.stats.planning import expected_margin
from ldpsurvey.shared.stats.posterior import best_guess_accuracy

NAME = "forced_response"
YES = {"yes", "y", "1", "true"}
NO = {"no", "n", "0", "false"}


def yes_no(value: str, options: tuple[str, ...]) -> int:
    """A typed yes/no answer (lower case): yes, no and their short forms, or either option's
    text (a translated "oui", "sí"); ValueError otherwise."""
    if value in YES | NO:
        return int(value in YES)
    shown = [option.lower() for option in options]
    if value in shown:
        return shown.index(value)
    raise ValueError("takes yes or no")


@dataclass(frozen=True)
class ForcedResponse(OneOption, RandomizerEpsilon):
    """The scheme of a yes/no or choice question randomized by forced response. Its epsilon
    (RandomizerEpsilon) is the nominal formula's, or up to about 1e-7 above it when an option's
    beta is tiny."""

    type: str  # "yes_no" or "choice"
    options: tuple[str, ...]
    mechanism: Mechanism  # the (permanent) layer the device runs on the true answer
    irr_alpha: float | None = None  # a concept question's instantaneous layer
    name: str = NAME

    @property
    def counters(self) -> int:
        return len(self.options)

    @property
    def thresholds(self) -> Thresholds:
        return thresholds(self.mechanism.alpha, self.mechanism.beta)

    @property
    def instantaneous(self) -> Mechanism | None:
        """A concept question's second layer: irr_alpha with uniform beta (None otherwise)."""
        if self.irr_alpha is None:
            return None
        return Mechanism(self.irr_alpha, uniform_beta(len(self.options)))

    @property
    def reported(self) -> Mechanism:
        """What one report is, given the true answer: the mechanism, or both layers composed."""
        layer = self.instantaneous
        return self.mechanism if layer is None else self.mechanism.then(layer)

    def fields(self) -> dict[str, Any]:
        return {"alpha": self.mechanism.alpha, "beta": list(self.mechanism.beta)}

    def randomize(self, truth: Any, draw: Draw) -> Report:
        return randomize(truth, self.thresholds, draw)

    def parse_text(self, text: str) -> int:
        """yes/no for yes/no questions (or their options as shown, in the respondent's
        language: respond --language); an option number (0-based) or an option's text."""
        value = text.strip().lower()
        if self.type == "yes_no":
            return yes_no(value, self.options)
        return option_from_text(text, self.options)

    def check_report(self, value: Any) -> str | None:
        if type(value) is not int:
            return f"must be an integer option index, got {type(value).__name__}"
        if not is_index(value, len(self.options)):
            return f"must be an option index from 0 to {len(self.options) - 1}"
        return None

    def largest_report(self) -> Report:
        return len(self.options) - 1

    def tally(self, report: Report) -> Iterable[tuple[int, int]]:
        return ((report, 1),)

    def summary(self, counts: Sequence[int], settings: Settings) -> dict[str, Any]:
        """alpha, beta, epsilon, n, the covariance of the unbiased estimates and per option the
        shared estimator's keys (estimate.estimate on the reported mechanism)."""
        n = sum(counts)
        m = self.reported
        if n:
            results = [r.as_dict() for r in estimate(
                m, counts, confidence=settings.confidence, method=settings.method,
                simultaneous=settings.simultaneous)]
            cov = [list(row) for row in covariance(m, counts)]
        else:
            results = [empty_entry(self.epsilon, settings)] * len(self.options)
            cov = None
        entries = [{"index": j, "option": text, **result}
                   for j, (text, result) in enumerate(zip(self.options, results, strict=True))]
        document = {"alpha": self.mechanism.alpha,
                    "beta": list(self.mechanism.beta), "epsilon": self.epsilon, "n": n,
                    "covariance": cov, "options": entries}
        if self.irr_alpha is not None:
            document["reported"] = {"alpha": m.alpha, "beta": list(m.beta)}
        return document

    def simulate(self, truths: Any, rng: Any) -> list[Report]:
        """simulation.randomize_many with the reported mechanism's thresholds."""
        from ldpsurvey.shared.sim import simulation

        m = self.reported
        return simulation.randomize_many(truths, thresholds(m.alpha, m.beta), rng).tolist()

    def best_guess(self) -> float:
        return best_guess_accuracy(self.reported.alpha, self.reported.beta)

    def expected_margin(self, n: int, confidence: float = 0.95) -> float:
        return expected_margin(self.reported, n, confidence)

    def design(self) -> dict[str, Any]:
        """alpha, beta, epsilon, the report matrix P[i][j] = P(report j | true i), and for
        yes/no R's rr package forced-known design: p = alpha, p1 = (1-alpha)*beta_yes,
        p0 = (1-alpha)*beta_no. For a concept question alpha and beta are those of the two
        layers composed (what one report is); epsilon is the permanent layer's."""
        m = self.reported
        parameters = {
            "alpha": m.alpha, "beta": list(m.beta),
            "epsilon": self.epsilon, "options": list(self.options),
            "report_matrix": [[m.probability(i, j) for j in range(m.k)] for i in range(m.k)],
            "report": "an option's code: the respondent's own with probability alpha, else "
                      "option j with probability beta[j]",
            "cells": "the reported option: its label (codes: its code)",
        }
        if self.type == "yes_no":
            parameters["rr_forced_known"] = {"p": m.alpha, "p1": (1 - m.alpha) * m.beta[1],
                                             "p0": (1 - m.alpha) * m.beta[0]}
        return parameters

    def columns(self, qid: str) -> list[str]:
        return [qid]

    def cells(self, report: Report, codes: bool) -> list[str]:
        return [str(report) if codes else self.options[report]]

    def shown_report(self, report: Report) -> str:
        return self.options[report]

    plain_report = shown_report  # an option is plain words already

    def note(self) -> tuple[str, str]:
        m = self.reported
        if self.type == "yes_no":
            return (f"If you answer Yes, the server receives Yes with "
                    f"{percent(m.probability(1, 1))} probability and No with "
                    f"{percent(m.probability(1, 0))}; if you answer No, it receives No with "
                    f"{percent(m.probability(0, 0))} and Yes with {percent(m.probability(0, 1))}.",
                    "you would say Yes")
        kept = [m.probability(j, j) for j in range(m.k)]
        low, high = percent(min(kept)), percent(max(kept))
        chance = low if low == high else f"{low} to {high} (depending on the answer)"
        return (f"The server receives your own answer with {chance} probability, and "
                "otherwise one of the other options.", "you would give a particular answer")
