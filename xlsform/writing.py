"""A survey definition written as an XLSForm (openpyxl): what `read_form` reads back as the
same definition, and pyxform accepts.

A survey sheet with a row per question (a `note` first for the description), a choices sheet
(`yes_no` for yes/no questions, `<id>_options` for the others, named by the option codes
ldp-survey's exports use: 0, 1, ...) and a settings sheet (`form_title`, `form_id`, and the
survey file's other survey fields). A number's min and max become the constraint
`. >= min and . <= max` (type decimal; integer when disclosed, which is asked as a whole
number), max_selected the constraint `count-selected(.) <= N`, and every other field of a
question a column of its own name (cells.py spells the values). A survey in another language
than English alone has its texts in `label::French (fr)` columns, one per language (and
`hint::`, `unit::`, the settings' `translated_title::`, as pyxform builds no XForm
from a `form_title::` column), its first language the settings'
`default_language`; else plain `label` and `hint` columns.
"""

import re
from pathlib import Path
from typing import Any

from openpyxl import Workbook

from ldpsurvey.shared.survey.manifest import DEFAULT_LANGUAGE
from ldpsurvey.xlsform import cells, languages
from ldpsurvey.xlsform.reading import PARAMETERS, SURVEY_SETTINGS

YES_NO = [("no", "No"), ("yes", "Yes")]
FIRST_COLUMNS = ("epsilon", "mechanism", "disclosed", "alpha", "beta", "unit")
WORDED = {"text": "label", "hint": "hint", "unit": "unit"}  # a wording's field: its column
STRUCTURE = {"id", "text", "hint", "type", "options", "min", "max", "max_selected"}


def write_form(definition: dict[str, Any], path: str | Path) -> None:
    """Write the (valid) survey `definition` to `path` as an .xlsx XLSForm."""
    questions = definition["questions"]
    tags = definition.get("languages", [DEFAULT_LANGUAGE])
    translations = definition.get("translations", {})
    named = tags != [DEFAULT_LANGUAGE]
    # a column `key` in each language: `key::French (fr)`, or `key` alone in English alone
    columns = {tag: (lambda key, tag=tag: f"{key}::{languages.column_name(tag)}") if named
               else (lambda key: key) for tag in tags}

    def words(tag: str) -> dict[str, Any]:
        """The survey's texts in `tag`: title, description, questions' wordings by id."""
        if tag == tags[0]:
            return {**definition, "questions": {q["id"]: q for q in questions}}
        return translations[tag]

    texts = {tag: words(tag) for tag in tags}
    rows, choices = [], []
    if definition.get("description"):
        taken = {q["id"] for q in questions}
        name = next(n for n in ("introduction", "introduction_note", "about_this_survey")
                    if n not in taken)
        rows.append({"type": "note", "name": name} | {
            columns[tag]("label"): texts[tag]["description"] for tag in tags})
    for question in questions:
        row, options = _row(question)
        qid = question["id"]
        for tag in tags:
            wording = texts[tag]["questions"][qid]
            row |= {columns[tag](column): wording[key] for key, column in WORDED.items()
                    if key in wording and (named or key != "unit")}
            for option, label in zip(options, wording.get("options", ()), strict=False):
                option[columns[tag]("label")] = label
        rows.append(row)
        choices.extend(_labelled(options, tags, columns))
    used = {key for q in questions for key in q} - STRUCTURE - ({"unit"} if named else set())
    parameters = [*(c for c in FIRST_COLUMNS if c in used), *sorted(used - set(FIRST_COLUMNS))]
    worded = [columns[tag](key) for key in ("label", "hint", *(["unit"] if named else []))
              for tag in tags if any(columns[tag](key) in row for row in rows)]
    workbook = Workbook()
    survey = workbook.active
    survey.title = "survey"
    constrained = any("constraint" in row for row in rows)
    _sheet(survey, ["type", "name", *worded, *(["constraint"] if constrained else []),
                    *parameters], rows)
    if choices:
        _sheet(workbook.create_sheet("choices"),
               ["list_name", "name", *(columns[tag]("label") for tag in tags)],
               list({(c["list_name"], c["name"]): c for c in choices}.values()))
    settings = {"form_title": definition["title"], "form_id": _form_id(definition["title"])}
    if named:
        settings |= {columns[tag]("translated_title"): translations[tag]["title"]
                     for tag in tags[1:]}
        settings["default_language"] = languages.column_name(tags[0])
    settings |= {key: cells.text(definition[key], key) for key in SURVEY_SETTINGS
                 if key in definition}
    _sheet(workbook.create_sheet("settings"), list(settings), [settings])
    workbook.save(path)


def _labelled(options: list[dict[str, str]], tags: list[str], columns) -> list[dict[str, str]]:
    """Choice rows with a label in each language: yes/no's (the form's own words, translated by
    ldp-survey's form, not the file) keep their English label in every language column."""
    return [{**option, **{columns[tag]("label"): option["label"] for tag in tags
                          if columns[tag]("label") not in option}} for option in options]


def _row(question: dict[str, Any]) -> tuple[dict[str, str], list[dict[str, str]]]:
    """A question's survey-sheet row (without its texts), and its choices-sheet rows."""
    kind, qid = question["type"], question["id"]
    row = {"name": qid}
    row |= {key: cells.text(value, key) for key, value in question.items()
            if key in PARAMETERS}
    if kind == "numeric":
        whole = question.get("disclosed") is True
        return row | {"type": "integer" if whole else "decimal",
                      "constraint": cells.range_constraint(question["min"], question["max"])}, []
    if kind == "yes_no":
        return row | {"type": "select_one yes_no"}, [
            {"list_name": "yes_no", "name": name, "label": label} for name, label in YES_NO]
    list_name = f"{qid}_options"
    options = [{"list_name": list_name, "name": str(code)}
               for code in range(len(question["options"]))]
    if kind == "multi_select":
        row["type"] = f"select_multiple {list_name}"
        if "max_selected" in question:
            row["constraint"] = cells.count_selected_constraint(question["max_selected"])
        return row, options
    return row | {"type": f"select_one {list_name}"}, options


def _sheet(sheet, header: list[str], rows: list[dict[str, str]]) -> None:
    """Fill `sheet`: the header, then each row's cells under it, every cell text (a text that
    starts with = too, which openpyxl would otherwise store as a formula)."""
    sheet.append(header)
    for row in rows:
        sheet.append([row.get(column) for column in header])
        for cell in sheet[sheet.max_row]:
            if isinstance(cell.value, str):
                cell.data_type = "s"


def _form_id(title: str) -> str:
    """An XML name for the form's id, from its title (`survey` when it has no letters)."""
    slug = re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")
    return slug if re.match(r"[a-z]", slug) else f"survey_{slug}".rstrip("_")
