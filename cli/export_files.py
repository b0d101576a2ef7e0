"""Export files chosen by the name's ending (`results --output FILE`): .csv and .jsonl are the
server's exports as served; .dta, .sav, .xlsx and .R are written here from the JSON lines
export (the reports, in the export's random order) and the codebook, one row at a time.

Every writer gets the same columns and rows: per question the columns of the plain CSV
(scheme.columns), an answer column (yes/no, choice, padding item, a cheating-detection
answer) holding its option's code with the option labels beside it, every other column
(bits, seeds, hash values, groups, a randomized number's unbiased value, an open number)
the number the plain CSV holds. No timestamp and no id of a response is in any of them."""

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ldpsurvey.shared import Survey, parse_manifest

SERVED = ("csv", "jsonl")  # written as the server sends them
WRITTEN = ("dta", "sav", "xlsx", "R")  # written here, from the JSON lines and the codebook
KNOWN = tuple(f".{kind}" for kind in (*SERVED, *WRITTEN))
MAX_XLSX_ROWS = 1_048_576 - 1  # an Excel sheet's rows, less the header


class WriteError(ValueError):
    """A column the format cannot take, or more rows than it holds: one line."""


def kind_of(path: str) -> str:
    """The export kind a file name asks for by its ending (.R: the R script; the others
    ignoring case), or ValueError naming the known endings in one line."""
    stem, dot, ending = path.rpartition(".")
    if dot and stem and ending in ("R", "r"):
        return "R"
    if dot and stem and ending.lower() in (*SERVED, *WRITTEN[:-1]):
        return ending.lower()
    raise ValueError(f"{path}: the name's ending chooses the format: one of {', '.join(KNOWN)}")


@dataclass(frozen=True)
class Column:
    """One column of a written export: its name (the plain CSV's), its label (the question's
    text, and for a column beside the answer what it holds), the labels of its codes (an
    answer column's options, placeholders included; empty for a number) and its measurement
    level (SPSS: nominal for codes, bits, seeds and groups, scale for a number's value)."""

    name: str
    question: str
    label: str
    options: dict[int, str]
    measure: str

    @property
    def codes(self) -> bool:
        """Whether the column holds option codes (else numbers)."""
        return bool(self.options)


def columns(book: dict) -> list[Column]:
    """The columns of the codebook's questions, in the CSV's order."""
    found = []
    for question in book["questions"]:
        qid, text = question["id"], question["text"]
        names = question.get("columns", [qid])
        labels = {o["code"]: o["label"] for o in question["options"]}
        numeric = question["type"] == "numeric"
        for name in names:
            if name == qid and labels:
                found.append(Column(name, qid, text, labels, "nominal"))
            else:
                found.append(Column(name, qid, _beside(text, name[len(qid) + 1:], labels),
                                    {}, "scale" if numeric else "nominal"))
    return found


def _beside(text: str, suffix: str, labels: dict[int, str]) -> str:
    """The label of a column beside a question's answer: its option for a bit (QID_0 ...),
    else what the suffix names (seed, value, group)."""
    if suffix.isdigit() and int(suffix) in labels:
        return f"{text} [{labels[int(suffix)]}: reported bit]"
    return f"{text} [{suffix}]" if suffix else text


def read_lines(lines: Iterable[bytes]) -> tuple[Survey, dict, Iterator[dict]]:
    """The JSON lines export: its manifest (parsed and checked), its first line (manifest,
    parameters, central) and each response's answers, as read."""
    lines = iter(lines)
    head = json.loads(next(lines))
    survey = parse_manifest(json.dumps(head["manifest"]).encode())
    return survey, head, (json.loads(line)["answers"] for line in lines)


CACHED_REPORTS = 4096  # per question: the cells of this many distinct reports are kept


def rows(survey: Survey, book_columns: list[Column],
         answers: Iterable[dict]) -> Iterator[list[int | float]]:
    """Each response's cells: an answer column's option code, every other column the number
    of the plain CSV (scheme.cells with codes for a question with an answer column: its other
    columns, a group, read alike both ways). The cells of a question's first CACHED_REPORTS
    distinct reports are kept: most schemes report from a small set (a piecewise cell is one
    of about 1,900, whose unbiased value takes exact fractions to compute)."""
    coded = {c.question for c in book_columns if c.codes}
    kinds = iter([int if c.codes else float for c in book_columns])
    plan = []
    for q in survey.questions:
        convert = [next(kinds) for _ in q.scheme.columns(q.id)]
        plan.append((q.id, _cells_of(q.scheme, q.id in coded, convert)))
    for answer in answers:
        yield [cell for qid, cells in plan for cell in cells(answer[qid])]


def _cells_of(scheme, codes: bool, convert: list[type]):
    """A question's report -> its cells as numbers, remembered for CACHED_REPORTS reports."""
    seen: dict = {}

    def cells(report) -> list[int | float]:
        key = tuple(report) if isinstance(report, list) else report
        found = seen.get(key)
        if found is None:
            found = [kind(cell) for kind, cell in
                     zip(convert, scheme.cells(report, codes), strict=True)]
            if len(seen) < CACHED_REPORTS:
                seen[key] = found
        return found

    return cells


def agree(survey: Survey, book_columns: list[Column]) -> None:
    """ValueError unless the codebook's columns are the export's (both of one survey)."""
    export = [name for q in survey.questions for name in q.scheme.columns(q.id)]
    if export != [c.name for c in book_columns]:
        raise ValueError("the codebook's columns are not the export's: export again")


def lines_of(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """Whole lines from a stream of pieces (a line may span two)."""
    rest = b""
    for piece in pieces:
        *whole, rest = (rest + piece).split(b"\n")
        yield from whole
    if rest:
        yield rest
