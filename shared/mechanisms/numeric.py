"""Number questions (type = "numeric", with min, max and an optional unit): the mean with its
SE and interval, by Duchi, Jordan and Wainwright's one-dimensional mechanism ("Minimax optimal
procedures for locally private estimation", JASA 2018, section 4.2.3), with the JavaScript twin
web/numeric.js.

Duchi's mechanism reports +-C for x in [-1, 1] with P(+C) = 1/2 + x (e^eps - 1) / (2 (e^eps + 1));
it is stochastic rounding of x to the ends of the range followed by randomized response on the
resulting bit, so it runs on the exact yes/no randomizer (randomizer.py) and never samples a
float (Mironov, CCS 2012, shows floating-point samplers leak). Specified exactly, so Python and
the browser agree bit for bit:

    x  = the answer clamped to [min, max] on the device
    r  = (x - min) / (max - min)          (IEEE double: one subtraction, one division)
    R  = floor(r 2^53)                    (exact: a power-of-two scale)
    b  = [U1 < R]                         (rounds up with probability R / 2^53, within 2^-53 of r)
    y  = randomizer.randomize(b, thresholds(alpha, (1/2, 1/2)))   on U2, U3

Three draws always; the report y is one bit.

Exact epsilon of this discretized mechanism: P(y | x) = (R/N) P(y | 1) + (1 - R/N) P(y | 0) is a
mixture of the yes/no mechanism's two rows with a weight in [0, 1], so for any x, x' the ratio
lies between P(y | 0)/P(y | 1) and P(y | 1)/P(y | 0), and reaches them at x = max (R = N) against
x = min (R = 0): epsilon is exactly the yes/no randomizer's realized epsilon
(randomizer.realized_epsilon), whatever the grid of R. From a target epsilon alpha =
tanh(eps / 2) (mechanism.alpha_for_epsilon, beta 1/2).

Estimate: E[y] = alpha E[R/N] + (1 - alpha)/2 with E[R/N] within 2^-53 of E[r], so the shared
yes/no estimator (estimate.estimate on the counts of 0 and 1 under Mechanism(alpha, (1/2, 1/2)))
estimates the mean of r: unbiased (to 2^-53 of the range), its standard error
sqrt(lam (1 - lam) / n) / alpha (Duchi et al.'s variance (C^2 - E x^2)/n in these units), the
exact binomial interval mapped through the same line, the constrained point in [0, 1]. Each is
mapped to the answer's units by v = min + (max - min) s.

Mechanisms (`mechanism`): "duchi" (this module; the default), "piecewise" and "hybrid" (Wang et
al., ICDE 2019, on an exact grid: piecewise.py), and "auto", which builds all three from the
question's epsilon and takes the lowest worst-case variance of the mean (piecewise
.worst_variance): Duchi's below eps* ~ 0.61, the hybrid above. A question that asks for its
distribution (`distribution = true`, with `bins`, default 16) gets "square_wave" (Li et al.,
SIGMOD 2020: square_wave.py), under `auto` too: the histogram, median and quartiles as well as
the mean.
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ldpsurvey.shared.mechanisms.protocol import (
    FieldError,
    Fields,
    RandomizerEpsilon,
    Report,
    Settings,
    empty_entry,
    percent,
)
from ldpsurvey.shared.mechanisms.randomizer import Draw, N, Thresholds, randomize, thresholds
from ldpsurvey.shared.stats.design import Mechanism, alpha_for_epsilon
from ldpsurvey.shared.stats.estimate import estimate
from ldpsurvey.shared.stats.planning import expected_margin
from ldpsurvey.shared.stats.posterior import best_guess_accuracy

TYPE = "numeric"
MECHANISMS = ("duchi", "piecewise", "hybrid", "square_wave", "auto")
RANGE = {"epsilon", "min", "max", "unit"}
DISTRIBUTION = {"distribution", "bins"}  # asking for the distribution (square_wave.py)
FIELDS = {"duchi": RANGE | {"alpha"}, "piecewise": RANGE | {"grid", "window", "alpha"},
          "hybrid": RANGE | {"grid", "window", "alpha", "duchi_alpha", "piecewise_share"},
          "square_wave": RANGE | DISTRIBUTION | {"grid", "window", "alpha"},
          "auto": RANGE | DISTRIBUTION}
# What `auto` compares, in words (manifest.Auto).
# Left open: manifest.Auto.words closes it after the variances compared.
AUTO_MEASURE = ("worst-case variance of the mean (n Var over the range squared; the hybrid is "
                "Duchi's mechanism alone below epsilon 0.61")
MAX_UNIT = 40
HALF = (0.5, 0.5)


class NumberAnswer:
    """What every mechanism of a number question shares (this module's and piecewise.py's):
    the answer read, clamped and shown, its position r = (x - min)/(max - min) on the device,
    a mock scenario's truth, and the mean's document in the answer's units."""

    low: float
    high: float
    unit: str | None
    options: tuple[str, ...] = ()
    quantity: str = "mean"

    def check_range(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high
                and math.isfinite(self.high - self.low)):
            raise ValueError("needs finite min < max")

    def check_truth(self, truth: Any) -> float:
        """A finite number, clamped to [min, max] (the device never reports outside)."""
        if isinstance(truth, bool) or not isinstance(truth, int | float) or not math.isfinite(
                truth):
            raise ValueError("the answer must be a number")
        return min(self.high, max(self.low, float(truth)))

    def parse_text(self, text: str) -> float:
        """A typed answer in [min, max]: one outside is refused, never clamped, so the
        respondent knows the answer given is the one randomized (check_truth clamps for
        callers of the library and simulations)."""
        expected = f"takes a number from {self.low:g} to {self.high:g}"
        try:
            value = float(text.strip())
        except ValueError:
            raise ValueError(expected) from None
        if not math.isfinite(value):
            raise ValueError(expected)
        if not self.low <= value <= self.high:
            raise ValueError(f"{expected}; {text.strip()} is outside")
        return self.check_truth(value)

    def rounding_threshold(self, truth: float) -> int:
        """R = floor(r 2^53), r = (x - min) / (max - min) in double arithmetic."""
        return math.floor((truth - self.low) / (self.high - self.low) * N)

    def thresholds_many(self, truths: Any) -> Any:
        """R for an array of answers, clamped, as the device computes it (simulation)."""
        import numpy as np

        x = np.clip(np.asarray(truths, dtype=np.float64), self.low, self.high)
        return np.floor((x - self.low) / (self.high - self.low) * N).astype(np.int64)

    def to_units(self, share: float | None) -> float | None:
        return None if share is None else self.low + (self.high - self.low) * share

    def unit_fields(self) -> dict[str, Any]:
        return {} if self.unit is None else {"unit": self.unit}

    def document(self, n: int, entry: dict[str, Any] | None,
                 settings: Settings) -> dict[str, Any]:
        """The mean's estimates document ("option": "mean") from an entry in shares of the
        range (estimate.Estimate's keys), mapped to the answer's units: points and interval
        ends by min + (max - min) s (all but the unbiased p_hat kept in [min, max]), the SE
        scaled by max - min; the covariance is the mean's
        variance (1 x 1). No entry: nothing released yet."""
        document = {**self.fields(), "epsilon": self.epsilon, "n": n,  # type: ignore[attr-defined]
                    "scale": {"min": self.low, "max": self.high, "unit": self.unit}}
        if entry is None:
            entry = empty_entry(self.epsilon, settings)  # type: ignore[attr-defined]
            return {**document, "covariance": None,
                    "options": [{"index": 0, "option": "mean", **entry}]}
        entry = dict(entry)
        entry["p_hat"] = self.to_units(entry["p_hat"])
        for key in ("p_hat_clipped", "p_mle", "ci_low", "ci_high"):  # rounding can pass an end
            entry[key] = min(self.high, max(self.low, self.to_units(entry[key])))
        entry["standard_error"] *= self.high - self.low
        entry["epsilon"] = self.epsilon  # type: ignore[attr-defined]
        return {**document, "covariance": [[entry["standard_error"] ** 2]],
                "options": [{"index": 0, "option": "mean", **entry}]}

    def truth_of(self, value: Any) -> dict[str, list[float]]:
        return distribution(value)

    def true_values(self, truth: dict[str, list[float]]) -> list[float]:
        """The mean the device's answers have: of the values clamped to [min, max]."""
        return [math.fsum(w * self.check_truth(v)
                          for v, w in zip(truth["values"], truth["weights"], strict=True))]

    def draw_answers(self, truth: dict[str, list[float]], n: int, rng: Any) -> Any:
        return rng.choice(truth["values"], size=n, p=truth["weights"])

    def asked(self) -> str:
        return f"a number from {self.low:g} to {self.high:g}" + (
            f" ({self.unit})" if self.unit else "")

    def columns(self, qid: str) -> list[str]:
        return [qid]

    def shown(self, truth: Any) -> str:
        return f"{truth:g}" + (f" {self.unit}" if self.unit else "")


