"""Openly answered questions (`disclosed = true` on a yes/no, choice or numeric question): the
device sends the answer as given, with no randomization, so it is counted in no epsilon and
respondents are told so in plain words ("answered openly: stored as you give it"). They are
the covariates of regressions and the margins of survey weights (ldpsurvey.analysis). The
JavaScript twin is web/disclosed.js.

A report is the true answer itself: an option index, or for a numeric question a whole number
in [min, max] (refused outside; never clamped, since a changed open answer would be a wrong one).
Counters are integers: per option its count (the share c_j / n, its standard error
sqrt(p (1 - p) / n) and the chosen binomial interval: ordinary survey sampling, no design to
invert); for a number, n, sum (x - min) and sum (x - min)^2, whose mean and standard error
s / sqrt(n) (s the sample standard deviation) are exact in integers (min, max whole, at most
MAX_RANGE apart, so no counter overflows a 64-bit integer).

What an open answer reveals is in docs/privacy.md (threat model): everything about itself, to
whoever reads the stored response, next to the randomized answers of the same response.
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ldpsurvey.shared.mechanisms.forced_response import NO, YES
from ldpsurvey.shared.mechanisms.numeric import RANGE, distribution, read_unit
from ldpsurvey.shared.mechanisms.protocol import (
    Declaration,
    FieldError,
    Fields,
    OneOption,
    Param,
    Report,
    Settings,
    empty_entry,
    is_index,
)
from ldpsurvey.shared.mechanisms.randomizer import Draw
from ldpsurvey.shared.stats.intervals import METHODS, simultaneous_confidence, z_value

NAME = "disclosed"  # the scheme's name; the manifest writes `disclosed: true` instead
TYPES = ("yes_no", "choice", "numeric")
MAX_RANGE = 10**6  # max - min of an open number: n (max - min)^2 stays below 2^63 for n < 9e6
# The largest |min| and |max| of an open number: every whole number up to it is exact in an
# IEEE double, so the browser (a JavaScript number) and Python read and send the same answer.
MAX_MAGNITUDE = 2**53 - 1
# In a survey with open questions, the fewest respondents a regression group or a weighting
# margin's level may hold (the aggregator's MIN_CELL setting, this by default).
DEFAULT_MIN_CELL = 10
WORDS = "Answered openly: stored as you give it."  # the respondent-facing mark (form, respond)


class Open:
    """What both open schemes share: no randomness, no epsilon, the answer as the report."""

    name = NAME
    epsilon = realized_epsilon = nominal_epsilon = 0.0  # charged: none (nothing is randomized)

    def expected_margin(self, n: int, confidence: float = 0.95) -> float:
        """z (1/2) / sqrt(n): a share's widest binomial half-width, and a number's as a share
        of its range (the widest standard deviation is half the range)."""
        return z_value(confidence) * 0.5 / math.sqrt(n)

    def randomize(self, truth: Any, draw: Draw) -> Report:
        """The answer itself (checked); no draw is taken."""
        return self.check_truth(truth)

    def check_report(self, value: Any) -> str | None:
        try:
            self.check_truth(value)
        except ValueError as error:
            return str(error)
        return None

    def shown_report(self, report: Report) -> str:
        return f"{self.shown(report)} (as given)"

    plain_report = shown_report  # the answer as given

    def simulate(self, truths: Any, rng: Any) -> list[Report]:
        """The answers as they are (what the device sends)."""
        return [self.check_truth(t.item() if hasattr(t, "item") else t) for t in truths]

    def best_guess(self) -> float:
        """The report is the answer: a guess from it is always right."""
        return 1.0

    def columns(self, qid: str) -> list[str]:
        return [qid]

    def note(self) -> tuple[str, str]:
        return (f"{WORDS} It is not changed at random, so it does not use up any of your "
                "privacy budget, and anyone who sees your answers sees this one as it is.",
                "")


@dataclass(frozen=True)
class OpenOption(Open, OneOption):
    """An open yes/no or choice question: the option index as given; per option its count."""

    type: str
    options: tuple[str, ...]

    @property
    def counters(self) -> int:
        return len(self.options)

    def fields(self) -> dict[str, Any]:
        return {"disclosed": True}

    def check_truth(self, truth: Any) -> int:
        if not is_index(truth, len(self.options)):
            raise ValueError(f"must be an option index from 0 to {len(self.options) - 1}")
        return truth

    def parse_text(self, text: str) -> int:
        value = text.strip().lower()
        if self.type == "yes_no" and value in YES | NO:
            return int(value in YES)
        return super().parse_text(text)

    def largest_report(self) -> Report:
        return len(self.options) - 1

    def tally(self, report: Report) -> Iterable[tuple[int, int]]:
        return ((report, 1),)

    def summary(self, counts: Sequence[int], settings: Settings) -> dict[str, Any]:
        """Per option the sample share c_j / n (no design to invert: p_hat, p_hat_clipped and
        p_mle are all the share), its standard error sqrt(p (1 - p) / n) and the chosen
        binomial interval (intervals.METHODS; simultaneous: at simultaneous_confidence)."""
        n = sum(counts)
        level = (simultaneous_confidence(settings.confidence, len(self.options))
                 if settings.simultaneous else settings.confidence)
        entries = []
        for j, (option, count) in enumerate(zip(self.options, counts, strict=True)):
            entry = empty_entry(0.0, settings)
            if n:
                share = count / n
                low, high = METHODS[settings.method](count, n, level)
                entry.update(n=n, reported_count=count, reported_rate=share, p_hat=share,
                             p_hat_clipped=share, p_mle=share,
                             standard_error=math.sqrt(share * (1 - share) / n),
                             ci_low=max(0.0, low), ci_high=min(1.0, high), fit_p_value=1.0,
                             design_consistent=True)
            entries.append({"index": j, "option": option, **entry})
        shares = [c / n for c in counts] if n else []
        covariance = ([[((i == j) * p - p * q) / n for j, q in enumerate(shares)]
                       for i, p in enumerate(shares)] if n else None)  # multinomial
        return {"disclosed": True, "epsilon": 0.0, "n": n, "covariance": covariance,
                "options": entries}

    def design(self) -> dict[str, Any]:
        return {"disclosed": True, "options": list(self.options),
                "report": "the answer as given, not randomized",
                "cells": "the option given: its label (codes: its code)"}

    def cells(self, report: Report, codes: bool) -> list[str]:
        return [str(report) if codes else self.options[report]]


@dataclass(frozen=True)
class OpenNumber(Open):
    """An open numeric question: a whole number in [min, max] as given; its counters n,
    sum (x - min) and sum (x - min)^2."""

    low: int
    high: int
    unit: str | None = None
    type: str = "numeric"
    options: tuple[str, ...] = ()
    quantity: str = "mean"
    counters: int = 3

    def fields(self) -> dict[str, Any]:
        unit = {} if self.unit is None else {"unit": self.unit}
        return {"disclosed": True, "min": self.low, "max": self.high, **unit}

    def check_truth(self, truth: Any) -> int:
        whole = isinstance(truth, int | float) and not isinstance(truth, bool) and (
            math.isfinite(truth) and truth == int(truth))
        if not whole or not self.low <= truth <= self.high:
            raise ValueError(f"must be a whole number from {self.low} to {self.high}")
        return int(truth)

    def check_report(self, value: Any) -> str | None:
        """A report is an integer as JSON writes it (7, never 7.0: the stored row would be
        longer than the survey's padded row and the counters take integers)."""
        if type(value) is not int:
            return f"must be a whole number from {self.low} to {self.high}"
        return super().check_report(value)

    def parse_text(self, text: str) -> int:
        """A typed answer, read exactly (as a fraction: "42", "42.0" and "4.2e1" are 42, and
        no rounding makes "41.5" or a number beyond the range whole or in range)."""
        try:
            value = Fraction(text.strip())  # "/" is no way to write a number here
            if value.denominator != 1 or "/" in text:
                raise ValueError("not whole")
            return self.check_truth(int(value))
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"takes a whole number from {self.low} to {self.high}") from None

    def largest_report(self) -> Report:
        return max(self.low, self.high, key=lambda v: len(str(v)))

    def tally(self, report: Report) -> Iterable[tuple[int, int]]:
        x = report - self.low
        return ((0, 1), (1, x), (2, x * x))

    def summary(self, counts: Sequence[int], settings: Settings) -> dict[str, Any]:
        """The mean min + S1 / n, its standard error s / sqrt(n) with the sample variance
        s^2 = (n S2 - S1^2) / (n (n - 1)) (the numerator exact in integers), and the normal
        (central limit) interval mean -+ z s / sqrt(n) within [min, max]; needs n >= 2."""
        n, s1, s2 = counts
        document = {**self.fields(), "epsilon": 0.0, "n": n,
                    "scale": {"min": self.low, "max": self.high, "unit": self.unit}}
        entry = empty_entry(0.0, settings)
        covariance = None
        if n >= 2:
            mean = self.low + s1 / n
            variance = (s2 * n - s1 * s1) / (n * (n - 1))  # exact numerator in integers
            se = math.sqrt(max(variance, 0.0) / n)
            half = z_value(settings.confidence) * se
            entry.update(n=n, reported_count=n, reported_rate=mean, p_hat=mean,
                         p_hat_clipped=mean, p_mle=mean, standard_error=se,
                         ci_low=max(self.low, mean - half), ci_high=min(self.high, mean + half),
                         fit_p_value=1.0, design_consistent=True)
            covariance = [[se * se]]
        return {**document, "covariance": covariance,
                "options": [{"index": 0, "option": "mean", **entry}]}

    def truth_of(self, value: Any) -> dict[str, list[float]]:
        """A scenario's distribution, as numeric.StochasticRounding.truth_of, of whole values."""
        truth = distribution(value)
        for v in truth["values"]:
            self.check_truth(v)
        return truth

    def true_values(self, truth: dict[str, list[float]]) -> list[float]:
        return [math.fsum(w * v for v, w in zip(truth["values"], truth["weights"], strict=True))]

    def draw_answers(self, truth: dict[str, list[float]], n: int, rng: Any) -> Any:
        return rng.choice(truth["values"], size=n, p=truth["weights"]).astype(int)

    def asked(self) -> str:
        return f"a whole number from {self.low} to {self.high}" + (
            f" ({self.unit})" if self.unit else "")

    def design(self) -> dict[str, Any]:
        return {**self.fields(), "report": "the number as given, not randomized",
                "cells": "the number as given"}

    def cells(self, report: Report, codes: bool) -> list[str]:
        return [str(report)]

    def shown(self, truth: Any) -> str:
        return f"{truth}" + (f" {self.unit}" if self.unit else "")


