"""The mechanism protocol: what a question type and its randomizer provide to every layer.

The manifest, the respondent's device, intake, the counters, estimates, exports, pages, `plan`
and `mock` ask a question's scheme instead of branching on its type. Each module declares its
mechanisms once (`Declaration`: name, question types, words, fields with type, meaning and
bounds, builder), which registry.py lists and the manifest's reader, the OpenAPI description
and the browser's registry read; so a new mechanism is its module here (listed in registry.py),
its JavaScript twin in web/ (listed in web/schemes.js's SCHEMES), its vectors
(scheme_vectors.json, tests/scheme_vectors.py) and a row in docs/question-types.md:

    forced_response  yes/no and choice questions (k-RR, Warner 1965; the existing mechanism)
    oue, olh         choice questions, unary encoding and local hashing (Wang et al., USENIX
                     Security 2017)
    multi_select     check-all-that-apply (per-option bits, or padding and sampling)
    numeric          a number in [min, max] (Duchi, Jordan and Wainwright, JASA 2018; the
                     Piecewise and Hybrid mechanisms of Wang et al., ICDE 2019: piecewise.py)

A report is one JSON value per question (an option index, a list of bits, ...); its canonical
text (`encode`) is what is stored. A scheme's counters are integers the aggregator adds to as
it releases reports (`tally`), from which `summary` estimates. Every scheme's `epsilon` is the
exact epsilon of its integer randomizer (the one both devices run), never a float formula.
"""

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol

from ldpsurvey.shared.mechanisms.randomizer import Draw, realized_epsilon
from ldpsurvey.shared.stats.design import BETA_SUM_TOLERANCE
from ldpsurvey.shared.stats.estimate import Estimate

Report = Any  # a JSON value: the randomized report of one question


@dataclass(frozen=True)
class Settings:
    """How estimates are made: the confidence level, the interval method (intervals.METHODS)
    and whether intervals are simultaneous over a question's options."""

    confidence: float
    method: str
    simultaneous: bool = False


class Scheme(Protocol):
    """One question's mechanism, from its manifest fields to its estimates."""

    name: str  # the manifest's `mechanism`
    options: tuple[str, ...]
    quantity: str  # what is estimated: "proportion" (per option) or "mean"
    counters: int  # how many integer counters the aggregator keeps for the question

    @property
    def epsilon(self) -> float:
        """The exact epsilon of the integer randomizer (what is published, capped, charged)."""

    @property
    def realized_epsilon(self) -> float:
        """The same, as a respondent's device recomputes it (forced response: published before
        release 0.2 as the nominal formula's, so `epsilon` is the larger of the two)."""

    @property
    def nominal_epsilon(self) -> float:
        """The epsilon of the float formula (what manifests before 0.2 stated)."""

    def fields(self) -> dict[str, Any]:
        """The question's parameter fields as the manifest writes them (ordered: the client's
        digest of a survey takes their values in this order)."""

    def randomize(self, truth: Any, draw: Draw) -> Report:
        """One report of the true answer, from a fixed number of 53-bit draws."""

    def check_truth(self, truth: Any) -> Any:
        """The true answer in its canonical form; ValueError naming what is wrong."""

    def parse_text(self, text: str) -> Any:
        """A true answer typed by a respondent (CLI); ValueError saying what is expected."""

    def check_report(self, value: Any) -> str | None:
        """None if value is a report this scheme can produce, else what is wrong with it."""

    def largest_report(self) -> Report:
        """A report whose canonical text is the longest (request padding, row sizes)."""

    def tally(self, report: Report) -> Iterable[tuple[int, int]]:
        """(counter, amount) pairs one released report adds."""

    def summary(self, counts: Sequence[int], settings: Settings) -> dict[str, Any]:
        """The question's estimates document (without id, text, type) from its counters."""

    def simulate(self, truths: Any, rng: Any) -> list[Report]:
        """Reports of an array of true answers with the device's distribution, drawn with a
        NumPy generator (simulation only: `mock` and benchmarks)."""

    def truth_of(self, value: Any) -> list[float]:
        """A mock scenario's truth for the question (per estimated quantity); ValueError
        saying what is needed."""

    def draw_answers(self, truth: Sequence[float], n: int, rng: Any) -> Any:
        """n true answers drawn from that truth with a NumPy generator (simulation only)."""

    def true_values(self, truth: Any) -> list[float]:
        """Per estimated quantity, its value under a scenario's truth (mock)."""

    def asked(self) -> str:
        """What the answer can be, in words, for the CLI's question."""

    def best_guess(self) -> float:
        """How often a best guess of the answer from one report is right, answers equally
        likely beforehand."""

    def expected_margin(self, n: int, confidence: float = 0.95) -> float:
        """The expected CI half-width on the least certain quantity with n reports (a share of
        the range for a mean): z sqrt(lam (1 - lam) / n) / (p* - q*) at the worst lam for every
        scheme here, so proportional to 1/sqrt(n) (required_n)."""

    def design(self) -> dict[str, Any]:
        """The design parameters an analyst needs (exports, codebook)."""

    def columns(self, qid: str) -> list[str]:
        """The plain CSV's column names for the question."""

    def cells(self, report: Report, codes: bool) -> list[str]:
        """The plain CSV's cells for one report: labels, or with `codes` numbers (the caller
        makes them spreadsheet-safe)."""

    def shown(self, truth: Any) -> str:
        """A true answer in words, for the respondent's review."""

    def shown_report(self, report: Report) -> str:
        """A report exactly, as the server reads it (`respond --details`; the form's "How
        your answers are protected")."""

    def plain_report(self, report: Report) -> str:
        """A report in everyday words, beside what is sent (web/*.js `plain`, word for word)."""

    def note(self) -> tuple[str, str]:
        """What the server receives, in words, and what an observer would guess ("you would
        say Yes"), for the respondent's privacy note."""