@dataclass(frozen=True)
class StochasticRounding(NumberAnswer, RandomizerEpsilon):
    low: float  # the question's min
    high: float  # the question's max
    alpha: float  # the yes/no randomizer's P(keep the rounded bit)
    unit: str | None = None
    name: str = "duchi"
    options: tuple[str, ...] = ()
    quantity: str = "mean"

    def __post_init__(self) -> None:
        self.check_range()
        self.thresholds  # noqa: B018 -- refuses parameters with no privacy

    @property
    def mechanism(self) -> Mechanism:
        return Mechanism(self.alpha, HALF)

    @property
    def thresholds(self) -> Thresholds:
        return thresholds(self.alpha, HALF)

    @property
    def counters(self) -> int:
        """Reports of 0 and of 1."""
        return 2

    def fields(self) -> dict[str, Any]:
        return {"mechanism": self.name, "min": self.low, "max": self.high, "alpha": self.alpha,
                **self.unit_fields()}

    def randomize(self, truth: Any, draw: Draw) -> Report:
        up = int(draw() < self.rounding_threshold(self.check_truth(truth)))
        return randomize(up, self.thresholds, draw)

    def check_report(self, value: Any) -> str | None:
        if type(value) is not int or value not in (0, 1):
            return "must be a bit (0 or 1)"
        return None

    def largest_report(self) -> Report:
        return 1

    def tally(self, report: Report) -> Iterable[tuple[int, int]]:
        return ((report, 1),)

    def summary(self, counts: Sequence[int], settings: Settings) -> dict[str, Any]:
        """The mean: estimate.estimate's keys for the share r on the counts of 0 and 1
        (NumberAnswer.document maps them to the answer's units)."""
        n = sum(counts)
        entry = None if n == 0 else estimate(self.mechanism, counts, confidence=settings.confidence,
                                             method=settings.method)[1].as_dict()
        return self.document(n, entry, settings)

    def simulate(self, truths: Any, rng: Any) -> list[Report]:
        """Clamp, R = floor(r 2^53) as the device computes it, b = [U < R] with U uniform in
        [0, 2^53), then simulation.randomize_many: the device's distribution."""
        import numpy as np

        from ldpsurvey.shared.sim import simulation

        limits = self.thresholds_many(truths)
        bits = (rng.integers(0, N, size=len(limits), dtype=np.int64) < limits).astype(np.int8)
        return simulation.randomize_many(bits, self.thresholds, rng).tolist()

    def best_guess(self) -> float:
        """Whether the answer is at the top or the bottom of the range, both equally likely:
        the yes/no randomizer's best_guess_accuracy (a value inside says less)."""
        return best_guess_accuracy(self.alpha, HALF)

    def expected_margin(self, n: int, confidence: float = 0.95) -> float:
        """As a share of the range (max - min): the yes/no design's worst case."""
        return expected_margin(self.mechanism, n, confidence)

    def design(self) -> dict[str, Any]:
        return {**self.fields(), "epsilon": self.epsilon,
                "report": "one bit: the answer rounded at random to max (1) or min (0), with "
                          "P(1) = (x - min)/(max - min), then kept with probability alpha, else "
                          "1 or 0 with probability 1/2",
                "cells": "the report's unbiased value min + (max - min)(y - (1 - alpha)/2) / "
                         "alpha, in the answer's units and often outside [min, max]: their mean "
                         "is the unbiased mean (codes: the bit y)"}

    def cells(self, report: Report, codes: bool) -> list[str]:
        """The bit with `codes`; else its unbiased value in the answer's units (design)."""
        if codes:
            return [str(report)]
        return [repr(self.to_units((report - (1 - self.alpha) / 2) / self.alpha))]

    def shown_report(self, report: Report) -> str:
        return f"a randomized bit {report} ({'toward max' if report else 'toward min'})"

    def plain_report(self, report: Report) -> str:
        """The end of the range the bit points to, in the answer's units."""
        return f"the {'high' if report else 'low'} end ({self.shown(self.high if report else self.low)})"

    def note(self) -> tuple[str, str]:
        keep = self.alpha + (1 - self.alpha) / 2
        return (f"The server receives one yes/no bit: your number is rounded at random to "
                f"{self.high:g} or {self.low:g} (to {self.high:g} the more often the higher it "
                f"is), and that is kept with {percent(keep)} probability, else flipped.",
                f"your number is {self.high:g} rather than {self.low:g}")


