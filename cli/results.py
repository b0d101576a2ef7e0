"""`ldp-survey results`: a survey's estimates, differences, cross-tabs, regression and
weights, or its exports and codebook, from an aggregator over HTTP."""

import json
import sys
from urllib.parse import quote

import click

from ldpsurvey.cli import export_files, written
from ldpsurvey.cli.api import Api, pass_api, url_option
from ldpsurvey.cli.options import confidence_option, json_option, method_option
from ldpsurvey.cli.output import emit_json, interval, note, p_text, release_lines, table
from ldpsurvey.cli.terminal import clean_pieces
from ldpsurvey.shared import Difference, Mechanism, difference, parse_manifest
from ldpsurvey.shared.http_contract import EXPORT_FORMATS
from ldpsurvey.shared.mechanisms.square_wave import distribution_rows

# Seconds the CLI waits for a regression or weighting: past the server's own budget for one
# (ANALYSIS_SECONDS, 45 by default; docs/deployment.md), which answers a 422 when it stops one.
ANALYSIS_WAIT = 120.0


@click.command()
@url_option
@click.option("--survey", "survey_id", required=True, help="The survey id.")
@confidence_option
@method_option
@click.option("--simultaneous", is_flag=True,
              help="Intervals that cover all of a question's options together.")
@click.option("--difference", metavar="Q:I,Q:J",
              help="The difference of two options of question Q (indices I and J) instead.")
@click.option("--crosstab", metavar="A,B",
              help="The cross-tab of questions A (rows) and B (columns) instead.")
@click.option("--regress", metavar="FORMULA",
              help="Logistic regression of a yes/no question on others instead, e.g. "
                   "\"smoked ~ sleep + drove\" (question ids joined by +, : or *): "
                   "coefficients with SEs and CIs, predicted prevalence by group.")
@click.option("--weights", "margins_file", type=click.Path(exists=True, dir_okay=False),
              help="Weight to population margins of openly answered questions (a JSON file "
                   "{\"question\": {\"option\": share}} or a CSV column,level,share): raking "
                   "weights, weighted estimates (and --regress weighted), linearization SEs, "
                   "effective sample size.")
@json_option
@click.option("--csv", "export", flag_value="csv",
              help="Print the randomized responses as CSV: a header of question ids, one row "
                   "per response, option labels (pandas.read_csv / read.csv load it as is).")
@click.option("--jsonl", "export", flag_value="jsonl",
              help="The responses as JSON lines: a first line with the manifest, design "
                   "parameters and central epsilon, then one {\"answers\": {id: code}} each.")
@click.option("--output", type=click.Path(dir_okay=False, writable=True),
              help="Write the export to this file, with a progress bar; its ending chooses "
                   "the format: .csv, .jsonl, .dta (Stata), .sav (SPSS), .xlsx (Excel) or .R "
                   "(an R script and NAME-data.csv beside it).")
@click.option("--codes", is_flag=True,
              help="With --csv: option codes (0, 1, ...) instead of option labels.")
@click.option("--format", "layout", type=click.Choice(EXPORT_FORMATS), default="plain",
              show_default=True,
              help="With --csv: plain (a header row, one row per response) or rr (the design "
                   "in # comment lines first, then option codes, for R's rr package).")
@click.option("--codebook", type=click.Path(dir_okay=False, writable=True),
              help="Write the codebook (what each column and value means) to this file, as "
                   "Markdown if it ends in .md, else JSON; with --csv or --jsonl as well as "
                   "the export.")