def empty_entry(epsilon: float, settings: Settings) -> dict[str, Any]:
    """Every estimate key before a question's first report: what is known, the rest null."""
    known = {"n": 0, "reported_count": 0, "ci_method": settings.method,
             "confidence": settings.confidence, "epsilon": epsilon}
    return {field.name: known.get(field.name) for field in fields(Estimate)}


def required_n(scheme: Scheme, margin: float, confidence: float = 0.95) -> int:
    """Respondents for an expected half-width of `margin` on every quantity of the question:
    the margin with one report over `margin`, squared and rounded up (expected_margin is
    proportional to 1/sqrt(n); planning.n_required's formula for forced response)."""
    return max(1, math.ceil((scheme.expected_margin(1, confidence) / margin) ** 2))


def percent(p: float) -> str:
    """A probability as respondents read it: "75 %"."""
    return f"{100 * p:.0f} %"


def encode(report: Report) -> str:
    """A report's canonical JSON text: no spaces (an option index stays its digits, which is
    what json.dumps gives an int, taken directly: the most common report, encoded per row)."""
    if type(report) is int:
        return str(report)
    return json.dumps(report, separators=(",", ":"))


def encode_many(reports: Sequence[Report]) -> list[str]:
    """`encode` of each report; a column of ints only (not booleans) as their digits, at C
    speed (a mock or a batch encodes millions)."""
    if set(map(type, reports)) == {int}:
        return list(map(str, reports))
    return list(map(encode, reports))


def is_index(value: Any, k: int) -> bool:
    """Whether value is an integer in [0, k) (not a boolean)."""
    return type(value) is int and 0 <= value < k


def option_index(truth: Any, options: Sequence[str]) -> int:
    """A true answer that must be an option index; ValueError otherwise."""
    if not is_index(truth, len(options)):
        raise ValueError("the answer is not one of the question's options")
    return truth


def option_from_text(text: str, options: Sequence[str]) -> int:
    """An option typed as its number (0-based) or its text, case-insensitive; ValueError."""
    value = text.strip().lower()
    for index, option in enumerate(options):
        if value in (str(index), option.lower()):
            return index
    raise ValueError(f"takes an option number from 0 to {len(options) - 1} or an option's text")


