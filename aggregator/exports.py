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


def design_parameters(question: Question) -> dict:
    """alpha, beta, epsilon, the report matrix P[i][j] = P(report j | true i), and for yes/no
    R's rr package forced-known design: p = alpha, p1 = (1-alpha)*beta_yes, p0 = (1-alpha)*beta_no.
    For a concept question alpha and beta are those of the two layers composed (what one report
    is); epsilon is the permanent layer's, what a respondent spends on the concept."""
    m = question.reported_mechanism
    parameters = {
        "alpha": m.alpha, "beta": list(m.beta), "epsilon": question.epsilon,
        "options": list(question.options),
        "report_matrix": [[m.probability(i, j) for j in range(m.k)] for i in range(m.k)],
    }
    if question.type == "yes_no":
        parameters["rr_forced_known"] = {"p": m.alpha, "p1": (1 - m.alpha) * m.beta[1],
                                         "p0": (1 - m.alpha) * m.beta[0]}
    return parameters


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(text: str) -> str:
    """Text a spreadsheet opening a CSV will not run as a formula (OWASP, CSV injection): a
    leading = + - @ tab or carriage return gets a leading apostrophe."""
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


def parameters(survey: Survey) -> dict[str, dict]:
    return {q.id: design_parameters(q) for q in survey.questions}


CHUNK_BYTES = 64 * 1024  # what each streamed piece of an export holds, about


CODEBOOK_FORMAT = "ldp-survey-codebook/1"


def to_csv(survey: Survey, answers: Iterable[str], codes: bool = False) -> Iterator[str]:
    """A header row of question ids, then one row per released response (its stored canonical
    JSON `answers`): each cell the option's label made spreadsheet_safe, or with `codes` the
    option's index; quoted by the csv module (commas, quotes, newlines), in pieces."""
    cells = {q.id: option_cells(q, codes) for q in survey.questions}
    ids = list(cells)
    yield from _pieces(_csv_lines(
        [ids], ([cells[qid][chosen[qid]] for qid in ids] for chosen in map(json.loads, answers))))


def option_cells(question: Question, codes: bool) -> list[str]:
    """What the plain CSV holds for each option of the question: its index, or its label
    (spreadsheet_safe)."""
    if codes:
        return [str(j) for j in range(len(question.options))]
    return [spreadsheet_safe(label) for label in question.options]


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
    ids = [q.id for q in survey.questions]
    head = io.StringIO()
    head.write(f"# ldp-survey export of survey {survey.survey_id}: one row per released "
               "response, random order; each value is the randomized option index\n")
    head.write(f"# manifest: {manifest.decode()}\n")
    head.write(f"# parameters: {json.dumps(parameters(survey), separators=(',', ':'))}\n")
    head.write(f"# central: {json.dumps(central, separators=(',', ':'))}\n")
    csv.writer(head, lineterminator="\n").writerow(ids)
    yield head.getvalue()
    row = ",".join(f"{{{qid}}}" for qid in ids) + "\n"  # option indices need no quoting
    yield from _pieces(row.format_map(json.loads(stored)) for stored in answers)


def to_jsonl(survey: Survey, manifest: bytes, central: dict,
             answers: Iterable[str]) -> Iterator[str]:
    """A first line {"manifest", "parameters", "central"}, then one {"answers": {...}} per
    released response (its stored canonical JSON, as is), in pieces."""
    head = {"manifest": json.loads(manifest), "parameters": parameters(survey),
            "central": central}
    yield json.dumps(head, separators=(",", ":")) + "\n"
    yield from _pieces(f'{{"answers":{stored}}}\n' for stored in answers)


VALUES = ("One row per released response, in random order; one column per question, named by its "
          "id. A cell of the default CSV is its option's csv_value (the label, with a leading "
          "apostrophe where it would start a spreadsheet formula); with codes, in the rr CSV "
          "and in the JSON lines it is the option's code. Every value is a respondent's "
          "randomized report, not the true answer: estimate proportions with the design "
          "parameters (alpha, beta) below.")


def codebook(survey: Survey, central: dict, released: int, last_release: int,
             exported_at: str) -> dict:
    """What every export's columns and values mean: per question the manifest's fields (id,
    text, type, alpha, beta, epsilon; concept and irr_alpha for concept questions) with each
    option as {code, label, csv_value}; the survey's id, title, key id, release batch and total
    epsilon; the central epsilon (with what it assumes) over the `released` responses of
    releases up to `last_release` (0: none yet); and the time it was made (`exported_at`, UTC)."""
    questions = [{**q.as_dict(), "options": [
        {"code": code, "label": label, "csv_value": spreadsheet_safe(label)}
        for code, label in enumerate(q.options)]}
        for q in survey.questions]
    return {"format": CODEBOOK_FORMAT, "survey_id": survey.survey_id, "title": survey.title,
            "key_id": survey.key_id, "release_batch": survey.release_batch,
            "total_epsilon": survey.total_epsilon, "central": central, "released": released,
            "last_release": last_release, "exported_at": exported_at, "values": VALUES,
            "questions": questions}


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
    questions = [(q["id"], _markdown(q["text"]), q["type"], q["alpha"], q["epsilon"],
                  q.get("concept"), q.get("irr_alpha")) for q in book["questions"]]
    options = [(q["id"], o["code"], _markdown(o["label"]), _markdown(o["csv_value"]),
                q["beta"][o["code"]]) for q in book["questions"] for o in q["options"]]
    return "\n".join([
        f"# Codebook: {_markdown(book['title'])}", "", _markdown(book["values"]), "",
        *_markdown_table(["field", "value"], fields), "", "## Questions", "",
        *_markdown_table(["id", "text", "type", "alpha", "epsilon", "concept", "irr_alpha"],
                         questions), "", "## Options", "",
        *_markdown_table(["question", "code", "label", "CSV value", "beta"], options), ""])


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
