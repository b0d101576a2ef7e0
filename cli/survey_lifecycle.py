"""A survey's life from the command line: `survey edit`, `publish`, `copy`, `archive`,
`unarchive` and `delete` (drafts are made by `survey create --draft`), each one call of the
API (see aggregator/services/lifecycle.py); and how `create` and `publish` announce a survey."""

from urllib.parse import quote

import click

from ldpsurvey.cli import check
from ldpsurvey.cli.api import Api, can_prompt, pass_api, url_option
from ldpsurvey.cli.options import json_option
from ldpsurvey.cli.output import emit_json
from ldpsurvey.shared import parse_manifest


def _path(survey_id: str, action: str = "") -> str:
    return f"/api/surveys/{quote(survey_id, safe='')}{action}"


def announce_published(api: Api, result: dict, invitation_only: bool, as_json: bool,
                       form_origins: tuple[str, ...] = ()) -> None:
    """A survey just published: its id (--json: the API's reply and `form_url`, the
    respondents' link, null when invitation only), and on stderr where respondents answer
    and, when other sites may host its form (`form_origins`), how to write their copy."""
    survey_id = result["survey_id"]
    form_url = None if invitation_only else f"{api.url}/s/{survey_id}"
    if as_json:
        emit_json({**result, "form_url": form_url})
    else:
        click.echo(survey_id)
    click.echo(f"published; total epsilon per respondent {result['total_epsilon']:.4g}", err=True)
    if form_url is None:
        click.echo(f"invitation only: mint respondents' links with `ldp-survey survey tokens "
                   f"{survey_id} --count N`", err=True)
    else:
        click.echo(f"respondents answer at {form_url}", err=True)
    if form_origins:
        click.echo(f"its form may also be hosted at {', '.join(form_origins)}: `ldp-survey "
                   f"survey form {survey_id} --output DIR` writes the copy they serve", err=True)


def announce_draft(result: dict, file: str | None, as_json: bool) -> None:
    """A draft just made: its id (--json: the API's reply and `form_url`, null), and on stderr
    what comes next."""
    survey_id = result["survey_id"]
    if as_json:
        emit_json({**result, "form_url": None})
    else:
        click.echo(survey_id)
    edit = f"ldp-survey survey edit {survey_id} {file or 'FILE'}"
    click.echo(f"draft saved, not published (respondents cannot see it); total epsilon per "
               f"respondent {result['total_epsilon']:.4g}. Change it with `{edit}`, preview "
               f"the form with `ldp-survey survey preview FILE`, publish it with "
               f"`ldp-survey survey publish {survey_id}`", err=True)


@click.command("edit")
@click.argument("survey_id")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@check.above_option
@json_option
@url_option
@pass_api
def edit(api: Api, survey_id: str, file: str, above_default_ceilings: bool,
         as_json: bool) -> None:
    """Replace a draft's definition with FILE's (a published survey never changes: `survey
    copy` makes a new draft of it). --json: the API's reply."""
    definition, _ = check.read_guarded(file, above_default_ceilings)
    result = api.call("PUT", _path(survey_id, "/definition"), json_body=definition).json()
    if as_json:
        emit_json(result)
    click.echo(f"draft {survey_id} now holds {file}; total epsilon per respondent "
               f"{result['total_epsilon']:.4g}", err=True)


@click.command("publish")
@click.argument("survey_id")
@json_option
@url_option
@pass_api
def publish(api: Api, survey_id: str, as_json: bool) -> None:
    """Publish a draft under its id: sign its manifest and open it to respondents (as `survey
    create`: its id, or with --json the API's reply and `form_url`)."""
    result = api.post(_path(survey_id, "/publish")).json()
    survey = parse_manifest(api.get(_path(survey_id), auth=False).body)
    announce_published(api, result, survey.invitation_only, as_json, survey.form_origins)


@click.command("copy")
@click.argument("survey_id")
@json_option
@url_option
@pass_api
def copy(api: Api, survey_id: str, as_json: bool) -> None:
    """Copy a survey (published or draft) into a new draft of yours, to change and publish:
    print the new draft's id (--json: the API's reply)."""
    announce_draft(api.post(_path(survey_id, "/copy")).json(), None, as_json)


def _archive(api: Api, survey_id: str, action: str, as_json: bool) -> None:
    result = api.post(_path(survey_id, f"/{action}")).json()
    if as_json:
        emit_json(result)
    shown = ("archived: hidden from `survey list` (see it with --archived), its data kept"
             if result["archived"] else "listed again")
    click.echo(f"survey {survey_id} {shown}", err=True)


@click.command("archive")
@click.argument("survey_id")
@json_option
@url_option
@pass_api
def archive(api: Api, survey_id: str, as_json: bool) -> None:
    """Hide a closed survey from `survey list` and the dashboard, keeping its data (--json:
    the API's reply)."""
    _archive(api, survey_id, "archive", as_json)


@click.command("unarchive")
@click.argument("survey_id")
@json_option
@url_option
@pass_api
def unarchive(api: Api, survey_id: str, as_json: bool) -> None:
    """List an archived survey again (--json: the API's reply)."""
    _archive(api, survey_id, "unarchive", as_json)


@click.command("delete")
@click.argument("survey_id")
@click.option("--yes", is_flag=True, help="Do not ask for the id again (deleting is final).")
@click.option("--force", is_flag=True,
              help="Delete an open survey too (it may hold answers waiting for release).")
@json_option
@url_option
@pass_api
def delete(api: Api, survey_id: str, yes: bool, force: bool, as_json: bool) -> None:
    """Delete a survey or draft and every response, token and counter of it, for good (owner
    or admin). Asks for the id again, unless --yes (--json: the API's reply)."""
    if not yes:
        if not can_prompt():
            raise click.UsageError("deleting a survey is final: confirm with --yes (there is no "
                                   "terminal to ask at)")
        typed = click.prompt(f"Deleting survey {survey_id} removes it and all its responses for "
                             "good. Type its id to confirm", default="", show_default=False,
                             err=True)
        if typed.strip() != survey_id:
            raise click.ClickException("the id typed does not match: nothing was deleted")
    result = api.call("DELETE", _path(survey_id, "?force=true" if force else "")).json()
    if as_json:
        emit_json(result)
    click.echo(f"survey {survey_id} deleted, with all its responses", err=True)


COMMANDS = (edit, publish, copy, archive, unarchive, delete)
