"""The Excel export (.xlsx): a `data` sheet (a header row of the CSV's column names, then one
row per response in the export's random order) and a `codebook` sheet (the survey's fields,
then one row per column and option).

openpyxl's write-only mode streams each row to the file as it is appended, so memory stays
bounded at any size (up to a sheet's 1,048,576 rows). Formula safety: every text cell is a
string cell (openpyxl would store text starting with = as a formula), and an option's cell in
the data sheet is its `csv_value`, the label the CSV holds (a leading apostrophe where it would
start a formula), so a sheet saved back as CSV stays safe; no cell of either sheet is a
formula."""

from collections.abc import Iterable

from ldpsurvey.cli.export_files import MAX_XLSX_ROWS, Column, WriteError

SURVEY_FIELDS = ("survey_id", "title", "key_id", "release_batch", "total_epsilon", "released",
                 "last_release", "values")
CODEBOOK_HEADER = ("column", "question", "label", "type", "mechanism", "epsilon", "alpha",
                   "code", "option", "cell in the data sheet", "beta", "what the cells hold")


def write_xlsx(path: str, book: dict, book_columns: list[Column], rows: Iterable[list]) -> int:
    """The workbook at `path`; the number of rows. WriteError past a sheet's rows."""
    from openpyxl import Workbook

    workbook = Workbook(write_only=True)
    data = workbook.create_sheet("data")
    sheet = workbook.create_sheet("codebook")
    data.append([_text(data, c.name) for c in book_columns])
    shown = [{o["code"]: o["csv_value"] for o in _question(book, c.question)["options"]}
             if c.codes else None for c in book_columns]
    count = 0
    for row in rows:
        count += 1
        if count > MAX_XLSX_ROWS:
            raise WriteError(f"an .xlsx sheet holds at most {MAX_XLSX_ROWS:,} responses: export "
                             ".csv, .dta or .sav")
        # a csv_value never starts with = (spreadsheet_safe): a plain string is a string cell
        data.append([cell if values is None else values[cell]
                     for values, cell in zip(shown, row, strict=True)])
    for row in codebook_rows(book, book_columns):
        sheet.append([_text(sheet, cell) if isinstance(cell, str) else cell for cell in row])
    workbook.save(path)
    return count


def codebook_rows(book: dict, book_columns: list[Column]) -> Iterable[tuple]:
    """The codebook sheet: (field, value) per survey field and central epsilon field, a blank
    row, the header, then per column one row for each option (an answer column) or one row."""
    for field in SURVEY_FIELDS:
        yield field, book[field]
    for field, value in book["central"].items():
        yield f"central {field}", value
    yield ()
    yield CODEBOOK_HEADER
    for column in book_columns:
        question = _question(book, column.question)
        mechanism = ("disclosed" if question.get("disclosed") else
                     question.get("mechanism", question.get("design", "forced_response")))
        common = (column.name, column.question, column.label, question["type"], mechanism,
                  question.get("epsilon"), question.get("alpha"))
        if not column.codes:
            yield *common, None, None, None, None, question["cells"]
            continue
        beta = question.get("beta")
        for option in question["options"]:
            code = option["code"]
            yield (*common, code, option["label"], option["csv_value"],
                   beta[code] if isinstance(beta, list) and code < len(beta) else None,
                   question["cells"])


def _question(book: dict, qid: str) -> dict:
    return next(q for q in book["questions"] if q["id"] == qid)


def _text(sheet, value: str):
    """A string cell, never a formula, whatever the text starts with."""
    from openpyxl.cell import WriteOnlyCell

    cell = WriteOnlyCell(sheet, value)
    cell.data_type = "s"
    return cell