class RandomizerEpsilon:
    """The epsilon of schemes whose report is, given a bit or an item drawn from the answer,
    one forced response (`mechanism`, run on its integer `thresholds`): the epsilon of the
    integer randomizer, or the float formula's where larger (mechanism.epsilon), as forced
    response has published since release 0.2 (manifest.Question.epsilon)."""

    @property
    def realized_epsilon(self) -> float:
        """The integer randomizer's exact epsilon (what a respondent's device checks)."""
        return realized_epsilon(self.thresholds)  # type: ignore[attr-defined]

    @property
    def nominal_epsilon(self) -> float:
        return self.mechanism.epsilon  # type: ignore[attr-defined]

    @property
    def epsilon(self) -> float:
        return max(self.realized_epsilon, self.nominal_epsilon)


class OneOption:
    """What the schemes whose true answer is one option index (forced response, OUE, OLH)
    share: reading and showing the answer, labels, and a mock scenario's truth (one proportion
    per option summing to 1; for yes/no also P(Yes) alone)."""

    options: tuple[str, ...]
    quantity = "proportion"

    def check_truth(self, truth: Any) -> int:
        return option_index(truth, self.options)

    def parse_text(self, text: str) -> int:
        return option_from_text(text, self.options)

    def shown(self, truth: Any) -> str:
        return self.options[truth]

    def asked(self) -> str:
        return "  ".join(f"{j}) {o}" for j, o in enumerate(self.options))

    def true_values(self, truth: list[float]) -> list[float]:
        return truth

    def truth_of(self, value: Any) -> list[float]:
        k, yes_no = len(self.options), getattr(self, "type", "choice") == "yes_no"
        if yes_no and isinstance(value, int | float) and not isinstance(value, bool):
            value = [1 - value, value]
        if not (isinstance(value, list) and len(value) == k
                and all(isinstance(p, int | float) and 0 <= p <= 1 for p in value)
                and abs(math.fsum(value) - 1) <= BETA_SUM_TOLERANCE):
            raise ValueError("a proportion in [0, 1]" if yes_no else
                             f"{k} proportions summing to 1")
        return [float(p) for p in value]

    def draw_answers(self, truth: Sequence[float], n: int, rng: Any) -> Any:
        from ldpsurvey.shared.sim import simulation

        return simulation.true_answers(truth, n, rng)


# What a bit report's CSV columns hold (design's "cells").
BIT_CELLS = ("one column per option, QID_0 for option code 0 and so on: its reported bit, 1 or 0, "
             "in every export")


class BitReport:
    """What the schemes whose report is one bit per option (OUE, multi_select bits) share: the
    check at intake, the longest report, one CSV column per option, the report in words."""

    options: tuple[str, ...]

    def check_report(self, value: Any) -> str | None:
        if not is_bits(value, len(self.options)):
            return f"must be a list of {len(self.options)} bits (0 or 1), one per option"
        return None

    def largest_report(self) -> Report:
        return [1] * len(self.options)

    def columns(self, qid: str) -> list[str]:
        return [f"{qid}_{j}" for j in range(len(self.options))]

    def cells(self, report: Report, codes: bool) -> list[str]:
        return [str(bit) for bit in report]

    def shown_report(self, report: Report) -> str:
        return "marks " + "".join(map(str, report)) + " (one per option)"

    def plain_report(self, report: Report) -> str:
        """The options marked (web/multi_select.js `marked`)."""
        names = [o for o, bit in zip(self.options, report, strict=True) if bit == 1]
        return f"marked: {'; '.join(names)}" if names else "nothing marked"


def is_bits(value: Any, k: int) -> bool:
    """Whether value is a list of k integers each 0 or 1."""
    return type(value) is list and len(value) == k and all(type(b) is int and b in (0, 1)
                                                          for b in value)


