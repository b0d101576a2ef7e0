"""Export files written on this side (`results --output FILE.dta|.sav|.xlsx|.R`): the codebook
and the JSON lines export are fetched, the rows streamed into the format's writer with a
progress bar; a file left half-written by an error is removed."""

import contextlib
import json
import os
import sys
from collections.abc import Iterable, Iterator

import click

from ldpsurvey.cli import export_files, extras, r_script
from ldpsurvey.cli.api import Api

NEEDS = {"dta": "pyreadstat", "sav": "pyreadstat", "xlsx": "openpyxl", "R": None}


def released(api: Api, survey_id: str) -> int:
    """How many responses are released (for the progress bar)."""
    return api.get(f"/api/surveys/{survey_id}/estimates").json()["questions"][0]["n"]


def write_codebook(api: Api, survey_id: str, codebook: str) -> None:
    """The codebook's exact bytes to the file `codebook`: Markdown if it ends in .md, else
    JSON."""
    kind = "md" if codebook.endswith(".md") else "json"
    with open(codebook, "wb") as file:
        file.write(api.get(f"/api/surveys/{survey_id}/codebook.{kind}").body)
    click.echo(f"codebook written to {codebook}", err=True)


def write(api: Api, survey_id: str, kind: str, output: str, codebook: str | None) -> None:
    """The export of kind `kind` (export_files.WRITTEN) to `output`, and the codebook to
    `codebook` if given; one line on stderr saying how many responses were written."""
    if NEEDS[kind]:
        extras.load(NEEDS[kind])
    if codebook:
        write_codebook(api, survey_id, codebook)
    total = released(api, survey_id)
    if kind == "xlsx" and total > export_files.MAX_XLSX_ROWS:
        raise click.ClickException(f"an .xlsx sheet holds at most "
                                   f"{export_files.MAX_XLSX_ROWS:,} responses and survey "
                                   f"{survey_id} has {total:,}: export .csv, .dta or .sav")
    book = json.loads(api.get(f"/api/surveys/{survey_id}/codebook.json").body)
    columns = export_files.columns(book)
    if kind in ("dta", "sav"):  # a name the format refuses: before any row is read
        from ldpsurvey.cli.stata_spss import dictionary

        try:
            dictionary(kind, columns, book["title"])
        except export_files.WriteError as error:
            raise click.ClickException(f"{output}: {error}") from None
    with (_removed_on_error(output, kind), api.stream(f"/api/surveys/{survey_id}/export.jsonl")
          as pieces, click.progressbar(length=total, label="exporting", file=sys.stderr) as bar):
        survey, head, answers = export_files.read_lines(export_files.lines_of(pieces))
        try:
            export_files.agree(survey, columns)
        except ValueError as error:
            raise click.ClickException(str(error)) from None
        rows = _counted(export_files.rows(survey, columns, answers), bar)
        count = _writer(kind)(output, book, head["parameters"], columns, rows)
    also = f" (and {r_script.data_path(output)}, the rows it reads)" if kind == "R" else ""
    click.echo(f"{count} response{'' if count == 1 else 's'} written to {output}{also}", err=True)


def _writer(kind: str):
    """The function writing `kind`: (path, book, parameters, columns, rows) -> rows written."""
    from ldpsurvey.cli import stata_spss, workbook

    return {"dta": lambda path, book, _, columns, rows: stata_spss.write_dta(
                path, columns, rows, book["title"]),
            "sav": lambda path, book, _, columns, rows: stata_spss.write_sav(
                path, columns, rows, book["title"]),
            "xlsx": lambda path, book, _, columns, rows: workbook.write_xlsx(
                path, book, columns, rows),
            "R": r_script.write_r}[kind]


def _counted(rows: Iterable[list], bar) -> Iterator[list]:
    """The rows, the progress bar moved on every 1,000."""
    count = 0
    for count, row in enumerate(rows, 1):
        if count % 1000 == 0:
            bar.update(1000)
        yield row
    bar.update(count % 1000)


@contextlib.contextmanager
def _removed_on_error(output: str, kind: str) -> Iterator[None]:
    """Remove what was written of `output` (and an R script's CSV) if writing fails; a
    writer's refusal (export_files.WriteError) as one line."""
    paths = [output, *([r_script.data_path(output)] if kind == "R" else [])]
    before = [_stat(path) for path in paths]
    try:
        yield
    except BaseException as error:
        for path, old in zip(paths, before, strict=True):
            if _stat(path) not in (None, old):  # written to: not a file it left alone
                os.remove(path)
        if isinstance(error, export_files.WriteError):
            raise click.ClickException(f"{output}: {error}") from None
        raise


def _stat(path) -> tuple | None:
    """A file's identity and last change, or None where there is none."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_ino, found.st_mtime_ns, found.st_size
