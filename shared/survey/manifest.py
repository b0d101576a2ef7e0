"""The survey format: the definition a researcher writes, and the manifest the aggregator signs.

A definition (TOML or JSON) holds title, description, optional max_epsilon (the promised
per-respondent ceiling), invitation_only, public_results, release_batch (how many responses the
server pools before it releases them, shuffled, to counts and exports; default 100) and
questions. Each question has id, text, type ("yes_no" or "choice" with options; "multi_select"
with options, "numeric" with min and max: the types mechanisms/registry.py's declarations serve),
for a choice question an optional mechanism ("forced_response", the default, "oue", "olh" or
"auto", which picks the lowest variance at the question's epsilon: registry.py), an optional
concept (a name for a stable trait it asks about, shared by questions that ask the same across
surveys: the respondent's device randomizes it once, permanently, and reports a fresh
randomization of that permanent answer each time, with irr_alpha, default 0.75, and uniform
beta) and either alpha (with optional beta, uniform by default) or a target epsilon (alpha
derived, beta uniform unless given). Texts may not hold control characters other than newline
and tab, nor bidirectional overrides, which could repaint a respondent's terminal or reorder
what the respondent reads.

A definition may also give its texts in several languages: languages (the first is the language
of the texts above; default ["en"]), an optional hint per question, and per other language a
table translations.<language> with title, description and per question id its text, hint,
options (choice and multi_select) and unit (a numeric question with one); a translation
missing anywhere is refused, naming the language and the question (see Translation).

The manifest is that survey with every parameter spelled out (beta as a full list, derived
epsilon per question, total_epsilon) plus survey_id and key_id, serialized canonically.
Client and aggregator both read it through parse_manifest. Format /9 added form_origins: the
web origins, besides the aggregator's own, that may host a static copy of the form (`ldp-survey
survey form ID --output DIR`, which an ethics board or a university serves from its own origin,
so that respondents there run code the operator cannot change): the form runs at its signed
origin or one of these, and the aggregator answers those origins' cross-origin requests and no
others'. A survey that lists none is written as /8, so earlier clients read it; they refuse a
/9 one by its format. Format /8 added languages and
translations (always written in /8), the question's hint, the number mechanism square_wave
(square_wave.py, with its histogram's bins) and form: the SHA-384 digest of every file the web
form loads (its modules and stylesheet, by name: form_integrity.py), signed at publication, so
that anyone can check the page a server sends against what was signed (`ldp-survey verify`) and
against a release's own digests; every survey published since is /8, and earlier clients refuse
it by its format. Format /7 added design on yes/no
questions ("cheating_detection": two forced-response groups, with groups in place of alpha and
beta; cheating.py), the number mechanisms piecewise and hybrid (piecewise.py), and `disclosed:
true` on yes/no, choice and numeric questions answered openly (disclosed.py: no randomization,
no epsilon field, counted in no epsilon); a survey using none of them is written as before, so
earlier clients read it, and they refuse a /7 one by its format. Format /6 added mechanism on
choice questions (oue, olh: shared/mechanisms/oue.py, olh.py, with their parameters in place of alpha and
beta; `auto` in a definition is written as the mechanism it chose) and the types multi_select
and numeric (multi_select.py, numeric.py); a survey with only
forced-response questions is still written as /5, so earlier clients read it, and they refuse a
/6 one by its format. Format /5 added origin, the web
origin (scheme://host[:port]) the aggregator serves respondents at, signed so that a client or
the web form refuses the survey reached at any other address (the browser keeps its memory and
ledger per origin: one server reached at two origins would get two budgets); every survey
published since is /5, with crosstabs always listed. A client reading an older manifest has no
origin to check and behaves as before. Format /4 added crosstabs (pairs
of question ids whose joint counts the aggregator keeps as it releases); a survey that declares
none is written as /3, field for field as before, so clients of earlier releases keep reading
every survey that uses nothing new. /3 added irr_alpha on
concept questions; /2 added release_batch and concept (no aggregator published a /2 concept,
publishing refused it; one would read with the default irr_alpha); a /1 manifest (written
before release batches existed) reads as release_batch = 1, which is how its aggregator behaved.
"""

import dataclasses
import difflib
import hashlib
import ipaddress
import math
import re
import tomllib
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ldpsurvey.shared.mechanisms import disclosed, registry
from ldpsurvey.shared.mechanisms.budget import EPSILON_TOLERANCE, exceeds, total_epsilon
from ldpsurvey.shared.mechanisms.forced_response import DEFAULT_IRR_ALPHA
from ldpsurvey.shared.mechanisms.forced_response import NAME as FORCED_RESPONSE
from ldpsurvey.shared.mechanisms.multi_select import AUTO_MEASURE as CHOICE_MEASURE
from ldpsurvey.shared.mechanisms.protocol import Declaration, FieldError, Fields, Scheme
from ldpsurvey.shared.stats.crosstab import size_problem
from ldpsurvey.shared.stats.design import Mechanism
from ldpsurvey.shared.survey import form_integrity, strict_json

