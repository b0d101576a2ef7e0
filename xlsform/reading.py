"""An XLSForm read into a survey definition, through pyxform, the reference implementation
(it validates the form as ODK and KoboToolbox would, resolves type and column aliases and
the choice lists); then each row is mapped, or refused with the reason a randomized survey
cannot take it.

Mapped: `select_one` (a yes/no question when its two choices are yes and no, names and
labels, else a choice question), `select_multiple` (a multi-select, with `count-selected(.)
<= N` as max_selected), `integer` and `decimal` with the constraint `. >= A and . <= B` (a
number from A to B), a `note` before the first question (the introduction), `hint` (the
question's hint), `required` yes or no (every ldp-survey question is answered), the survey-file
fields of a question as extra columns (cells.py), the settings' `form_title` and the
survey-file fields of a survey. Columns in several languages (`label::French (fr)`, `hint::`,
`unit::`, the settings' `translated_title::`) become `languages` (the settings' `default_language`
first, else the first label column's) and `translations.<tag>`, the tag the code in
parentheses (languages.py). Metadata the form would record on its own
(start, end, today, deviceid, username, ...) is not asked, and said so. Everything else (free
text, groups, repeats, calculations, relevance, defaults, choice filters, media, other
constraints, a language column without a code, a text missing in one language) is refused,
one line per row.
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyxform.errors import PyXFormError
from pyxform.question_type_dictionary import QUESTION_TYPE_DICT
from pyxform.xls2json import workbook_to_json
from pyxform.xls2json_backends import get_xlsform

from ldpsurvey.shared import SurveyError, parse_definition
from ldpsurvey.shared.survey.manifest import DEFAULT_LANGUAGE, QUESTION_FIELDS, QUESTION_ID
from ldpsurvey.xlsform import cells, languages

SELECT_ONE = "select one"
SELECT_MULTIPLE = "select all that apply"
NUMBERS = ("integer", "decimal")
NOTE = "note"
SECTIONS = ("group", "repeat", "loop")
# A question's survey-file fields read from extra columns of the same name; the rest come
# from the row's type, choices and constraint.
PARAMETERS = QUESTION_FIELDS - {"options", "min", "max", "max_selected"}
SURVEY_SETTINGS = ("max_epsilon", "invitation_only", "public_results", "release_batch",
                   "crosstabs", "form_origins")
ASKS = "ldp-survey asks select_one, select_multiple, integer and decimal questions"
TYPE_REASONS = {
    "text": "a free-text answer cannot be randomized: ask it as select_one with choices",
    "calculate": "a calculation reads answers on the device, and ldp-survey sends none but "
                 "randomized ones",
    "group": "an ldp-survey form is one list of questions, without pages or conditions: delete "
             "its begin_group and end_group rows (its questions are read on their own)",
    "repeat": "a repeated question is answered a varying number of times, each answer costing "
              "epsilon again: ask it once",
    "loop": "a loop asks the same questions again, each answer costing epsilon again",
    "range": "ask a number as integer or decimal with the constraint . >= A and . <= B",
}
BIND_REASONS = {
    "relevant": "a question asked only after some answers tells those answers by being "
                "answered: ask every question of everyone",
    "calculate": "a calculation reads answers on the device",
    "readonly": "a read-only question asks nothing",
}
# Read elsewhere (constraint) or messages of the form's own (by their columns' names).
BIND_IGNORED = {"constraint": None, "jr:constraintMsg": "constraint_message",
                "jr:requiredMsg": "required_message", "jr:noAppErrorString": "no_app_error_string"}
KEY_REASONS = {
    "default": "a default answer would be sent by whoever does not change it",
    "choice_filter": "choices filtered by another answer tell that answer",
    "trigger": "a value set by another answer reads that answer on the device",
    "media": "ldp-survey shows text only: put what the image or sound says in the label",
    "parameters": "ldp-survey shows the choices as listed, in one order for everyone",
}
# pyxform's keys for the columns read here (type, name, label, ...; bind holds required and
# constraint, control the appearance): any other key is a column this import does not use.
READ_KEYS = {"type", "name", "label", "hint", "bind", "control", "parameters", "itemset",
             "list_name", "choices", "children"}
PIPED = re.compile(r"\$\{[^}]*\}")


class FormRefused(ValueError):
    """The form holds rows a randomized survey cannot take: `lines`, one per problem."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