@pass_api
def results(api: Api, survey_id: str, confidence: float, method: str, simultaneous: bool,
            difference: str | None, crosstab: str | None, regress: str | None,
            margins_file: str | None, as_json: bool, export: str | None, output: str | None,
            codes: bool, layout: str, codebook: str | None) -> None:
    """Print a survey's estimates (public surveys need no key), a difference of two options,
    a cross-tab of two questions, a regression, or export its responses."""
    ignored = [name for name, given in (("--json", as_json), ("--difference", difference),
                                        ("--crosstab", crosstab), ("--regress", regress),
                                        ("--weights", margins_file),
                                        ("--simultaneous", simultaneous)) if given]
    export = _export_kind(export, output)
    if export:
        if ignored:
            raise click.UsageError(f"{ignored[0]} does not go with --{export}: the export is "
                                   "the responses themselves (--output writes them to a file)")
        if export in export_files.SERVED:
            _export(api, survey_id, export + _export_query(export, codes, layout), output,
                    codebook)
        else:
            _export_query(export, codes, layout)
            written.write(api, survey_id, export, output, codebook)
        return
    if codes or layout != "plain":
        raise click.UsageError("--codes and --format go with --csv or an --output FILE.csv")
    if codebook:
        if ignored:
            raise click.UsageError(f"{ignored[0]} does not go with --codebook alone: it writes "
                                   "the codebook only")
        written.write_codebook(api, survey_id, codebook)
        return
    if margins_file and (crosstab or difference):
        raise click.UsageError("--weights goes with the estimates or --regress, not with "
                               "--crosstab or --difference")
    if crosstab:
        _crosstab(api, survey_id, crosstab, confidence, as_json)
        return
    if margins_file:
        _weighted(api, survey_id, margins_file, regress, confidence, as_json)
        return
    if regress:
        _regress(api, survey_id, regress, confidence, as_json)
        return
    body = api.get(f"/api/surveys/{survey_id}/estimates?confidence={confidence}&method={method}"
                   f"&simultaneous={str(simultaneous).lower()}", auth=None).json()
    if difference:
        _print_difference(_difference(body, difference), as_json)
    elif as_json:
        emit_json(body)
    else:
        _print_estimates(body)


def _export_kind(flag: str | None, output: str | None) -> str | None:
    """The export asked for: by --csv or --jsonl, else by the --output name's ending
    (export_files.kind_of), else none. A flag naming another format than a known ending
    is refused."""
    if output is None:
        return flag
    try:
        kind = export_files.kind_of(output)
    except ValueError as error:
        if flag:
            return flag  # --csv or --jsonl to a file of any other name, as before
        raise click.BadParameter(str(error), param_hint="'--output'") from None
    if flag and flag != kind:
        raise click.UsageError(f"--{flag} does not go with {output}: its ending chooses "
                               f"{kind} (drop --{flag})")
    return kind


def _export_query(kind: str, codes: bool, layout: str) -> str:
    """The export's query string for --codes and --format (checked: they fit the CSV only,
    and rr always holds codes)."""
    if kind != "csv" and (codes or layout != "plain"):
        raise click.UsageError("--codes and --format go with --csv (.csv): the other formats "
                               "hold codes with their labels")
    if codes and layout != "plain":
        raise click.UsageError("--codes goes with --format plain: rr always holds codes")
    return "?codes=true" if codes else "?format=rr" if layout == "rr" else ""


def _export(api: Api, survey_id: str, export: str, output: str | None,
            codebook: str | None) -> None:
    """Write the codebook to `codebook` (its exact bytes, .md: Markdown, else JSON), if given;
    then stream the export (`export`: its kind and query) to stdout (`terminal.clean`ed if it
    is a terminal), or to `output` with a progress bar over the released responses (one line
    each), in constant memory at any size."""
    if codebook:
        written.write_codebook(api, survey_id, codebook)
    path = f"/api/surveys/{survey_id}/export.{export}"
    if output is None:
        with api.stream(path) as pieces:
            # on a terminal what it can show; in a pipe or file the exact bytes
            for piece in clean_pieces(pieces) if sys.stdout.isatty() else pieces:
                click.echo(piece, nl=False)
        return
    released = written.released(api, survey_id)
    with (api.stream(path) as pieces, open(output, "wb") as file,
          click.progressbar(length=released, label="exporting", file=sys.stderr) as bar):
        for piece in pieces:
            file.write(piece)
            bar.update(piece.count(b"\n"))
    click.echo(f"{released} response{'' if released == 1 else 's'} written to {output}", err=True)