def scheme_for(kind: str, options: tuple[str, ...], fields: Fields) -> OpenOption | OpenNumber:
    """The open scheme of a yes/no, choice or numeric question (min, max whole for a number,
    within MAX_MAGNITUDE and at most MAX_RANGE apart; an optional unit). FieldError names a wrong field."""
    if kind != "numeric":
        return OpenOption(kind, options)
    low, high = (fields.data.get(key) for key in ("min", "max"))
    for key, value in (("min", low), ("max", high)):
        if type(value) is not int:
            raise FieldError(key, f"an openly answered number needs a whole {key}, got {value!r}")
    for key, value in (("min", low), ("max", high)):
        if abs(value) > MAX_MAGNITUDE:
            raise FieldError(key, f"must be within -{MAX_MAGNITUDE:,} to {MAX_MAGNITUDE:,} (2^53 "
                             f"- 1: what a browser's number holds exactly), got {value!r}")
    if not 0 < high - low <= MAX_RANGE:
        raise FieldError("max", f"must be above min and at most {MAX_RANGE:,} above it, got "
                         f"{high!r}")
    return OpenNumber(low, high, read_unit(fields))


OPENLY = Param("disclosed", "flag", "true: answered openly, sent and stored as given (no "
               "randomization, counted in no epsilon; manifest format /7)")
DECLARATIONS = (
    Declaration(NAME, ("yes_no", "choice"), WORDS, (OPENLY,), scheme_for, key=NAME, since=7),
    Declaration(NAME, ("numeric",), WORDS, (OPENLY, *RANGE[1:]), scheme_for, key=NAME,
                since=7))