def distribution(value: Any) -> dict[str, list[float]]:
    """A scenario's distribution: {values = [...], weights = [...]} (weights >= 0, not all
    0; normalized here)."""
    need = "{ values = [...], weights = [...] }: numbers, and as many weights >= 0"
    if not isinstance(value, dict) or set(value) != {"values", "weights"}:
        raise ValueError(need)
    values, weights = value["values"], value["weights"]
    numbers = (isinstance(values, list) and isinstance(weights, list) and values
               and len(values) == len(weights)
               and all(isinstance(v, int | float) and not isinstance(v, bool)
                       and math.isfinite(v) for v in values)
               and all(isinstance(w, int | float) and not isinstance(w, bool) and w >= 0
                       for w in weights) and math.fsum(weights) > 0)
    if not numbers:
        raise ValueError(need)
    total = math.fsum(weights)
    return {"values": [float(v) for v in values], "weights": [w / total for w in weights]}


def read_unit(fields: Fields) -> str | None:
    """A number question's optional unit: printable text of 1 to MAX_UNIT characters (the
    randomized numbers' and the open ones'). FieldError otherwise."""
    unit = fields.data.get("unit")
    if unit is not None and not (isinstance(unit, str) and 0 < len(unit) <= MAX_UNIT
                                 and unit.isprintable()):
        raise FieldError("unit", f"must be printable text of 1 to {MAX_UNIT} characters")
    return unit