def _print_estimates(body: dict) -> None:
    """The estimates for people: each option's constrained maximum-likelihood estimate (p_mle,
    in [0, 1]) inside its interval; the unbiased estimates and their standard errors, which
    may leave [0, 1], only in --json. A number question's distribution (square_wave) adds its
    quartiles and its bins' shares, each inside its exact interval."""
    together = "simultaneous " if body["simultaneous"] else ""
    click.echo(f"{body['title']} ({body['status']}); epsilon per respondent "
               f"{body['total_epsilon']:.4g}; {body['confidence']:.0%} {together}"
               f"{body['ci_method']} CIs. MLE: the maximum-likelihood estimate, in [0, 1] "
               "and inside its CI; the unbiased estimates (p_hat) and their standard errors "
               "are in --json.")
    rows = [(q["id"], o["option"], o.get("n", q["n"]), o["p_mle"], interval(o), q["epsilon"],
             note(o)) for q in body["questions"]
            for o in [*q["options"], *distribution_rows(q)]]
    click.echo(table(rows, ["question", "option", "n", "MLE", "CI", "eps", "note"]))
    for line in release_lines(body):
        click.echo(line)


def _difference(body: dict, spec: str):
    """shared.difference on the released counts of one question, from `Q:I,Q:J`."""
    try:
        (first_q, first), (second_q, second) = (part.split(":") for part in spec.split(","))
        first, second = int(first), int(second)
    except ValueError:
        raise click.BadParameter("give two options of one question as Q:I,Q:J, e.g. sleep:0,"
                                 "sleep:2", param_hint="'--difference'") from None
    question = next((q for q in body["questions"] if q["id"] == first_q), None)
    if question is None or first_q != second_q:
        raise click.BadParameter("give two options of one question of the survey",
                                 param_hint="'--difference'")
    if question.get("disclosed") or "mechanism" in question or "design" in question:
        scheme = ("answered openly" if question.get("disclosed") else
                  f"uses {question.get('mechanism', question.get('design'))}")
        raise click.BadParameter(f"question {first_q!r} {scheme}: differences are for "
                                 "forced-response questions", param_hint="'--difference'")
    design = question.get("reported", question)  # a concept's composed (alpha, beta)
    counts = [o["reported_count"] for o in question["options"]]
    try:
        return difference(Mechanism(design["alpha"], tuple(design["beta"])), counts, first,
                          second, confidence=body["confidence"])
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--difference'") from None


def _print_difference(found: Difference, as_json: bool) -> None:
    """shared.Difference: every field in --json; for people the constrained point
    (estimate_mle, in [-1, 1] and inside its interval) and the interval."""
    if as_json:
        emit_json(found.as_dict())
        return
    click.echo(table([("options", f"{found.first} - {found.second}"),
                      ("estimate", found.estimate_mle), ("CI", interval(found.as_dict())),
                      ("confidence", found.confidence)]))


def _crosstab(api: Api, survey_id: str, spec: str, confidence: float, as_json: bool) -> None:
    rows, _, cols = spec.partition(",")
    body = api.get(f"/api/surveys/{quote(survey_id, safe='')}/crosstab?rows={quote(rows)}"
                   f"&cols={quote(cols)}&confidence={confidence}", auth=None).json()
    if as_json:
        emit_json(body)
        return
    survey = parse_manifest(api.get(f"/api/surveys/{quote(survey_id, safe='')}", auth=False).body)
    labels = [survey.question(q).options for q in (rows, cols)]
    click.echo(f"{rows} (rows) by {cols} (columns), n = {body['n']}; {body['confidence']:.0%} "
               f"intervals; conditional = P({cols} | {rows}). Joint and conditional: the points "
               "of the joint projected onto the simplex, in [0, 1] and inside their intervals; "
               "the unbiased ones (p_hat) are in --json.")
    click.echo(table([(labels[0][c["row"]], labels[1][c["col"]], c["p_constrained"], interval(c),
                       d["p_constrained"], interval(d))
                      for c, d in zip(body["cells"], body["conditional"], strict=True)],
                     [rows, cols, "joint", "CI", "conditional", "CI"]))