@dataclass(frozen=True)
class Imported:
    """A survey definition read from an XLSForm, valid (parse_definition), and what was left
    out on the way (metadata not asked, columns not used), one line each."""

    definition: dict[str, Any]
    notes: tuple[str, ...]


def read_form(path: str | Path, epsilon: float | None = None) -> Imported:
    """The survey definition of the XLSForm at `path`. A question whose row gives neither an
    epsilon, an alpha nor groups, and is not disclosed, takes `epsilon` (refused if None).
    FormRefused lists every row it cannot take, or the survey check's refusal."""
    warnings: list[str] = []
    try:
        workbook = get_xlsform(str(path))
        rows = _rows(workbook.survey or [])
        form = workbook_to_json(workbook, fallback_form_name=workbook.fallback_form_name,
                                warnings=warnings)
    except PyXFormError as exc:
        raise FormRefused([f"{Path(path).name}: {' '.join(str(exc).split())}"]) from None
    names, refusals = _languages(form)
    reader = _Reader(rows, names, epsilon)
    reader.read(form["children"])
    titles = _titles(form, names, reader.notes)
    definition = {"title": titles[0]}
    if reader.introduction:
        definition["description"] = "\n\n".join(texts[0] for texts in reader.introduction)
    for key in SURVEY_SETTINGS:
        if key in form:
            definition[key] = cells.value(form[key], key)
    definition["questions"] = reader.questions
    tags = [languages.tag(name) or DEFAULT_LANGUAGE for name in names]
    if tags != [DEFAULT_LANGUAGE]:
        definition["languages"] = tags
    if len(tags) > 1:
        definition["translations"] = {tag: {
            "title": titles[index],
            **({"description": "\n\n".join(texts[index] for texts in reader.introduction)}
               if reader.introduction else {}),
            "questions": {qid: words[index] for qid, words in reader.wordings.items()}}
            for index, tag in enumerate(tags) if index}
    refusals = refusals or reader.refusals
    if not refusals:
        try:
            parse_definition(definition)
        except SurveyError as exc:
            refusals = [f"the survey would not pass survey check: {exc}"]
    if refusals:
        raise FormRefused(refusals)
    notes = [f"pyxform: {' '.join(w.split())}" for w in warnings] + reader.notes
    if reader.unused:
        notes.append(f"not used: {', '.join(sorted(reader.unused))} (ldp-survey's form lays "
                     "out and words its questions and messages itself)")
    return Imported(definition, tuple(notes))


def _rows(survey: list[dict[str, str]]) -> dict[str, list[tuple[int, str]]]:
    """Per name, the (row number, type as written) of each survey-sheet row that has it, in
    order (pyxform keeps blank rows in place, so the first data row is row 2)."""
    rows: dict[str, list[tuple[int, str]]] = {}
    for number, row in enumerate(survey, start=2):
        columns = {key.strip().lower(): cell for key, cell in row.items()}
        name = next((columns[k] for k in ("name", "value", "tag") if columns.get(k)), None)
        kind = next((columns[k] for k in ("type", "command") if columns.get(k)), "")
        rows.setdefault(name or f"generated_note_name_{number}", []).append((number, kind))
    return rows