MANIFEST_FORMAT = "ldp-survey-manifest/9"
FORMAT_8 = "ldp-survey-manifest/8"
FORMAT_7 = "ldp-survey-manifest/7"
FORMAT_6 = "ldp-survey-manifest/6"
FORMAT_5 = "ldp-survey-manifest/5"
FORMAT_4 = "ldp-survey-manifest/4"
FORMAT_3 = "ldp-survey-manifest/3"
FORMAT_2 = "ldp-survey-manifest/2"
FORMAT_1 = "ldp-survey-manifest/1"
QUESTION_ID = re.compile(r"[a-z][a-z0-9_]{0,39}")
# A BCP 47 language tag as browsers send them: a 2 or 3 letter language, then subtags (pt-BR).
LANGUAGE = re.compile(r"[a-z]{2,3}(-[A-Za-z0-9]{2,8}){0,2}")
DEFAULT_LANGUAGE = "en"  # the language of a survey that names none
MAX_LANGUAGES = 20
MAX_FORM_ORIGINS = 8
# Hosts a browser treats as a secure context over plain http (the form needs one: WebCrypto,
# Web Locks): a form origin elsewhere must be https.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
# What a /6 reader does not know: a survey using one of these is /7 (or /8), so earlier clients
# refuse it by its format rather than by a field they cannot read.
SCHEMES_SINCE_7 = frozenset(d.name for d in registry.DECLARATIONS if d.since >= 7)
SCHEMES_SINCE_8 = frozenset(d.name for d in registry.DECLARATIONS if d.since >= 8)
FORMATS = (MANIFEST_FORMAT, FORMAT_8, FORMAT_7, FORMAT_6, FORMAT_5, FORMAT_4, FORMAT_3, FORMAT_2, FORMAT_1)
DEFAULT_RELEASE_BATCH = 100
MAX_IRR_ALPHA = DEFAULT_IRR_ALPHA  # published and answered at most (check_instantaneous)
MAX_RELEASE_BATCH = 1_000_000
YES_NO_OPTIONS = ("No", "Yes")
MAX_QUESTIONS = 100
MAX_OPTIONS = 64
MAX_TEXT = 2000
MAX_CROSSTABS = 20  # declared pairs per survey: each keeps k_A x k_B counters
# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional marks, embeddings,
# overrides and isolates (Unicode TR9): in a terminal or a page they can hide or reorder text.
FORBIDDEN_CHARACTERS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f"
                                  "\u202a-\u202e\u2066-\u2069]")


def key_id(public_key: bytes) -> str:
    """A signing key's id: the first 16 hex digits of SHA-256 over the raw 32-byte public key."""
    return hashlib.sha256(public_key).hexdigest()[:16]


DEFAULT_PORTS = {"http": 80, "https": 443}
# A DNS name (letters, digits, hyphens and underscores in dot-separated labels, no trailing
# dot) or an IPv4 address: nothing that could end a header's value or a policy's source.
HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}"
                       r"[a-z0-9_])?)*")


def web_origin(url: str) -> str:
    """The web origin of an http(s) URL as browsers serialize it (location.origin): scheme and
    host in lower case, the default port dropped, no path. ValueError if it has no http(s)
    scheme and host, a host that is not a DNS name or an IP address (HOST_NAME: it is written
    into pages' policies and headers), or a port outside 1 to 65535."""
    parts = urllib.parse.urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// or https:// address with a host")
    try:
        host = parts.hostname.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError(f"{parts.hostname!r} is not a valid host name") from None
    if ":" in host:
        host = f"[{ipaddress.IPv6Address(host).compressed}]"  # ValueError if it is none
    elif not HOST_NAME.fullmatch(host):
        raise ValueError(f"{parts.hostname!r} is not a valid host name")
    port = parts.port  # ValueError when it is not a number in range
    if port == 0:
        raise ValueError(f"{url!r} has port 0, which no server listens at")
    return f"{scheme}://{host}" + ("" if port in (None, DEFAULT_PORTS[scheme]) else f":{port}")


class SurveyError(ValueError):
    """A survey definition or manifest is invalid; the message names the question and field."""


@dataclass(frozen=True)
class Auto:
    """What `mechanism = "auto"` chose for a question, and the variances it compared
    (the `auto` declaration's chooser). Not part of the manifest, which names the chosen
    mechanism."""

    chosen: str
    variances: dict[str, float]
    measure: str = CHOICE_MEASURE  # what `auto` compares for choices; numbers' is their own

    def words(self) -> str:
        """The choice in words, for `survey check`."""
        compared = ", ".join(f"{name} {value:.3g}" for name, value in self.variances.items())
        return f"mechanism auto chose {self.chosen}: the lowest {self.measure}: {compared})"