def _regress(api: Api, survey_id: str, formula: str, confidence: float, as_json: bool) -> None:
    """The estimates endpoint's regression (ldpsurvey.analysis.rr_logistic on the server):
    --json its document (null before the first release), else the coefficients and the
    predicted prevalence by group."""
    fit = api.get(f"/api/surveys/{quote(survey_id, safe='')}/estimates?confidence={confidence}"
                  f"&regress={quote(formula, safe='')}", auth=None,
                  timeout=ANALYSIS_WAIT).json()["regression"]
    if as_json:
        emit_json(fit)
        return
    if fit is None:
        click.echo("no released responses yet: nothing to fit")
        return
    _print_regression(fit)


def _weighted(api: Api, survey_id: str, margins_file: str, formula: str | None,
              confidence: float, as_json: bool) -> None:
    """The estimates endpoint's weighted results (ldpsurvey.analysis.weighted_results on the
    server) with the margins of `margins_file` (analysis.load_margins: JSON or CSV; a bad
    file is one error line): --json its document (null before the first release), else the
    weights, every weighted estimate and the weighted regression."""
    try:
        from ldpsurvey.analysis import AnalysisError, load_margins
    except ImportError:
        raise click.ClickException("--weights needs the analysis extra: pip install "
                                   "'ldp-survey[analysis]'") from None
    try:
        margins = load_margins(margins_file)
    except (AnalysisError, OSError, UnicodeDecodeError) as error:
        raise click.ClickException(f"--weights: {error}") from None
    query = (f"confidence={confidence}&weights={quote(json.dumps(margins), safe='')}"
             + (f"&regress={quote(formula, safe='')}" if formula else ""))
    body = api.get(f"/api/surveys/{quote(survey_id, safe='')}/estimates?{query}",
                   auth=None, timeout=ANALYSIS_WAIT).json()["weighted"]
    if as_json:
        emit_json(body)
        return
    if body is None:
        click.echo("no released responses yet: nothing to weight")
        return
    w = body["weights"]
    click.echo(f"Raked to the margins of {', '.join(w['margins'])}: n = {w['n']}, effective "
               f"sample size {w['effective_n']:.1f} (Kish), weights {w['min_weight']:.3g} to "
               f"{w['max_weight']:.3g}; {body['confidence']:.0%} Korn-Graubard CIs, SEs by "
               "linearization.")
    click.echo(table([(q["id"] + (" (open)" if q["disclosed"] else ""), o["option"],
                       o["p_hat_clipped"], interval(o), o["p_hat"], o["standard_error"])
                      for q in body["questions"] for o in q["options"]],
                     ["question", "option", "weighted estimate", "CI", "unbiased", "SE"]))
    for question in body["left_out"]:
        click.echo(f"Not weighted: {question['reason']}.")
    if "regression" in body:
        _print_regression(body["regression"])


def _print_regression(fit: dict) -> None:
    """A fitted regression: its line, coefficients and predicted prevalence by group."""
    covariates = ", ".join(fit["randomized_covariates"]) or "none"
    click.echo(f"{fit['formula']}: logistic regression of the true answer, n = {fit['n']}, "
               f"log-likelihood {fit['log_likelihood']:.4f}; {fit['confidence']:.0%} Wald CIs, "
               f"SEs from the {fit['variance']}; randomized covariates (their true options "
               f"summed over): {covariates}.")
    click.echo(table([(c["name"], c["estimate"], c["standard_error"], interval(c),
                       p_text(c["p_value"])) for c in fit["coefficients"]],
                     ["coefficient", "estimate", "SE", "CI", "p"]))
    click.echo("Predicted prevalence of a true yes (n estimated for a randomized covariate):")
    click.echo(table([(g["variable"] or "everyone", g["level"] or "", g["n"], g["prevalence"],
                       interval(g)) for g in fit["predicted"]],
                     ["covariate", "level", "n", "prevalence", "CI"]))


COMMANDS = (results,)
