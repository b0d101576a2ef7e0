"""Researcher commands that talk to an aggregator over HTTP: survey create/close/share/tokens,
results."""

from urllib.parse import quote

import click

from ldpsurvey.shared import SurveyError, parse_definition, read_definition
from ldpsurvey.shared.protocol import MAX_TOKENS_PER_REQUEST

from .api import Api, pass_api, url_option
from .options import confidence_option, method_option
from .output import emit_json, release_lines, table


@click.group()
def survey() -> None:
    """Create, share and close surveys on an aggregator."""


@survey.command("create")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@url_option
@pass_api
def create(api: Api, file: str) -> None:
    """Publish the survey defined in FILE (TOML, or JSON if it ends in .json)."""
    try:
        definition = read_definition(file)
        parse_definition(definition)  # validate here first: errors name the question and field
    except (SurveyError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    result = api.post("/api/surveys", json_body=definition).json()
    click.echo(result["survey_id"])
    click.echo(f"published; total epsilon per respondent {result['total_epsilon']:.4g}; "
               f"respondents answer at {api.url}/s/{result['survey_id']}", err=True)


@survey.command("close")
@click.argument("survey_id")
@url_option
@pass_api
def close(api: Api, survey_id: str) -> None:
    """Close a survey for good: it refuses answers from now on."""
    api.post(f"/api/surveys/{survey_id}/close")
    click.echo(f"survey {survey_id} closed", err=True)


@survey.command("share")
@click.argument("survey_id")
@click.option("--with", "name", required=True, metavar="NAME",
              help="The researcher's name (as `ldp-survey admin keys list` shows it).")
@url_option
@pass_api
def share(api: Api, survey_id: str, name: str) -> None:
    """Let another researcher read a survey's results and exports (owner or admin only)."""
    _print_shares(api.call("PUT", _share_path(survey_id, name)).json())


@survey.command("unshare")
@click.argument("survey_id")
@click.option("--with", "name", required=True, metavar="NAME", help="The researcher's name.")
@url_option
@pass_api
def unshare(api: Api, survey_id: str, name: str) -> None:
    """Stop sharing a survey with a researcher (owner or admin only)."""
    _print_shares(api.call("DELETE", _share_path(survey_id, name)).json())


def _share_path(survey_id: str, name: str) -> str:
    return f"/api/surveys/{quote(survey_id, safe='')}/shares/{quote(name, safe='')}"


def _print_shares(body: dict) -> None:
    names = ", ".join(body["shared_with"]) or "nobody"
    click.echo(f"survey {body['survey_id']} is shared with {names}", err=True)


@survey.command("tokens")
@click.argument("survey_id")
@click.option("--count", type=click.IntRange(1, MAX_TOKENS_PER_REQUEST), required=True,
              help="How many single-use invitation tokens.")
@url_option
@pass_api
def tokens(api: Api, survey_id: str, count: int) -> None:
    """Mint invitation links for an invitation-only survey, one per line. Each carries its
    token in the URL fragment (#t=...), which browsers never send to a server or its logs."""
    result = api.post(f"/api/surveys/{survey_id}/tokens", json_body={"count": count}).json()
    for link in result["links"]:
        click.echo(link)


@click.command()
@url_option
@click.option("--survey", "survey_id", required=True, help="The survey id.")
@confidence_option
@method_option
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON.")
@click.option("--csv", "export", flag_value="csv",
              help="Print the raw randomized responses as CSV (with the design parameters).")
@click.option("--jsonl", "export", flag_value="jsonl", help="The same as JSON lines.")
@pass_api
def results(api: Api, survey_id: str, confidence: float, method: str, as_json: bool,
            export: str | None) -> None:
    """Print a survey's estimates (public surveys need no key), or export its responses."""
    if export:
        click.echo(api.get(f"/api/surveys/{survey_id}/export.{export}").body.decode(), nl=False)
        return
    body = api.get(f"/api/surveys/{survey_id}/estimates?confidence={confidence}&method={method}",
                   auth=None).json()
    if as_json:
        emit_json(body)
        return
    click.echo(f"{body['title']} ({body['status']}); epsilon per respondent "
               f"{body['total_epsilon']:.4g}; {body['confidence']:.0%} {body['ci_method']} CIs")
    rows = [(q["id"], o["option"], o["n"], o["p_hat"], o["p_hat_clipped"], o["standard_error"],
             _interval(o), q["epsilon"])
            for q in body["questions"] for o in q["options"]]
    click.echo(table(rows, ["question", "option", "n", "estimate", "clipped", "SE", "CI", "eps"]))
    for line in release_lines(body):
        click.echo(line)


def _interval(option: dict) -> str:
    if option.get("design_consistent") is False:
        return "data do not fit the design"
    if option.get("ci_low") is None:
        return "-"
    return f"[{option['ci_low']:.4f}, {option['ci_high']:.4f}]"


COMMANDS = (survey, results)
