"""Exports for other tools: one row per response in random order, and a codebook saying what
each column and value means. The default CSV is plain (one header row, option labels or codes,
what `pandas.read_csv(path)` and R's `read.csv(path)` load with no options); the `rr` CSV keeps
the manifest and each question's design parameters in `#` comment lines, the form R's `rr`
package work starts from. Exports are generators of text pieces, so a response of any size
streams in constant memory."""

import csv
import io
import json
import re
from collections.abc import Iterable, Iterator, Mapping

from ldpsurvey.shared import Question, Survey
from ldpsurvey.shared.mechanisms.forced_response import NAME as FORCED_RESPONSE

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
PLAIN_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?(e[+-]?[0-9]+)?")


def spreadsheet_safe(text: str) -> str:
    """Text a spreadsheet opening a CSV will not run as a formula (OWASP, CSV injection): a
    leading = + - @ tab or carriage return gets a leading apostrophe, unless the whole text is
    a plain decimal number (-17.5, a numeric question's value), which no spreadsheet runs."""
    if text.startswith(FORMULA_STARTS) and not PLAIN_NUMBER.fullmatch(text):
        return f"'{text}"
    return text


def parameters(survey: Survey) -> dict[str, dict]:
    """Each question's design parameters (scheme.design)."""
    return {q.id: q.scheme.design() for q in survey.questions}


CHUNK_BYTES = 64 * 1024  # what each streamed piece of an export holds, about


CODEBOOK_FORMAT = "ldp-survey-codebook/1"


def to_csv(survey: Survey, answers: Iterable[str], codes: bool = False) -> Iterator[str]:
    """A header row of each question's columns (scheme.columns: its id, for forced response),
    then one row per released response (its stored canonical JSON `answers`): the cells of each
    report (scheme.cells: the option's label, or with `codes` its index) made spreadsheet_safe;
    quoted by the csv module (commas, quotes, newlines), in pieces."""
    yield from _pieces(_csv_lines([header(survey)], (
        [spreadsheet_safe(cell) for q in survey.questions
         for cell in q.scheme.cells(chosen[q.id], codes)] for chosen in map(json.loads, answers))))


def header(survey: Survey) -> list[str]:
    """The CSV's column names: each question's scheme.columns, in question order."""
    return [column for q in survey.questions for column in q.scheme.columns(q.id)]


def _csv_lines(*tables: Iterable[list[str]]) -> Iterator[str]:
    """Each row of each table as one CSV record (RFC 4180 quoting, `\n` line ends)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for table in tables:
        for row in table:
            writer.writerow(row)
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()


def to_rr_csv(survey: Survey, manifest: bytes, central: dict,
              answers: Iterable[str]) -> Iterator[str]:
    """`#` comment lines with the manifest, the parameters and the central epsilon
    (read.csv(comment.char = "#"), pandas.read_csv(comment="#")), then a header of question ids
    and one row per released response (its stored canonical JSON `answers`), in pieces."""
    head = io.StringIO()
    head.write(f"# ldp-survey export of survey {survey.survey_id}: one row per released "
               "response, random order; each cell a randomized report's code (each "
               "question's `cells` in the codebook says what its columns hold)\n")
    head.write(f"# manifest: {manifest.decode()}\n")
    head.write(f"# parameters: {json.dumps(parameters(survey), separators=(',', ':'))}\n")
    head.write(f"# central: {json.dumps(central, separators=(',', ':'))}\n")
    csv.writer(head, lineterminator="\n").writerow(header(survey))
    yield head.getvalue()
    yield from _pieces(",".join(cell for q in survey.questions  # numbers need no quoting
                                for cell in q.scheme.cells(chosen[q.id], True)) + "\n"
                       for chosen in map(json.loads, answers))


def to_jsonl(survey: Survey, manifest: bytes, central: dict,
             answers: Iterable[str]) -> Iterator[str]:
    """A first line {"manifest", "parameters", "central"}, then one {"answers": {...}} per
    released response (its stored canonical JSON, as is), in pieces."""
    head = {"manifest": json.loads(manifest), "parameters": parameters(survey),
            "central": central}
    yield json.dumps(head, separators=(",", ":")) + "\n"
    yield from _pieces(f'{{"answers":{stored}}}\n' for stored in answers)


VALUES = ("One row per released response, in random order; per question the columns its "
          "`columns` names (its id alone unless listed). What each of a question's cells holds "
          "is its `cells`, what its report is its `report`: for a yes/no or choice question "
          "randomized by forced response, a cell of the default CSV is its option's csv_value "
          "(the label, with a leading apostrophe where it would start a spreadsheet formula); "
          "with codes and in the rr CSV it is the option's code, in the JSON lines the report. "
          "Every value is a respondent's randomized report, not the true answer: estimate with "
          "the design parameters below. The exception: a question marked disclosed (answered "
          "openly) holds each respondent's answer as given, not randomized.")


def codebook(survey: Survey, central: dict, released: int, last_release: int,
             exported_at: str) -> dict:
    """What every export's columns and values mean: per question the manifest's fields (id,
    text, type, alpha, beta, epsilon; concept and irr_alpha for concept questions) with each
    option as {code, label, csv_value}; the survey's id, title, key id, release batch and total
    epsilon; the central epsilon (with what it assumes) over the `released` responses of
    releases up to `last_release` (0: none yet); and the time it was made (`exported_at`, UTC)."""
    questions = [{**q.as_dict(), **_columns(q), **_words(q), "options": [
        {"code": code, "label": label, "csv_value": spreadsheet_safe(label)}
        for code, label in enumerate(q.options + getattr(q.scheme, "placeholders", ()))]}
        for q in survey.questions]
    return {"format": CODEBOOK_FORMAT, "survey_id": survey.survey_id, "title": survey.title,
            "key_id": survey.key_id, "release_batch": survey.release_batch,
            "total_epsilon": survey.total_epsilon, "central": central, "released": released,
            "last_release": last_release, "exported_at": exported_at, "values": VALUES,
            "questions": questions}


def _words(question: Question) -> dict[str, str]:
    """What a question's report is and what its CSV cells hold, in words (scheme.design)."""
    design = question.scheme.design()
    return {"report": design["report"], "cells": design["cells"]}


