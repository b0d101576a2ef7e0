"""Researcher commands that talk to an aggregator over HTTP: survey create/close, results."""

import os

import click

from ldpsurvey.client import http
from ldpsurvey.shared import SurveyError, parse_definition, read_definition

from .options import confidence_option, method_option, url_option
from .output import emit_json, table


def researcher_key() -> str:
    """The key from LDP_SURVEY_KEY, else asked for without echo (never a command-line flag,
    which would leak into shell history and `ps`)."""
    key = os.environ.get("LDP_SURVEY_KEY")
    return key or click.prompt("Researcher key", hide_input=True)


def call(method: str, url: str, *, key: str | None = None, headers: dict | None = None,
         **kwargs) -> http.Response:
    """An API call whose failure becomes one clear line and a non-zero exit."""
    headers = dict(headers or {})
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        return http.request(method, url, headers=headers, **kwargs)
    except (http.ApiError, http.NetworkError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


@click.group()
def survey() -> None:
    """Create and close surveys on an aggregator."""


@survey.command("create")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@url_option
def create(file: str, url: str) -> None:
    """Publish the survey defined in FILE (TOML, or JSON if it ends in .json)."""
    try:
        definition = read_definition(file)
        parse_definition(definition)  # validate here first: errors name the question and field
    except (SurveyError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    result = call("POST", f"{url}/api/surveys", key=researcher_key(),
                  json_body=definition).json()
    click.echo(result["survey_id"])
    click.echo(f"published; total epsilon per respondent {result['total_epsilon']:.4g}; "
               f"respondents answer at {url}/s/{result['survey_id']}", err=True)


@survey.command("close")
@click.argument("survey_id")
@url_option
def close(survey_id: str, url: str) -> None:
    """Close a survey for good: it refuses answers from now on."""
    call("POST", f"{url}/api/surveys/{survey_id}/close", key=researcher_key())
    click.echo(f"survey {survey_id} closed", err=True)


@survey.command("tokens")
@click.argument("survey_id")
@click.option("--count", type=click.IntRange(1, 10_000), required=True,
              help="How many single-use invitation tokens.")
@url_option
def tokens(survey_id: str, count: int, url: str) -> None:
    """Mint invitation links for an invitation-only survey, one per line. Each carries its
    token in the URL fragment (#t=...), which browsers never send to a server or its logs."""
    result = call("POST", f"{url}/api/surveys/{survey_id}/tokens",
                  key=researcher_key(), json_body={"count": count}).json()
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
def results(url: str, survey_id: str, confidence: float, method: str, as_json: bool,
            export: str | None) -> None:
    """Print a survey's estimates (public surveys need no key), or export its responses."""
    if export:
        body = call("GET", f"{url}/api/surveys/{survey_id}/export.{export}",
                    key=researcher_key()).body
        click.echo(body.decode(), nl=False)
        return
    address = (f"{url}/api/surveys/{survey_id}/estimates"
               f"?confidence={confidence}&method={method}")
    try:
        body = http.request("GET", address, headers=_optional_auth()).json()
    except http.ApiError as exc:
        if exc.status != 401:
            raise click.ClickException(str(exc)) from None
        body = call("GET", address, key=researcher_key()).json()
    except (http.NetworkError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        emit_json(body)
        return
    click.echo(f"{body['title']} ({body['status']}); epsilon per respondent "
               f"{body['total_epsilon']:.4g}; {body['confidence']:.0%} {body['ci_method']} CIs")
    rows = [(q["id"], o["option"], o["n"], o["p_hat"], o["p_hat_clipped"], o["standard_error"],
             _interval(o), q["epsilon"])
            for q in body["questions"] for o in q["options"]]
    click.echo(table(rows, ["question", "option", "n", "estimate", "clipped", "SE", "CI", "eps"]))


def _optional_auth() -> dict[str, str]:
    key = os.environ.get("LDP_SURVEY_KEY")
    return {"Authorization": f"Bearer {key}"} if key else {}


def _interval(option: dict) -> str:
    if option.get("design_consistent") is False:
        return "data do not fit the design"
    if option.get("ci_low") is None:
        return "-"
    return f"[{option['ci_low']:.4f}, {option['ci_high']:.4f}]"


COMMANDS = (survey, results)