def wants_distribution(mechanism: str, fields: Fields) -> bool:
    """Whether the question is asked by the Square Wave mechanism: mechanism square_wave, or
    auto with `distribution = true`. FieldError for a `distribution` that is not true or false,
    false with square_wave, or `bins` without a distribution."""
    asked = fields.data.get("distribution", mechanism == "square_wave")
    if type(asked) is not bool:
        raise FieldError("distribution", f"must be true or false, got {asked!r}")
    if mechanism == "square_wave" and not asked:
        raise FieldError("distribution", "mechanism square_wave always estimates the "
                         "distribution: leave distribution out or set it true")
    if fields.has("bins") and not asked:
        raise FieldError("bins", "applies when the question asks for its distribution "
                         "(distribution = true)")
    return asked


def scheme_for(mechanism: str, options: tuple[str, ...],
               fields: Fields) -> tuple[Any, dict[str, float] | None]:
    """The scheme of a numeric question from min, max, unit and its mechanism's parameters (a
    manifest: alpha; grid, window, alpha; and duchi_alpha, piecewise_share) or epsilon. `auto`
    builds all three from epsilon and takes the lowest worst-case variance of the mean
    (duchi on a tie, then piecewise), returning the variances it compared."""
    from ldpsurvey.shared.mechanisms import piecewise  # built on this module

    low, high = (fields.number(key, -math.inf, math.inf) for key in ("min", "max"))
    unit = read_unit(fields)
    if not low < high:
        raise FieldError("max", f"must be above min ({low:g}), got {high:g}")
    if wants_distribution(mechanism, fields):
        from ldpsurvey.shared.mechanisms.square_wave import square_wave_for

        return square_wave_for(low, high, unit, fields), None
    given = sorted((FIELDS[mechanism] - RANGE - DISTRIBUTION) & set(fields.data))
    try:
        if mechanism == "duchi":
            alpha = (fields.number("alpha", 0.0, 1.0) if given
                     else alpha_for_epsilon(fields.epsilon(), 0.5))
            return StochasticRounding(low, high, alpha, unit), None
        if given:  # a manifest: every parameter
            grid = fields.count("grid", 2, piecewise.MAX_GRID)
            window = fields.count("window", 1, piecewise.MAX_GRID)
            alpha = fields.number("alpha", 0.0, 1.0)
            if mechanism == "piecewise":
                return piecewise.Piecewise(low, high, grid, window, alpha, unit), None
            return piecewise.Hybrid(low, high, grid, window, alpha,
                                    fields.number("duchi_alpha", 0.0, 1.0),
                                    fields.number("piecewise_share", -1.0, 1.0), unit), None
        eps = fields.epsilon()
        candidates = {"duchi": StochasticRounding(low, high, alpha_for_epsilon(eps, 0.5), unit),
                      "piecewise": piecewise.Piecewise.from_epsilon(low, high, eps, unit),
                      "hybrid": piecewise.Hybrid.from_epsilon(low, high, eps, unit)}
    except ValueError as exc:
        if isinstance(exc, FieldError):
            raise
        named = str(exc).split()[0]  # the parameter a message starts with, else alpha
        raise FieldError(named if named in given else "alpha" if given else "epsilon",
                         str(exc)) from None
    if mechanism != "auto":
        return candidates[mechanism], None
    variances = {name: float(piecewise.worst_variance(scheme))
                 for name, scheme in candidates.items()}
    return candidates[min(variances, key=variances.get)], variances  # the first, on a tie