@dataclass(frozen=True)
class Question:
    """One question and its scheme (scheme.py), which randomizes, tallies and estimates it.
    options[j] is option index j."""

    id: str
    text: str
    type: str
    options: tuple[str, ...]
    scheme: Scheme
    concept: str | None = None
    irr_alpha: float | None = None  # set exactly for concept questions
    auto: "Auto | None" = None  # what `mechanism = "auto"` compared (definitions only)
    hint: str | None = None  # shown under the text (format /8 on)

    @property
    def epsilon(self) -> float:
        """The epsilon the integer randomizer realizes (what is published, capped and charged).
        For a concept question, the permanent layer's: every report of the concept is
        post-processing of the one permanent answer, so together they reveal at most this."""
        return self.scheme.epsilon

    @property
    def mechanism(self) -> Mechanism:
        """A forced-response question's (permanent) mechanism."""
        return self.scheme.mechanism

    @property
    def instantaneous(self) -> Mechanism | None:
        """A concept question's second layer: irr_alpha with uniform beta (None otherwise)."""
        return self.scheme.instantaneous

    @property
    def disclosed(self) -> bool:
        """Whether the question is answered openly (disclosed.py): sent as given."""
        return self.scheme.name == disclosed.NAME

    @property
    def reported_mechanism(self) -> Mechanism:
        """What one report of a forced-response question is, given the true answer: its
        mechanism, or for a concept question both layers composed (mechanism.compose)."""
        return self.scheme.reported

    def worded(self, wording: "Wording") -> "Question":
        """This question in another language's words (its scheme's options and unit too, which
        it shows); the same parameters."""
        words = {"options": wording.options, "unit": wording.unit}
        scheme_fields = {f.name for f in dataclasses.fields(self.scheme)}
        scheme = replace(self.scheme, **{name: value for name, value in words.items()
                                         if value and name in scheme_fields})
        return replace(self, text=wording.text, hint=wording.hint,
                       options=wording.options or self.options, scheme=scheme)

    def as_dict(self) -> dict[str, Any]:
        options = {"options": list(self.options)} if self.options else {}  # none: numeric
        epsilon = {} if self.disclosed else {"epsilon": self.epsilon}  # open: counted in none
        hint = {} if self.hint is None else {"hint": self.hint}
        fields = {"id": self.id, "text": self.text, **hint, "type": self.type, **options,
                  **self.scheme.fields(), **epsilon}
        if self.concept is None:
            return fields
        return {**fields, "concept": self.concept, "irr_alpha": self.irr_alpha}


@dataclass(frozen=True)
class Wording:
    """A question's words in one language: text, hint (if the question has one), options (a
    choice or multi_select question's; yes_no options are the form's own words) and unit (a
    numeric question's, if it has one)."""

    text: str
    hint: str | None = None
    options: tuple[str, ...] = ()
    unit: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"text": self.text, **({"hint": self.hint} if self.hint is not None else {}),
                **({"options": list(self.options)} if self.options else {}),
                **({"unit": self.unit} if self.unit is not None else {})}


@dataclass(frozen=True)
class Translation:
    """A survey's texts in one more language: title, description and each question's Wording
    (by question id)."""

    title: str
    description: str
    questions: Mapping[str, Wording]

    def as_dict(self) -> dict[str, Any]:
        return {"title": self.title, "description": self.description,
                "questions": {qid: w.as_dict() for qid, w in self.questions.items()}}


@dataclass(frozen=True)
class Survey:
    """A validated survey. survey_id and key_id are set once the aggregator publishes it."""

    title: str
    description: str
    questions: tuple[Question, ...]
    max_epsilon: float | None = None
    invitation_only: bool = False
    public_results: bool = False
    release_batch: int = DEFAULT_RELEASE_BATCH
    crosstabs: tuple[tuple[str, str], ...] = ()  # (rows, cols) question ids
    survey_id: str | None = None
    key_id: str | None = None
    origin: str | None = None  # the web origin respondents reach it at (format /5 on)
    languages: tuple[str, ...] = (DEFAULT_LANGUAGE,)  # the first is the texts' above (/8 on)
    translations: Mapping[str, Translation] = field(default_factory=dict)  # the others'
    form: dict[str, str] | None = None  # the web form's file digests (format /8, published)
    form_origins: tuple[str, ...] = ()  # other origins that may host the form (format /9)

    def __hash__(self) -> int:
        """Its id's hash: equal surveys have equal ids, so it agrees with ==, and a published
        survey, a key of the aggregator's per-survey caches on every submission, is hashed
        without hashing every field of every question (a third of what the cached value
        costs to compute)."""
        return hash(self.survey_id)

    @property
    def total_epsilon(self) -> float:
        """Per-respondent epsilon: the sum over questions (sequential composition)."""
        return total_epsilon(q.epsilon for q in self.questions)

    @property
    def opened(self) -> tuple[str, ...]:
        """The ids of the questions answered openly (disclosed), in order."""
        return tuple(q.id for q in self.questions if q.disclosed)

    def in_language(self, language: str) -> "Survey":
        """This survey with its texts in `language`, one of its languages (KeyError if not)."""
        if language == self.languages[0]:
            return self
        words = self.translations[language]
        return replace(self, title=words.title, description=words.description,
                       questions=tuple(q.worded(words.questions[q.id]) for q in self.questions))

    def question(self, question_id: str) -> Question:
        for q in self.questions:
            if q.id == question_id:
                return q
        raise KeyError(question_id)

    def manifest(self) -> dict[str, Any]:
        """The manifest's fields: format /9 when it lists form_origins; else /8 when it
        carries the form's digests (every survey
        published since /8), the survey has other languages than English alone, a question has
        a hint or a question uses square_wave (with languages and translations); else /7 when a
        question has a design (cheating_detection),
        a number mechanism new in /7 (piecewise, hybrid) or is answered openly; else /6 when a
        question uses another mechanism than forced response (with origin and crosstabs); else
        /5 with the origin (and crosstabs) when the survey has one (every survey published
        since /5); else /4 with crosstabs if it declares any, else /3 without them. So clients
        of earlier releases keep reading every survey that uses nothing new, and refuse the
        others by their format."""
        names = {q.scheme.name for q in self.questions}
        new = any(q.scheme.name != FORCED_RESPONSE for q in self.questions)
        worded = self.languages != (DEFAULT_LANGUAGE,) or any(q.hint for q in self.questions)
        version = (MANIFEST_FORMAT if self.form_origins else FORMAT_8 if self.form or worded
                   or names & SCHEMES_SINCE_8 else FORMAT_7
                   if names & SCHEMES_SINCE_7 else FORMAT_6 if new else FORMAT_5 if self.origin
                   else FORMAT_4 if self.crosstabs else FORMAT_3)
        fields = {"format": version,
                  "survey_id": self.survey_id, "key_id": self.key_id,
                  "title": self.title, "description": self.description,
                  "max_epsilon": self.max_epsilon, "invitation_only": self.invitation_only,
                  "public_results": self.public_results, "release_batch": self.release_batch,
                  "questions": [q.as_dict() for q in self.questions],
                  "total_epsilon": self.total_epsilon}
        if version != FORMAT_3:
            fields["crosstabs"] = [list(pair) for pair in self.crosstabs]
        if self.origin:
            fields["origin"] = self.origin
        if version in (MANIFEST_FORMAT, FORMAT_8):
            fields["languages"] = list(self.languages)
            fields["translations"] = {language: words.as_dict()
                                      for language, words in self.translations.items()}
        if self.form:
            fields["form"] = dict(sorted(self.form.items()))
        if self.form_origins:
            fields["form_origins"] = list(self.form_origins)
        return fields

    def manifest_bytes(self) -> bytes:
        """The canonical bytes that are signed and served; never re-serialize after signing."""
        return strict_json.dumps(self.manifest())


