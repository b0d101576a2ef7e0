"""The R export (.R): NAME.R, a script, and NAME-data.csv beside it, the rows it reads.

The CSV holds the columns of the plain CSV, an answer as its option's code and every other
column as the number the plain CSV holds (a randomized number's unbiased value, bits, seeds,
groups), one row per response in the export's random order. The script reads it with
`read.csv`, turns each answer column into a factor labelled with its options (each column
labelled with its question's text, `attr(x, "label")`, as haven does), and builds `design`:
per question its scheme's parameters (scheme.design) and, where a package models the design,
the arguments it takes:
- rr (Blair, Imai and Zhou 2015), `rrreg(..., design = "forced-known", p, p1, p0)` for a
  yes/no question randomized by forced response: p = alpha, p1 = (1 - alpha) beta_yes,
  p0 = (1 - alpha) beta_no (the composed layers for a concept question);
- RRreg (Heck and Moshagen 2018), `RRuni(..., model = "FR", p)` for a yes/no or choice
  question randomized by forced response, p[j] = (1 - alpha) beta[j], the chance of being
  made to answer option j; `model = "CDMsym"` with its four probabilities and the group column
  for cheating detection.
The script is ASCII (other characters as \\u escapes), so it runs in any locale."""

import csv
import json
from collections.abc import Iterable
from pathlib import Path

from ldpsurvey.cli.export_files import Column


def data_path(script: str) -> Path:
    """The CSV beside the script: NAME.R -> NAME-data.csv."""
    path = Path(script)
    return path.with_name(f"{path.stem}-data.csv")


def write_r(path: str, book: dict, parameters: dict, book_columns: list[Column],
            rows: Iterable[list]) -> int:
    """The script at `path` and its CSV beside it; the number of rows."""
    data = data_path(path)
    with open(data, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([c.name for c in book_columns])
        count = 0
        for row in rows:
            writer.writerow([_number(cell) for cell in row])
            count += 1
    with open(path, "w", encoding="ascii") as out:
        out.write(script(book, parameters, book_columns, Path(path).name, count))
    return count


def script(book: dict, parameters: dict, book_columns: list[Column], name: str,
           count: int) -> str:
    """The R script called `name`, which reads data_path(name) beside it."""
    here = _comment(name)
    lines = [
        f"# ldp-survey export of survey {book['survey_id']}, {_comment(book['title'])}:",
        f"# {count} responses, one row each, in random order. Every answer is a randomized",
        "# report, not the true answer (except questions answered openly): estimate with",
        f"# `design`. Run it where it lies: Rscript {here}, or source({here}, chdir = TRUE).",
        f"responses <- read.csv({_string(data_path(name).name)}, check.names = FALSE)",
    ]
    for column in book_columns:
        target = f"responses[[{_string(column.name)}]]"
        if column.codes:
            codes, labels = zip(*sorted(column.options.items()), strict=True)
            lines.append(f"{target} <- factor({target}, levels = {_vector(codes)}, "
                         f"labels = {_vector(labels)})")
        lines.append(f"attr({target}, \"label\") <- {_string(column.label)}")
    lines += [
        "# rr and RRreg take an answer as its code (a yes/no question: 1 = Yes):",
        "codes <- function(answer) as.integer(answer) - 1L",
        "# e.g. rr::rrreg(QID ~ 1, data = data.frame(QID = codes(responses$QID)),",
        "#   p = design$QID$rr$p, p1 = design$QID$rr$p1, p0 = design$QID$rr$p0,",
        "#   design = design$QID$rr$design)",
        "# RRreg::RRuni(codes(responses$QID), model = \"FR\", p = design$QID$RRreg$p)",
        "design <- list(",
        ",\n".join(f"  {_name(q['id'])} = list(\n" + ",\n".join(
            f"    {_name(key)} = {_r(value)}"
            for key, value in _design(q, parameters[q["id"]]).items()) + ")"
            for q in book["questions"]),
        ")", ""]
    return "\n".join(lines)


def _design(question: dict, design: dict) -> dict:
    """A question's design with the arguments rr and RRreg take, where they model it."""
    scheme = ("disclosed" if question.get("disclosed") else
              question.get("mechanism", question.get("design", "forced_response")))
    design = {"scheme": scheme, **design}
    if scheme == "forced_response":
        if "rr_forced_known" in design:
            design["rr"] = {"design": "forced-known", **design["rr_forced_known"]}
        design["RRreg"] = {"model": "FR",
                           "p": [(1 - design["alpha"]) * b for b in design["beta"]]}
    elif scheme == "cheating_detection":
        design["RRreg"] = {"model": "CDMsym", "p": design["rrreg_cdmsym_p"],
                           "group": f"{question['id']}_group"}
    return design


def _r(value) -> str:
    """A JSON value as R: an object a named list, a list of numbers or strings a vector,
    any other list a list, null NULL."""
    if isinstance(value, dict):
        return "list(" + ", ".join(f"{_name(k)} = {_r(v)}" for k, v in value.items()) + ")"
    if isinstance(value, list):
        if value and (all(isinstance(v, str) for v in value) or all(
                isinstance(v, int | float) and not isinstance(v, bool) for v in value)):
            return _vector(value)
        return "list(" + ", ".join(_r(v) for v in value) + ")"
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return _string(value)
    return repr(float(value)) if isinstance(value, float) else str(value)


def _vector(values) -> str:
    return "c(" + ", ".join(_r(v) for v in values) + ")"


R_RESERVED = {"if", "else", "repeat", "while", "function", "for", "next", "break", "in",
              "TRUE", "FALSE", "NULL", "Inf", "NaN", "NA"}


def _name(key: str) -> str:
    """A list element's name: as is if R takes it bare, else in backquotes."""
    bare = key.replace("_", "").isalnum() and key[0].isalpha() and key not in R_RESERVED
    return key if bare else f"`{key}`"


def _string(text: str) -> str:
    """An R string literal in ASCII: JSON's escapes (\\" \\\\ \\n \\t), which R reads alike,
    and every other character as R's \\U{hex} escape."""
    quoted = json.dumps(text, ensure_ascii=False)
    return "".join(c if c.isascii() else f"\\U{{{ord(c):x}}}" for c in quoted)


def _comment(text: str) -> str:
    """Text on one line of an R comment, in ASCII."""
    return json.dumps(" ".join(text.split()))


def _number(value: int | float) -> str:
    """A cell as the plain CSV writes it: whole numbers without a decimal point."""
    return str(int(value)) if float(value).is_integer() else repr(value)