def _columns(question: Question) -> dict[str, list[str]]:
    """A question's CSV columns when they are not just its id (OUE: one per option, ...)."""
    columns = question.scheme.columns(question.id)
    return {} if columns == [question.id] else {"columns": columns}


def codebook_markdown(book: Mapping) -> str:
    """The codebook as Markdown: the survey's fields, a table of questions and one of options.
    Free text is escaped (_markdown) so that no title or label can break a table or become
    markup or HTML where the file is rendered."""
    central = book["central"]
    fields = [("survey id", book["survey_id"]), ("title", _markdown(book["title"])),
              ("key id", book["key_id"]), ("release batch", book["release_batch"]),
              ("released responses", book["released"]),
              ("last release", book["last_release"]),
              ("total epsilon (local, per respondent)", book["total_epsilon"]),
              ("central epsilon per release", central["epsilon_per_release"]),
              ("central epsilon, whole survey", central["epsilon_whole_survey"]),
              ("central delta", central["delta"]),
              ("central epsilon assumes", _markdown(central["assumes"])),
              ("exported at (UTC)", book["exported_at"]), ("format", book["format"])]
    questions = [(q["id"], _markdown(q["text"]), q["type"], _mechanism(q),
                  q.get("alpha"), q.get("epsilon"), q.get("concept"), q.get("irr_alpha"),
                  ", ".join(q.get("columns", [q["id"]]))) for q in book["questions"]]
    cells = [(q["id"], _markdown(q["cells"]), _markdown(q["report"]))
             for q in book["questions"]]
    options = [(q["id"], o["code"], _markdown(o["label"]), _markdown(o["csv_value"]),
                _beta(q, o["code"])) for q in book["questions"] for o in q["options"]]
    return "\n".join([
        f"# Codebook: {_markdown(book['title'])}", "", book["values"], "",
        *_markdown_table(["field", "value"], fields), "", "## Questions", "",
        *_markdown_table(["id", "text", "type", "mechanism", "alpha", "epsilon", "concept",
                          "irr_alpha", "CSV columns"], questions), "", "## Cells", "",
        *_markdown_table(["question", "each cell holds (QID: the question id)", "report"],
                         cells), "", "## Options", "",
        *_markdown_table(["question", "code", "label", "CSV value", "beta"], options), ""])


def _beta(question: Mapping, code: int) -> float | None:
    """An option's forced-answer probability where the question has one per option (forced
    response); none for a placeholder or a mechanism without (bits has one beta for all)."""
    beta = question.get("beta")
    return beta[code] if isinstance(beta, list) and code < len(beta) else None


def _mechanism(question: Mapping) -> str:
    """A codebook question's mechanism in the Markdown table: an open one says so."""
    if question.get("disclosed"):
        return "none: answered openly (disclosed), the answer as given"
    return question.get("mechanism", question.get("design", FORCED_RESPONSE))


def _markdown_table(header: list[str], rows: Iterable[tuple]) -> Iterator[str]:
    yield "| " + " | ".join(header) + " |"
    yield "|" + "---|" * len(header)
    for row in rows:
        yield "| " + " | ".join("" if cell is None else str(cell) for cell in row) + " |"


MARKDOWN_SPECIAL = re.compile(r"([\\`\[\]<>|&])")


def _markdown(text: str) -> str:
    """Text as it reads in a Markdown table cell: HTML, links, code and the cell separator
    backslash-escaped (CommonMark: \\ ` [ ] < > | &), newlines as <br>."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", text).replace("\n", "<br>")


def _pieces(lines: Iterable[str]) -> Iterator[str]:
    """Lines joined into pieces of about CHUNK_BYTES: few writes, little memory."""
    piece: list[str] = []
    size = 0
    for line in lines:
        piece.append(line)
        size += len(line)
        if size >= CHUNK_BYTES:
            yield "".join(piece)
            piece, size = [], 0
    if piece:
        yield "".join(piece)