def _languages(form: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The form's languages as pyxform names them (`French (fr)`), the settings'
    `default_language` first, else the first label column's ([NO_LANGUAGE] when its labels name
    none); and the refusal of each language column without a code."""
    found: dict[str, None] = {}

    def visit(element: dict[str, Any]) -> None:
        for key in ("label", "hint"):
            if isinstance(element.get(key), dict):
                found.update(dict.fromkeys(element[key]))
        for child in (*element.get("children", ()), *element.get("choices", ())):
            visit(child)

    for child in form["children"]:  # the form's own "choices" are its questions' again
        visit(child)
    names = list(found) or [languages.NO_LANGUAGE]
    default = form.get("default_language")
    if default in names:
        names.remove(default)
        names.insert(0, default)
    if names == [languages.NO_LANGUAGE]:
        return names, []
    return names, [
        f"label::{name}: a language column needs its code, as label::French (fr) (the survey "
        "file names each language by it)" if name != languages.NO_LANGUAGE else
        "label: a column without a language beside others in a language: name it, as "
        "label::English (en), or give its name in the settings' default_language"
        for name in names if languages.tag(name) is None]


def _titles(form: dict[str, Any], names: list[str], notes: list[str]) -> list[str]:
    """The form's title in each language: the settings' `translated_title::Language (code)`
    (pyxform turns a `form_title::` column into no XForm), else its form_title, said in a note
    for each other language."""
    title = form["title"] if isinstance(form["title"], dict) else {
        languages.NO_LANGUAGE: form["title"]}
    title |= form.get("translated_title") or {}
    default = title.get(names[0]) or title.get(languages.NO_LANGUAGE) or ""
    for name in names[1:]:
        if not title.get(name):
            notes.append(f"settings: no translated_title::{name}: that language's title is "
                         "the form_title")
    return [default, *(title.get(name) or default for name in names[1:])]


class _Reader:
    """The walk over pyxform's elements, in row order: questions, their words in each
    language, introduction, refusals."""

    def __init__(self, rows: dict[str, list[tuple[int, str]]], names: list[str],
                 epsilon: float | None):
        self.rows, self.names, self.epsilon = rows, names, epsilon
        self.questions: list[dict[str, Any]] = []
        self.wordings: dict[str, list[dict[str, Any]]] = {}  # per id, a Wording per language
        self.introduction: list[list[str]] = []  # per note, its text per language
        self.refusals: list[str] = []
        self.notes: list[str] = []
        self.unused: set[str] = set()  # columns (pyxform's keys) read from no row

    def read(self, children: list[dict[str, Any]]) -> None:
        for element in children:
            if element.get("control", {}).get("bodyless"):
                continue  # pyxform's own meta group (instanceID), in no row
            self.element(element)
            if element["type"] in SECTIONS:
                self.read(element.get("children", []))

    def where(self, element: dict[str, Any]) -> str:
        """`row N: name (type as written)`."""
        name = element["name"]
        found = self.rows.get(name) or [(None, element["type"])]
        number, kind = found.pop(0) if len(found) > 1 else found[0]
        shown = "" if name.startswith("generated_note_name_") else f" {name}"
        return f"row {number if number is not None else '?'}:{shown} ({kind})"

    def element(self, element: dict[str, Any]) -> None:
        kind, where = element["type"], self.where(element)
        if "jr:preload" in QUESTION_TYPE_DICT.get(kind, {}).get("bind", {}):
            self.notes.append(f"{where}: not asked: ldp-survey records no time, device or "
                              "account of a respondent")
            return
        if kind not in (NOTE, SELECT_ONE, SELECT_MULTIPLE, *NUMBERS):
            reason = TYPE_REASONS.get(kind, f"cannot be randomized: {ASKS}")
            self.refusals.append(f"{where}: {reason}")
            return
        problems = [*self.column_problems(element)]
        self.unused |= {*element.get("control", {}), *(set(element) - READ_KEYS - PARAMETERS
                                                         - set(KEY_REASONS))}
        self.unused |= {BIND_IGNORED[key] for key in element.get("bind", {})
                        if BIND_IGNORED.get(key)}
        if kind == NOTE:
            if self.questions:
                problems.append("a note between or after questions: ldp-survey shows text "
                                "only above them (the introduction): move it before the "
                                "first question")
            texts = self.texts(element, problems)
            if not problems:
                self.introduction.append(texts)
        else:
            question, words = self.question(element, kind, problems)
            if not problems:
                self.questions.append(question)
                self.wordings[question["id"]] = words
        self.refusals.extend(f"{where}: {problem}" for problem in problems)

    def column_problems(self, element: dict[str, Any]):
        """What the row's other columns ask that a randomized survey cannot do."""
        for key, value in element.get("bind", {}).items():
            if key == "required":
                if cells.flag(value) is None:
                    yield (f"required {value!r}: a condition reads other answers on the "
                           "device (every ldp-survey question is answered)")
            elif key not in BIND_IGNORED:
                yield f"{key}: {BIND_REASONS.get(key, 'ldp-survey cannot do this')}"
        for key, reason in KEY_REASONS.items():
            if element.get(key):
                yield f"{key}: {reason}"

    def texts(self, element: dict[str, Any], problems: list[str], key: str = "label",
              of: str = "") -> list[str]:
        """The element's label (or hint, or unit) in each language, in order; a problem if it
        has no label, a text missing in one language while another has it, or a text showing
        another answer (${name}). `of` names a choice in the problems."""
        value = element.get(key) or ""
        value = value if isinstance(value, dict) else {self.names[0]: value}
        texts = [value.get(name) or "" for name in self.names]
        if key == "label" and not any(t.strip() for t in texts):
            problems.append(f"{of}needs a label (what respondents read)")
        elif any(t.strip() for t in texts):
            problems.extend(f"{of}no {key} in {name}"
                            for name, t in zip(self.names, texts, strict=True) if not t.strip())
        piped = next((PIPED.search(t) for t in texts if PIPED.search(t)), None)
        if piped:
            problems.append(f"{key} {piped.group()}: shows another answer, which the form "
                            "never does")
        return texts

    def question(self, element: dict[str, Any], kind: str,
                 problems: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The question's survey-file fields, and its Wording (text, hint, options, unit) in
        each language."""
        qid = re.sub(r"[-.]", "_", element["name"].lower())
        if not QUESTION_ID.fullmatch(qid):
            problems.append("a name of lower-case letters, digits and _ (at most 40, first a "
                            "letter) is needed: it names the question's column in exports")
        texts, hints = self.texts(element, problems), self.texts(element, problems, "hint")
        words = [{"text": text, **({"hint": hint} if hint else {})}
                 for text, hint in zip(texts, hints, strict=True)]
        question: dict[str, Any] = dict(id=qid, **words[0])
        constraint = element.get("bind", {}).get("constraint")
        if kind in NUMBERS:
            bounds = cells.parse_range(constraint or "")
            if bounds is None:
                problems.append(f"constraint {constraint!r}: a number needs exactly the range "
                                ". >= A and . <= B" if constraint else "a number needs a range: "
                                "add the constraint . >= A and . <= B")
            else:
                question |= {"type": "numeric", "min": bounds[0], "max": bounds[1]}
            units = self.texts(element, problems, "unit")
            if units[0]:
                words = [w | {"unit": unit} for w, unit in zip(words, units, strict=True)]
        else:
            fields, options = self.options(element, kind, constraint, problems)
            question |= fields
            if options:
                words = [w | {"options": labels} for w, labels in zip(words, options, strict=True)]
        question |= {key: cells.value(element[key], key) for key in sorted(PARAMETERS)
                     if key in element and not isinstance(element[key], dict)}
        if "unit" in words[0]:  # from `unit::Language (code)` columns, a dict by language
            question.setdefault("unit", words[0]["unit"])
        if not ({"epsilon", "alpha", "groups"} & question.keys() or question.get("disclosed")):
            if self.epsilon is None:
                problems.append("no epsilon: give it in an epsilon column, or --epsilon for "
                                "every question without one")
            question["epsilon"] = self.epsilon
        return question, words

    def options(self, element: dict[str, Any], kind: str, constraint: str | None,
                problems: list[str]) -> tuple[dict[str, Any], list[list[str]]]:
        """A select's type and options (and max_selected from count-selected(.) <= N), and its
        options in each language (none for yes/no, whose words are the form's own)."""
        choices = element.get("choices", [])
        names = [str(choice.get("name", "")).lower() for choice in choices]
        first = [self.texts(choice, [])[0] for choice in choices]
        if (kind == SELECT_ONE and sorted(names) == ["no", "yes"]
                and [label.lower() for label in first] == names):
            if constraint:
                problems.append(f"constraint {constraint!r}: a select_one question takes none")
            return {"type": "yes_no"}, []
        labels = [self.texts(choice, problems, of=f"choice {name!r}: ")
                  for name, choice in zip(names, choices, strict=True)]
        options = [list(words) for words in zip(*labels, strict=True)] or [[] for _ in self.names]
        if kind == SELECT_ONE:
            if constraint:
                problems.append(f"constraint {constraint!r}: a select_one question takes none")
            return {"type": "choice", "options": options[0]}, options
        fields: dict[str, Any] = {"type": "multi_select", "options": options[0]}
        if constraint:
            most = cells.parse_count_selected(constraint)
            if most is None:
                problems.append(f"constraint {constraint!r}: a select_multiple question takes "
                                "only count-selected(.) <= N")
            fields["max_selected"] = most
        return fields, options
