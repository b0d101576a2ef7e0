"""`survey import` (an XLSForm to a survey file) and `survey export-xlsform` (the way back),
through ldpsurvey.xlsform (the `xlsform` extra, loaded on first use)."""

import click

from ldpsurvey.cli import check
from ldpsurvey.cli.extras import load
from ldpsurvey.cli.options import json_option
from ldpsurvey.cli.output import emit_json


def _open_new(path: str, force: bool):
    """`path` opened for writing bytes, refused (one line) when it exists without --force."""
    try:
        return open(path, "wb" if force else "xb")
    except FileExistsError:
        raise click.ClickException(f"{path} exists: choose another name, or overwrite it with "
                                   "--force") from None
    except OSError as exc:
        raise click.ClickException(f"cannot write {path}: {exc.strerror}") from None


@click.command("import")
@click.argument("form", type=click.Path(exists=True, dir_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False),
              help="The survey file to write (TOML).")
@click.option("--epsilon", type=click.FloatRange(0, min_open=True),
              help="The epsilon of every question whose row gives none (no epsilon column, or "
                   "an empty cell).")
@click.option("--force", is_flag=True, help="Overwrite the output if it exists.")
@json_option
def import_form(form: str, output: str, epsilon: float | None, force: bool,
                as_json: bool) -> None:
    """Read the XLSForm FORM (.xlsx or .xls, as KoboToolbox, ODK or SurveyCTO take it) into a
    survey file that `survey check` passes; or say, one line per row, what a randomized survey
    cannot take and why, and write nothing (--json: the file written, what was left out, and
    its check report, as `survey check --json`)."""
    xlsform = load("ldpsurvey.xlsform")
    try:
        imported = xlsform.read_form(form, epsilon)
    except xlsform.FormRefused as refused:
        for line in refused.lines:
            click.echo(line, err=True)
        error = click.ClickException(f"{form}: {len(refused.lines)} refused (listed above); "
                                     "nothing written")
        error.exit_code = 2  # bad input, as every refused file
        raise error from None
    text = xlsform.survey_toml(imported.definition, click.format_filename(form))
    with _open_new(output, force) as out:
        out.write(text.encode())
    for line in imported.notes:
        click.echo(line, err=True)
    if as_json:
        emit_json({"file": output, "left_out": list(imported.notes),
                   "check": check.report(check.read(output)[1], check.DEFAULT_RESPONDENTS)})
    click.echo(f"wrote {output} ({len(imported.definition['questions'])} questions); next: "
               f"ldp-survey survey check {output}", err=True)


@click.command("export-xlsform")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False),
              help="The XLSForm to write (.xlsx).")
@click.option("--force", is_flag=True, help="Overwrite the output if it exists.")
def export_form(file: str, output: str, force: bool) -> None:
    """Write the survey file FILE as an XLSForm (.xlsx) that `survey import` reads back as
    the same survey and pyxform accepts: edit it in a spreadsheet, or share it."""
    if not output.endswith(".xlsx"):
        raise click.BadParameter("name an .xlsx file", param_hint="'--output'")
    definition, _ = check.read(file)
    xlsform = load("ldpsurvey.xlsform")
    with _open_new(output, force) as out:
        xlsform.write_form(definition, out)
    click.echo(f"wrote {output}", err=True)


COMMANDS = (import_form, export_form)