class FieldError(ValueError):
    """A question field is wrong: `field` names it (the manifest prefixes the question; an
    empty `field` is about the question as a whole)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def finite(value: Any, field: str) -> float:
    """value, if a finite number (not a boolean); FieldError naming `field` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FieldError(field, f"must be a finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Fields:
    """A question's definition or manifest fields, read with checks (FieldError)."""

    data: Mapping[str, Any]

    def has(self, key: str) -> bool:
        return key in self.data

    def number(self, key: str, low: float, high: float, default: float | None = None) -> float:
        """A finite number strictly between low and high (or the default when absent)."""
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                math.isfinite(value) and low < value < high):
            raise FieldError(key, f"must be a number in ({low:g}, {high:g}), got {value!r}")
        return float(value)

    def finite(self, key: str) -> float:
        """A finite number, whatever its sign."""
        return finite(self.data.get(key), key)

    def count(self, key: str, low: int, high: int, default: int | None = None) -> int:
        """A whole number from low to high (or the default when absent)."""
        value = self.data.get(key, default)
        if type(value) is not int or not low <= value <= high:
            raise FieldError(key, f"must be a whole number from {low} to {high}, got {value!r}")
        return value

    def epsilon(self) -> float:
        """The epsilon asked for, a positive finite number."""
        if "epsilon" not in self.data:
            raise FieldError("epsilon", "is needed for this mechanism")
        return self.number("epsilon", 0.0, math.inf)


PARAM_TYPES = {"number": "number", "integer": "integer", "text": "string", "flag": "boolean"}


@dataclass(frozen=True)
class Param:
    """One field a mechanism takes in a survey definition or manifest: its name, its type
    ("number", "integer", "text" or "flag"; `schema` for anything else), what it means, and
    its bounds (a number strictly between low and high; a whole number from low to high)."""

    name: str
    type: str
    meaning: str
    low: float | None = None
    high: float | None = None
    pattern: str | None = None  # a text's regular expression, whole
    schema: Mapping[str, Any] | None = None  # a JSON schema where the type says too little

    def json_schema(self) -> dict[str, Any]:
        """The field as a JSON schema (OpenAPI 3.0: exclusive bounds are flags)."""
        if self.schema is not None:
            return dict(self.schema)
        schema: dict[str, Any] = {"type": PARAM_TYPES[self.type]}
        for bound, value in (("minimum", self.low), ("maximum", self.high)):
            if value is not None and math.isfinite(value):
                schema[bound] = value
                if self.type == "number":
                    schema["exclusive" + bound.title()] = True
        if self.pattern is not None:
            schema["pattern"] = f"^{self.pattern}$"
        return schema


EPSILON = Param("epsilon", "number", "The epsilon the question spends (a definition), or its "
                "integer randomizer's exact epsilon (a manifest)", 0.0, math.inf)
# A number, or one per option (beta): the schema of a "probabilities" field.
PROBABILITIES = {"oneOf": [{"type": "number"}, {"type": "array", "items": {"type": "number"}}]}
Builder = Callable[[str, tuple[str, ...], Fields], Any]  # (type, options, fields) -> Scheme
# (options, fields) -> the name chosen and the variances compared (None: compared none)
Chooser = Callable[[tuple[str, ...], Fields], tuple[str, dict[str, float] | None]]


@dataclass(frozen=True)
class Declaration:
    """What a mechanism module declares once, for every surface to read (registry.py): the
    name a question selects it by (through `key`: its `mechanism`, its `design`, or
    `disclosed: true`), the question types it serves, its words for people, the fields it
    takes, and its builder from those fields to its Scheme. An `auto` declaration has no
    builder but a chooser: the name of the mechanism it picks and the `measure` it compared."""

    name: str
    types: tuple[str, ...]
    words: str
    params: tuple[Param, ...]
    build: Builder | None = None
    key: str = "mechanism"
    default: bool = False  # the mechanism of its types when a question names none
    since: int = 6  # the manifest format that introduced it (a survey using it is written so)
    choose: Chooser | None = None
    measure: str = ""

    @property
    def field_names(self) -> set[str]:
        return {param.name for param in self.params}