# --- reading fields -------------------------------------------------------------------------

def _fail(where: str, message: str) -> SurveyError:
    return SurveyError(f"{where}: {message}")


def _keys(data: Any, where: str, required: set[str], optional: set[str]) -> Mapping[str, Any]:
    """The mapping, if it has every required field and no unknown one. An unknown field is
    reported first, with the known field it most resembles: a typo (`typ`) then explains the
    missing field (`type`) too."""
    if not isinstance(data, Mapping):
        raise _fail(where, f"must be a table/object, got {type(data).__name__}")
    unknown = sorted(map(str, data.keys() - required - optional))
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(required | optional), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise _fail(where, f"unknown field {unknown[0]!r}{hint}")
    missing = required - data.keys()
    if missing:
        raise _fail(where, f"missing field {sorted(missing)[0]!r}")
    return data


def _text(value: Any, where: str, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise _fail(where, f"must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise _fail(where, "must not be empty")
    if len(value) > MAX_TEXT:
        raise _fail(where, f"longer than {MAX_TEXT} characters")
    forbidden = FORBIDDEN_CHARACTERS.search(value)
    if forbidden:
        raise _fail(where, f"holds the control or bidirectional character "
                    f"U+{ord(forbidden.group()):04X} at position {forbidden.start()}: it could hide "
                    "or reorder what respondents read")
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(where, f"must be a finite number, got {value!r}")
    return float(value)


def _count(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _fail(where, f"must be a whole number from {low} to {high:,}, got {value!r}")
    return value


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(where, f"must be true or false, got {value!r}")
    return value


def _options(data: Mapping[str, Any], kind: str, where: str) -> tuple[str, ...]:
    if kind == "numeric":
        if "options" in data:
            raise _fail(f"{where}.options", "a numeric question has min and max, not options")
        return ()
    if kind == "yes_no":
        if data.get("options", list(YES_NO_OPTIONS)) != list(YES_NO_OPTIONS):
            raise _fail(f"{where}.options", "yes_no questions have the fixed options No, Yes")
        return YES_NO_OPTIONS
    options = data.get("options")
    if not isinstance(options, list) or not 2 <= len(options) <= MAX_OPTIONS:
        raise _fail(f"{where}.options", f"a {kind} question needs a list of 2 to {MAX_OPTIONS} "
                    "options")
    texts = tuple(_text(o, f"{where}.options[{j}]") for j, o in enumerate(options))
    if len(set(texts)) != len(texts):
        raise _fail(f"{where}.options", "options must be distinct")
    return texts


# The fields a question of format /6 may hold (every mechanism's but /8's), of /7 (designs'
# too, and disclosed) and of /8 (square_wave's bins and distribution).
FIELDS_SINCE_8 = {"bins", "distribution"}  # square_wave's (a manifest states bins)
QUESTION_FIELDS_6 = {"options", "mechanism"} | registry.fields("mechanism") - FIELDS_SINCE_8
QUESTION_FIELDS = {"options", "mechanism"} | registry.fields()
QUESTION_FIELDS_7 = QUESTION_FIELDS - FIELDS_SINCE_8
# The types a design may replace forced response on (a design names those it takes).
DESIGNABLE = registry.declared("choice", FORCED_RESPONSE).types


def _question(data: Any, index: int, seen: set[str]) -> Question:
    qid = data.get("id") if isinstance(data, Mapping) else None
    named = isinstance(qid, str) and QUESTION_ID.fullmatch(qid) and qid not in seen
    where = f"question {qid!r}" if named else f"questions[{index}]"
    data = _keys(data, where, {"id", "text", "type"}, QUESTION_FIELDS | {"hint"})
    qid = data["id"]
    if not isinstance(qid, str) or not QUESTION_ID.fullmatch(qid):
        raise _fail(f"{where}.id", f"must match [a-z][a-z0-9_]{{0,39}}, got {qid!r}")
    if qid in seen:
        raise _fail(f"{where}.id", f"duplicate question id {qid!r}")
    seen.add(qid)
    where = f"question {qid!r}"
    hint = None if "hint" not in data else _text(data["hint"], f"{where}.hint")
    data = {key: value for key, value in data.items() if key != "hint"}
    return replace(_asked(data, qid, where), hint=hint)


def _asked(data: Mapping[str, Any], qid: str, where: str) -> Question:
    """A question from its fields but its id (checked) and hint."""
    text = _text(data["text"], f"{where}.text")
    kind = data["type"]
    if kind not in registry.QUESTION_TYPES:
        raise _fail(f"{where}.type", f"must be one of {', '.join(registry.QUESTION_TYPES)}, "
                    f"got {kind!r}")
    options = _options(data, kind, where)
    if _flag(data.get("disclosed", False), f"{where}.disclosed"):
        return _open(data, qid, text, kind, options, where)
    data = {key: value for key, value in data.items() if key != "disclosed"}
    if "design" in data and kind in DESIGNABLE:
        return _designed(data, qid, text, kind, options, where)
    allowed = registry.names(kind)
    mechanism = data.get("mechanism", registry.default(kind))
    if mechanism not in allowed:
        raise _fail(f"{where}.mechanism", f"must be one of {', '.join(allowed)} for a {kind} "
                    f"question, got {mechanism!r}")
    declared = registry.declared(kind, mechanism)
    _only(data, declared.field_names, mechanism, where)
    auto = None
    if declared.choose is not None:
        chosen, variances = _built(declared.choose, where, options, Fields(data))
        auto = None if variances is None else Auto(chosen, variances, declared.measure)
        declared = registry.declared(kind, chosen)
    return _question_of(declared, data, qid, text, kind, options, where, auto)


def _built(make: Any, where: str, options: tuple[str, ...], fields: Fields) -> Any:
    """make(options, fields), its FieldError as the question's SurveyError."""
    try:
        return make(options, fields)
    except FieldError as exc:
        raise _fail(f"{where}.{exc.field}" if exc.field else where, str(exc)) from None


def _question_of(declared: Declaration, data: Mapping[str, Any], qid: str, text: str,
                 kind: str, options: tuple[str, ...], where: str,
                 auto: "Auto | None" = None) -> Question:
    """The question with the scheme its declaration builds from its fields (a concept
    question's concept and irr_alpha as its scheme read them)."""
    scheme = _built(lambda o, f: declared.build(kind, o, f), where, options, Fields(data))
    concept = data.get("concept")
    return Question(qid, text, kind, options, scheme, concept,
                    None if concept is None else scheme.irr_alpha, auto)


def _designed(data: Mapping[str, Any], qid: str, text: str, kind: str,
              options: tuple[str, ...], where: str) -> Question:
    """A question asked with a design of its own (a declaration selected by `design`)."""
    design, designs = data["design"], registry.names(kind, "design")
    if design not in designs or "mechanism" in data:
        problem = (f"a design is for yes/no questions, not {kind}" if not designs else
                   "a design replaces mechanism: give one of them" if design in designs else
                   f"must be one of {', '.join(designs)}, got {design!r}")
        raise _fail(f"{where}.design", problem)
    declared = registry.declared(kind, design, "design")
    _only(data, declared.field_names, design, where)
    return _question_of(declared, data, qid, text, kind, options, where)


def _open(data: Mapping[str, Any], qid: str, text: str, kind: str, options: tuple[str, ...],
          where: str) -> Question:
    """An openly answered question (disclosed.py): yes/no, choice or numeric, with no
    randomization fields."""
    if not registry.names(kind, disclosed.NAME):
        open_types = [t for t in registry.QUESTION_TYPES if registry.names(t, disclosed.NAME)]
        raise _fail(f"{where}.disclosed", f"a {kind} question cannot be answered openly (only "
                    f"{', '.join(open_types)})")
    declared = registry.declared(kind, disclosed.NAME, disclosed.NAME)
    _only(data, declared.field_names, disclosed.NAME, where)
    if "mechanism" in data:
        raise _fail(f"{where}.mechanism", "an openly answered question is not randomized")
    return _question_of(declared, data, qid, text, kind, options, where)


def _only(data: Mapping[str, Any], fields: set[str], mechanism: str, where: str) -> None:
    """SurveyError for a field the mechanism does not take (alpha on an OUE question, ...)."""
    extra = sorted(set(data) - {"id", "text", "type", "options", "mechanism"} - fields)
    if extra:
        raise _fail(f"{where}.{extra[0]}", f"does not apply to mechanism {mechanism!r} (it "
                    f"takes {', '.join(sorted(fields))})")


def check_instantaneous(question: Question) -> None:
    """SurveyError unless a concept question's irr_alpha is at most MAX_IRR_ALPHA (0.75, the
    default). Each report of a concept is its permanent answer with probability irr_alpha +
    (1 - irr_alpha) / k; as irr_alpha nears 1 every report repeats the permanent answer, and a
    person's reports of a few concepts become a fingerprint linking their surveys (the reason
    RAPPOR's instantaneous layer is the weaker one). The bound is on alpha, not on the layer's
    epsilon ln(1 + k irr_alpha / (1 - irr_alpha)): an epsilon bound equal to the permanent
    layer's would refuse the default for a question at ln 3. Checked at publish and by the
    respondent's client; manifests signed before keep reading."""
    if question.irr_alpha is not None and question.irr_alpha > MAX_IRR_ALPHA:
        raise _fail(f"question {question.id!r}.irr_alpha", f"must be at most {MAX_IRR_ALPHA} "
                    f"(got {question.irr_alpha!r}): closer to 1, each report repeats the "
                    "permanent answer and a person's reports link their surveys")


def _crosstabs(value: Any, questions: tuple[Question, ...]) -> tuple[tuple[str, str], ...]:
    """Pairs [rows, cols] of two different questions of the survey, each pair once (in
    either order), at most MAX_CROSSTABS."""
    where = "survey.crosstabs"
    if not isinstance(value, list) or len(value) > MAX_CROSSTABS:
        raise _fail(where, f"must be a list of at most {MAX_CROSSTABS} pairs of question ids")
    ids = {q.id for q in questions}
    pairs: list[tuple[str, str]] = []
    for index, pair in enumerate(value):
        if (not isinstance(pair, list) or len(pair) != 2
                or not all(isinstance(qid, str) and qid in ids for qid in pair)
                or pair[0] == pair[1]):
            raise _fail(f"{where}[{index}]", f"must be two different question ids of this "
                        f"survey, got {pair!r}")
        if any(q.scheme.name != FORCED_RESPONSE for q in questions if q.id in pair):
            raise _fail(f"{where}[{index}]", f"cross-tabs need forced-response questions, got "
                        f"{pair!r}")
        if tuple(pair) in pairs or tuple(reversed(pair)) in pairs:
            raise _fail(f"{where}[{index}]", f"the pair {pair!r} is declared twice")
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


def _form_origins(value: Any) -> tuple[str, ...]:
    """Where else the form may be hosted: at most MAX_FORM_ORIGINS distinct web origins, each
    exactly as web_origin writes it, https unless its host is a loopback one (LOOPBACK_HOSTS)."""
    where = "survey.form_origins"
    if not isinstance(value, list) or len(value) > MAX_FORM_ORIGINS:
        raise _fail(where, f"must be a list of at most {MAX_FORM_ORIGINS} web origins such as "
                    "[\"https://ethics.example.edu\"]")
    for index, origin in enumerate(value):
        _origin(origin, f"{where}[{index}]")
        parts = urllib.parse.urlsplit(origin)
        if parts.scheme != "https" and parts.hostname not in LOOPBACK_HOSTS:
            raise _fail(f"{where}[{index}]", f"must be https (browsers give the form's "
                        f"cryptography only to secure pages; plain http only for localhost, "
                        f"127.0.0.1 and [::1]), got {origin!r}")
    if len(set(value)) != len(value):
        raise _fail(where, f"lists an origin twice: {value!r}")
    return tuple(value)


def _languages(value: Any) -> tuple[str, ...]:
    """A survey's languages: distinct language tags, the first its texts' own."""
    where = "survey.languages"
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_LANGUAGES:
        raise _fail(where, f"must be a list of 1 to {MAX_LANGUAGES} language tags such as "
                    "[\"en\", \"fr\"], the first the language of the texts")
    for index, tag in enumerate(value):
        if not (isinstance(tag, str) and LANGUAGE.fullmatch(tag)):
            raise _fail(f"{where}[{index}]", f"must be a language tag such as \"fr\" or "
                        f"\"pt-BR\", got {tag!r}")
    if len({tag.lower() for tag in value}) != len(value):  # BCP 47 ignores case: pt-BR, pt-br
        raise _fail(where, f"lists a language twice: {value!r}")
    return tuple(value)


def _translations(value: Any, survey: Survey) -> dict[str, Translation]:
    """translations.<language> for each language but the first: every text the survey has, in
    that language (see Translation, Wording); one missing is refused naming it."""
    where = "survey.translations"
    others = survey.languages[1:]
    data = _every(value, others, where, "language",
                  "no table for {name!r}, which languages lists: every text is needed in it")
    found = {}
    for language in others:
        at = f"{where}.{language}"
        words = _keys(data[language], at, {"title", "questions"} | (
            {"description"} if survey.description else set()), {"description"})
        questions = _every(words["questions"], [q.id for q in survey.questions],
                           f"{at}.questions", "question", "question {name!r} has no translation")
        found[language] = Translation(
            _text(words["title"], f"{at}.title"),
            _text(words.get("description", ""), f"{at}.description", allow_empty=True),
            {q.id: _wording(questions[q.id], q, f"{at}.questions.{q.id}")
             for q in survey.questions})
    return found


def _every(data: Any, names: Sequence[str], where: str, what: str, missing: str
           ) -> Mapping[str, Any]:
    """A table with exactly one entry per name: SurveyError naming the first not expected, or
    the first missing (`missing`, formatted with its name)."""
    if not isinstance(data, Mapping):
        raise _fail(where, f"must be a table/object, got {type(data).__name__}")
    extra = sorted(map(str, data.keys() - set(names)))
    if extra:
        raise _fail(f"{where}.{extra[0]}", f"no {what} {extra[0]!r} in this survey")
    absent = [name for name in names if name not in data]
    if absent:
        raise _fail(where, missing.format(name=absent[0]))
    return data


def _wording(data: Any, question: Question, where: str) -> Wording:
    """A question's Wording in another language: text, and the hint, options and unit exactly
    when the question has them (a yes_no question's options are the form's own words)."""
    unit = getattr(question.scheme, "unit", None)
    named = question.type in ("choice", "multi_select")
    required = {"text"} | ({"hint"} if question.hint else set()) | (
        {"options"} if named else set()) | ({"unit"} if unit else set())
    data = _keys(data, where, required, set())
    options = ()
    if named:
        options = _options({"options": data["options"]}, question.type, where)
        if len(options) != len(question.options):
            raise _fail(f"{where}.options", f"needs {len(question.options)} options, in the "
                        f"order of the question's own, got {len(options)}")
    if unit:
        unit = _text(data["unit"], f"{where}.unit")
    return Wording(_text(data["text"], f"{where}.text"),
                   _text(data["hint"], f"{where}.hint") if question.hint else None,
                   options, unit)


def parse_definition(data: Any) -> Survey:
    """Validate a researcher's survey definition (already parsed from TOML or JSON), with the
    rules of this release for new surveys (check_instantaneous, at most crosstab.MAX_CELLS
    cells per declared cross-tab, no public results with an openly answered question)."""
    survey = _survey(data)
    for question in survey.questions:
        check_instantaneous(question)
    if survey.opened and survey.public_results:
        raise _fail("survey.public_results", f"must be false: question {survey.opened[0]!r} is "
                    "answered openly, and public results could single a respondent out")
    for index, (rows, cols) in enumerate(survey.crosstabs):
        problem = size_problem(len(survey.question(rows).options), len(survey.question(cols).options))
        if problem:
            raise _fail(f"survey.crosstabs[{index}]", problem)
    return survey


def _survey(data: Any) -> Survey:
    """A survey from its definition's fields, as every manifest format reads them."""
    data = _keys(data, "survey", {"title", "questions"},
                 {"description", "max_epsilon", "invitation_only", "public_results",
                  "release_batch", "crosstabs", "languages", "translations", "form_origins"})
    questions = data["questions"]
    if not isinstance(questions, list) or not 1 <= len(questions) <= MAX_QUESTIONS:
        raise _fail("survey.questions", f"needs a list of 1 to {MAX_QUESTIONS} questions")
    seen: set[str] = set()
    parsed = tuple(_question(q, i, seen) for i, q in enumerate(questions))
    max_epsilon = data.get("max_epsilon")
    if max_epsilon is not None:
        max_epsilon = _number(max_epsilon, "survey.max_epsilon")
        if max_epsilon <= 0:
            raise _fail("survey.max_epsilon", f"must be > 0, got {max_epsilon!r}")
    survey = Survey(
        title=_text(data["title"], "survey.title"),
        description=_text(data.get("description", ""), "survey.description", allow_empty=True),
        questions=parsed,
        max_epsilon=max_epsilon,
        invitation_only=_flag(data.get("invitation_only", False), "survey.invitation_only"),
        public_results=_flag(data.get("public_results", False), "survey.public_results"),
        release_batch=_count(data.get("release_batch", DEFAULT_RELEASE_BATCH),
                             "survey.release_batch", 1, MAX_RELEASE_BATCH),
        crosstabs=_crosstabs(data.get("crosstabs", []), parsed),
        languages=_languages(data.get("languages", [DEFAULT_LANGUAGE])),
        form_origins=_form_origins(data.get("form_origins", [])),
    )
    survey = replace(survey, translations=_translations(data.get("translations", {}), survey))
    if max_epsilon is not None and exceeds(survey.total_epsilon, max_epsilon):
        raise _fail("survey.max_epsilon", f"the questions add up to epsilon "
                    f"{survey.total_epsilon:.6g}, above the survey's ceiling {max_epsilon:.6g}: "
                    f"lower the questions' epsilon by {survey.total_epsilon - max_epsilon:.6g} "
                    "in all, or raise max_epsilon")
    return survey


def read_definition(path: str | Path) -> dict[str, Any]:
    """Parse a definition file, unvalidated: TOML, or JSON when the name ends in .json."""
    path = Path(path)
    return decode_definition(path.read_bytes(), path.name)


def decode_definition(raw: bytes, name: str) -> dict[str, Any]:
    """Parse the bytes of a definition file called `name`, unvalidated: TOML, or JSON when the
    name ends in .json. SurveyError names the file and the problem."""
    try:
        if name.endswith(".json"):
            return strict_json.loads(raw)
        return tomllib.loads(raw.decode())
    except (ValueError, tomllib.TOMLDecodeError) as exc:  # UnicodeDecodeError is a ValueError
        raise SurveyError(f"{name}: {exc}") from None


def load_definition(path: str | Path) -> Survey:
    """Read and validate a definition file."""
    return parse_definition(read_definition(path))


def parse_manifest(raw: bytes) -> Survey:
    """Parse published manifest bytes. Stated epsilons are recomputed from alpha and beta and
    must agree within the shared tolerance; callers use the recomputed values, never the stated.
    """
    try:
        data = strict_json.loads(raw)
    except ValueError as exc:
        raise SurveyError(f"manifest: {exc}") from None
    fields = {"format", "survey_id", "key_id", "title", "description", "max_epsilon",
              "invitation_only", "public_results", "questions", "total_epsilon"}
    version = data.get("format") if isinstance(data, Mapping) else None
    if isinstance(version, str) and version not in FORMATS:
        raise _fail("manifest.format", f"unsupported format {version[:60]!r}: this release "
                    f"reads up to {MANIFEST_FORMAT}; a newer ldp-survey may read it")
    batched = version in FORMATS[:FORMATS.index(FORMAT_2) + 1]
    fields |= {"release_batch"} if batched else set()
    fields |= {"crosstabs"} if version in FORMATS[:FORMATS.index(FORMAT_4) + 1] else set()
    fields |= {"origin"} if version in FORMATS[:FORMATS.index(FORMAT_5) + 1] else set()
    worded = version in (MANIFEST_FORMAT, FORMAT_8)
    fields |= {"languages", "translations"} if worded else set()
    fields |= {"form_origins"} if version == MANIFEST_FORMAT else set()
    signed_form = {"form"} if worded else set()  # a published survey's
    data = _keys(data, "manifest", fields, signed_form)
    if data["format"] not in FORMATS:
        raise _fail("manifest.format", f"unsupported format {data['format']!r}")
    question_fields = {FORMAT_5: {"concept", "irr_alpha"},
                       FORMAT_4: {"concept", "irr_alpha"}, FORMAT_3: {"concept", "irr_alpha"},
                       FORMAT_2: {"concept"}}
    required = {"id", "text", "type", "options", "alpha", "beta", "epsilon"}
    if version in (MANIFEST_FORMAT, FORMAT_8, FORMAT_7, FORMAT_6):  # with their mechanisms' fields
        required = {"id", "text", "type"}  # epsilon: on every question but an open one
        question_fields[version] = {MANIFEST_FORMAT: QUESTION_FIELDS | {"hint"},
                                    FORMAT_8: QUESTION_FIELDS | {"hint"},
                                    FORMAT_7: QUESTION_FIELDS_7, FORMAT_6: QUESTION_FIELDS_6}[version]
    definition = {key: data[key] for key in ("title", "description", "invitation_only",
                                             "public_results")}
    definition["release_batch"] = data["release_batch"] if batched else 1
    for key in ("crosstabs", "languages", "translations", "form_origins"):
        if key in fields:
            definition[key] = data[key]
    if data["max_epsilon"] is not None:
        definition["max_epsilon"] = data["max_epsilon"]
    stated = []
    definition["questions"] = []
    for index, q in enumerate(data["questions"] if isinstance(data["questions"], list) else []):
        q = _keys(q, f"questions[{index}]", required, question_fields.get(version, set()))
        if q.get("disclosed") is True:  # open: no epsilon stated (_open refuses one)
            stated.append(None)
            definition["questions"].append(dict(q))
            continue
        if "epsilon" not in q:
            raise _fail(f"questions[{index}]", "missing field 'epsilon'")
        stated.append(_number(q["epsilon"], f"questions[{index}].epsilon"))
        definition["questions"].append({k: v for k, v in q.items() if k != "epsilon"})
    survey = _survey(definition)
    for question, eps in zip(survey.questions, stated, strict=True):
        needs = (FORMAT_8 if question.scheme.name in SCHEMES_SINCE_8 else FORMAT_7
                 if question.scheme.name in SCHEMES_SINCE_7 else None)
        if needs and FORMATS.index(version) > FORMATS.index(needs):
            raise _fail(f"question {question.id!r}.mechanism", f"{question.scheme.name} "
                        f"needs format {needs}, not {version}")
        if eps is not None and _disagree(eps, question.epsilon, question.scheme.nominal_epsilon):
            raise _fail(f"question {question.id!r}.epsilon", f"states {eps!r} but its "
                        f"parameters give {question.epsilon!r}")
    nominal_total = total_epsilon(q.scheme.nominal_epsilon for q in survey.questions)
    if _disagree(_number(data["total_epsilon"], "manifest.total_epsilon"), survey.total_epsilon,
                 nominal_total):
        raise _fail("manifest.total_epsilon", "does not equal the sum of the questions' epsilon")
    for key in ("survey_id", "key_id"):
        _text(data[key], f"manifest.{key}")
    return replace(survey, survey_id=data["survey_id"], key_id=data["key_id"],
                   origin=_origin(data["origin"]) if "origin" in fields else None,
                   form=_form(data["form"]) if "form" in data else None)


def _form(value: Any) -> dict[str, str]:
    """A manifest's form digests (form_integrity.parse_form)."""
    try:
        return form_integrity.parse_form(value)
    except ValueError as exc:
        raise _fail("manifest.form", str(exc)) from None


def _origin(value: Any, where: str = "manifest.origin") -> str:
    """A manifest's origin: exactly a web origin as web_origin writes it."""
    _text(value, where)
    try:
        canonical = web_origin(value)
    except ValueError:
        canonical = None
    if canonical != value:
        raise _fail(where, f"must be a web origin such as https://survey.example.org (scheme, "
                    f"host in lower case and port only: no path, not even a final /), got "
                    f"{value!r}")
    return value


def _disagree(stated: float, realized: float, nominal: float) -> bool:
    """Whether a stated epsilon matches neither the realized one (published since 0.2) nor the
    nominal formula's (published before)."""
    return all(abs(stated - computed) > EPSILON_TOLERANCE * max(1.0, abs(computed))
               for computed in (realized, nominal))
