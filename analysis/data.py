"""An export and its codebook as a data frame with each question's mechanism."""

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ldpsurvey.analysis.errors import AnalysisError
from ldpsurvey.shared import Mechanism, uniform_beta
from ldpsurvey.shared.mechanisms.registry import WORDS
from ldpsurvey.shared.survey.manifest import parse_manifest

# The schemes whose report the analyses here use: forced response (a known report matrix) and
# openly answered questions (the answer itself).
ANALYSED = ("forced_response", "disclosed")


@dataclass(frozen=True)
class Unsupported:
    """In place of a mechanism: a randomized question the regression and the weights cannot
    use (its report is no option through a forced-response design), and why, in one line
    naming it. rr_logistic and rake refuse its columns; weighted_results leaves it out and
    says so."""

    question: str
    reason: str


def unsupported(question_id: str, scheme: str) -> Unsupported:
    """Why a question randomized by `scheme` (not forced response) is no analysis' input."""
    return Unsupported(question_id, f"{question_id!r} is randomized by {WORDS[scheme]}: "
                                    "regression and weights take yes/no and choice questions "
                                    "randomized by forced response, and openly answered ones")


def scheme_of(question: dict) -> str:
    """A codebook (or manifest) question's scheme name: disclosed, its mechanism or design,
    else forced response (which the manifest leaves unnamed)."""
    if question.get("disclosed"):
        return "disclosed"
    return question.get("mechanism") or question.get("design") or "forced_response"


def mechanism_of(question: dict) -> Mechanism:
    """What one report of a codebook question is given its true answer: its (alpha, beta),
    then for a concept question the instantaneous layer (irr_alpha, uniform beta), composed
    (shared.manifest.Question.reported_mechanism)."""
    mechanism = Mechanism(question["alpha"], tuple(question["beta"]))
    irr_alpha = question.get("irr_alpha")
    if irr_alpha is None:
        return mechanism
    return mechanism.then(Mechanism(irr_alpha, uniform_beta(len(question["options"]))))


def read_export(export_path: str | Path, codebook_path: str | Path, *,
                codes: bool = False) -> tuple[pd.DataFrame, dict[str, Mechanism | Unsupported]]:
    """Any export read with its codebook (JSON), by the file's ending: .csv the default CSV
    (labels; codes=True for one made with --codes) or the rr CSV (its `#` lines skipped,
    codes), .jsonl the JSON lines, .dta and .sav (pyreadstat: codes), .xlsx the Excel
    workbook's data sheet (openpyxl: labels); any other ending an AnalysisError naming the
    known ones. One column per CSV column: a yes/no or choice answer (a padding item, a
    cheating-detection answer) categorical, its categories the option labels in code order;
    every other column (bits, seeds, a number's unbiased value, a group) numeric. And per
    randomized question (by its id and each of its columns) its mechanism (mechanism_of) if
    forced response, else Unsupported; openly answered (disclosed) ones have none: they are
    plain covariates and raking margins. Columns not in the codebook are kept as read (plain columns).
    AnalysisError for a cell that is no option of its question, or no number."""
    with open(codebook_path, encoding="utf-8") as handle:
        book = json.load(handle)
    frame, codes = _cells(Path(export_path), codes)
    mechanisms: dict[str, Mechanism | Unsupported] = {}
    for question in book["questions"]:
        qid, scheme = question["id"], scheme_of(question)
        columns = question.get("columns", [qid])
        for column in columns:
            if column not in frame.columns:
                raise AnalysisError(f"the export has no column {column!r} of the codebook")
            if column == qid and question["options"]:
                frame[column] = _categorical(frame[column], question["options"], codes, qid)
            else:
                frame[column] = _numbers(frame[column], column)
        if scheme not in ANALYSED:  # each column, and the question by its id
            mechanisms.update(dict.fromkeys({*columns, qid}, unsupported(qid, scheme)))
        if scheme == "forced_response":
            mechanisms[qid] = mechanism_of(question)
    return frame, mechanisms


READABLE = (".csv", ".jsonl", ".dta", ".sav", ".xlsx")


def _cells(path: Path, codes: bool) -> tuple[pd.DataFrame, bool]:
    """The export's cells as text, and whether they are codes (the rr CSV's, the JSON
    lines', the Stata and SPSS files' are)."""
    suffix = path.suffix.lower()
    if suffix not in READABLE:
        raise AnalysisError(f"{path.name}: read_export reads {', '.join(READABLE)} exports "
                            "(the ending says which)")
    if suffix in (".dta", ".sav"):
        return _labelled(path, suffix), True
    if suffix == ".xlsx":
        return _workbook(path), codes
    if suffix == ".jsonl":
        with open(path, encoding="utf-8") as handle:
            survey = parse_manifest(json.dumps(json.loads(next(handle))["manifest"]).encode())
            rows = [[cell for q in survey.questions
                     for cell in q.scheme.cells(json.loads(line)["answers"][q.id], True)]
                    for line in handle]
        header = [column for q in survey.questions for column in q.scheme.columns(q.id)]
        return pd.DataFrame(rows, columns=header, dtype=str), True
    with open(path, encoding="utf-8") as handle:
        rr = handle.read(1) == "#"
    return pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False,
                       comment="#" if rr else None), codes or rr


def _labelled(path: Path, suffix: str) -> pd.DataFrame:
    """A Stata or SPSS export's cells as text: codes and whole numbers without a decimal
    point, as the CSV has them."""
    pyreadstat = _optional("pyreadstat")
    read = pyreadstat.read_dta if suffix == ".dta" else pyreadstat.read_sav
    frame, _ = read(path)
    return frame.map(_text).astype(str)


def _workbook(path: Path) -> pd.DataFrame:
    """An Excel export's data sheet as text (read-only mode: a row at a time)."""
    openpyxl = _optional("openpyxl")
    workbook = openpyxl.load_workbook(path, read_only=True)
    try:
        rows = workbook["data"].iter_rows(values_only=True)
        header = next(rows)
        return pd.DataFrame([[_text(cell) for cell in row] for row in rows],
                            columns=list(header), dtype=str)
    finally:
        workbook.close()


def _text(cell) -> str:
    """A cell as the CSV writes it: a whole number without a decimal point."""
    if isinstance(cell, float) and cell.is_integer():
        return str(int(cell))
    return str(cell)


def _optional(module: str):
    """A reader's library, or AnalysisError naming the extra that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        raise AnalysisError(f"reading this export needs {module}: pip install "
                            "'ldp-survey[exports]'") from None


def _categorical(column: pd.Series, options: list[dict], codes: bool,
                 qid: str) -> pd.Categorical:
    """An answer column's option labels or codes as the options' labels, in code order."""
    cells = {str(o["code"]) if codes else o["csv_value"]: o["code"] for o in options}
    unknown = sorted(set(column) - set(cells))
    if unknown:
        raise AnalysisError(f"column {qid!r} holds {unknown[0]!r}, no option of the question")
    return pd.Categorical.from_codes(column.map(cells).astype(int),
                                     categories=[o["label"] for o in options])


def _numbers(column: pd.Series, name: str) -> pd.Series:
    """A column of numbers (bits, seeds, groups, a number's values or reports)."""
    numbers = pd.to_numeric(column, errors="coerce")
    if numbers.isna().any():
        raise AnalysisError(f"column {name!r} holds a value that is no number")
    return numbers
