"""`ldp-survey survey`: init and check a survey file, and the commands that talk to an
aggregator over HTTP: create, list, close, share, unshare, tokens, qr (and from
survey_lifecycle.py, preview.py, xlsform.py and hosted_form.py: edit, publish, copy, archive,
unarchive, delete, preview, the XLSForm import and export, and form, a copy of the form for
another origin to host)."""

from importlib import resources
from urllib.parse import quote

import click

from ldpsurvey.cli import check, hosted_form, preview, survey_lifecycle, xlsform
from ldpsurvey.cli.api import Api, can_prompt, pass_api, url_option
from ldpsurvey.cli.options import json_option
from ldpsurvey.cli.output import emit_json, table
from ldpsurvey.shared.http_contract import MAX_TOKENS_PER_REQUEST


@click.group()
def survey() -> None:
    """Write, check and preview survey files, import them from XLSForms and back; create,
    publish, share, close, archive and delete surveys on an aggregator."""


@survey.command("create")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--draft", is_flag=True,
              help="Keep it as a draft (respondents cannot see it): edit it with `survey edit`, "
                   "publish it with `survey publish`.")
@check.above_option
@json_option
@url_option
@pass_api
def create(api: Api, file: str, draft: bool, above_default_ceilings: bool,
           as_json: bool) -> None:
    """Publish the survey defined in FILE (TOML, or JSON if it ends in .json), or keep it as a
    draft: print its id, or with --json the API's reply and `form_url`, the respondents' link
    (null for a draft, and when invitation only: `survey tokens` mints their links)."""
    definition, parsed = check.read_guarded(file, above_default_ceilings)
    if draft:
        result = api.post("/api/surveys?draft=true", json_body=definition).json()
        survey_lifecycle.announce_draft(result, file, as_json)
    else:
        result = api.post("/api/surveys", json_body=definition).json()
        survey_lifecycle.announce_published(api, result, parsed.invitation_only, as_json,
                                            parsed.form_origins)


STARTER = "starter.toml"  # in ldpsurvey.shared's examples


@survey.command("init")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Overwrite FILE if it exists.")
@json_option
def init(file: str, force: bool, as_json: bool) -> None:
    """Write a commented starter survey to FILE (a yes/no question, a choice question and a
    declared cross-tab) that `survey check` passes and respondents' default ceilings accept
    (--json: the file written and its check report, as `survey check --json`)."""
    text = (resources.files("ldpsurvey.shared") / "examples" / STARTER).read_text()
    try:
        with open(file, "w" if force else "x", encoding="utf-8") as out:
            out.write(text)
    except FileExistsError:
        raise click.ClickException(f"{file} exists: choose another name, or overwrite it with "
                                   "--force") from None
    except OSError as exc:
        raise click.ClickException(f"cannot write {file}: {exc.strerror}") from None
    if as_json:
        emit_json({"file": file, "check": check.report(check.read(file)[1],
                                                       check.DEFAULT_RESPONDENTS)})
    click.echo(f"wrote {file}; next: ldp-survey survey check {file}, then ldp-survey survey "
               f"preview {file}", err=True)


@survey.command("check")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--respondents", type=click.IntRange(1), default=check.DEFAULT_RESPONDENTS,
              show_default=True, help="For the expected margin of error.")
@json_option
def check_survey(file: str, respondents: int, as_json: bool) -> None:
    """Check a survey file without publishing it: per question its epsilon, how sure a guess
    can become, the expected margin, and whether respondents' default ceilings accept it."""
    _, parsed = check.read(file)
    checked = check.report(parsed, respondents)
    if as_json:
        emit_json(checked)
        return
    for line in check.lines(checked, parsed.release_batch):
        click.echo(line)


@survey.command("list")
@click.option("--archived", is_flag=True, help="Archived surveys too.")
@json_option
@url_option
@pass_api
def list_surveys(api: Api, archived: bool, as_json: bool) -> None:
    """Your surveys and drafts (own and shared; an admin's: all), newest first."""
    surveys = api.get(f"/api/surveys?archived={str(archived).lower()}").json()["surveys"]
    if as_json:
        emit_json({"surveys": surveys})
    elif surveys:
        click.echo(table([[s["survey_id"], s["title"],
                           # .get: an aggregator from before archiving lists no such key
                           s["status"] + (" (archived)" if s.get("archived") else ""), s["created"],
                           s["n"], s["invitation_only"]]
                          for s in surveys],
                         ["survey_id", "title", "status", "created", "released",
                          "invitation_only"]))
    else:
        click.echo("no surveys yet: ldp-survey survey create FILE publishes one", err=True)


@survey.command("close")
@click.argument("survey_id")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (closing is final).")
@json_option
@url_option
@pass_api
def close(api: Api, survey_id: str, yes: bool, as_json: bool) -> None:
    """Close a survey for good: it refuses answers from now on (--json: the API's reply)."""
    if not yes:
        if not can_prompt():
            raise click.UsageError("closing a survey is final: confirm with --yes (there is no "
                                   "terminal to ask at)")
        click.confirm(f"Close survey {survey_id} for good? It will refuse every answer from "
                      "now on", abort=True, err=True)
    result = api.post(f"/api/surveys/{survey_id}/close").json()
    if as_json:
        emit_json(result)
    click.echo(f"survey {survey_id} closed", err=True)


@survey.command("share")
@click.argument("survey_id")
@click.option("--with", "name", required=True, metavar="NAME",
              help="The researcher's name (as `ldp-survey admin keys list` shows it).")
@json_option
@url_option
@pass_api
def share(api: Api, survey_id: str, name: str, as_json: bool) -> None:
    """Let another researcher read a survey's results and exports (owner or admin only)."""
    _print_shares(api.call("PUT", _share_path(survey_id, name)).json(), as_json)


@survey.command("unshare")
@click.argument("survey_id")
@click.option("--with", "name", required=True, metavar="NAME", help="The researcher's name.")
@json_option
@url_option
@pass_api
def unshare(api: Api, survey_id: str, name: str, as_json: bool) -> None:
    """Stop sharing a survey with a researcher (owner or admin only)."""
    _print_shares(api.call("DELETE", _share_path(survey_id, name)).json(), as_json)


def _share_path(survey_id: str, name: str) -> str:
    return f"/api/surveys/{quote(survey_id, safe='')}/shares/{quote(name, safe='')}"


def _print_shares(body: dict, as_json: bool) -> None:
    """Whom the survey is shared with now: the API's document with --json, else a line on
    stderr."""
    if as_json:
        emit_json(body)
    names = ", ".join(body["shared_with"]) or "nobody"
    click.echo(f"survey {body['survey_id']} is shared with {names}", err=True)


@survey.command("tokens")
@click.argument("survey_id")
@click.option("--count", type=click.IntRange(1, MAX_TOKENS_PER_REQUEST), required=True,
              help="How many single-use invitation tokens.")
@json_option
@url_option
@pass_api
def tokens(api: Api, survey_id: str, count: int, as_json: bool) -> None:
    """Mint invitation links for an invitation-only survey, one per line (--json: the API's
    reply, its tokens and links). Each carries its token in the URL fragment (#t=...), which
    browsers never send to a server or its logs."""
    result = api.post(f"/api/surveys/{survey_id}/tokens", json_body={"count": count}).json()
    if as_json:
        emit_json(result)
        return
    for link in result["links"]:
        click.echo(link)


@survey.command("qr")
@click.argument("survey_id")
@click.option("--output", "-o", required=True,
              type=click.Path(dir_okay=False, writable=True),
              help="Where to write the QR code: FILE.svg or FILE.png (the name's ending "
                   "chooses the format).")
@url_option
@pass_api
def qr(api: Api, survey_id: str, output: str) -> None:
    """Write the QR code of a published survey's respondent link, for a flyer or a slide
    (an invitation-only survey has none: each respondent needs their own link)."""
    kind = output.rpartition(".")[2].lower()
    if kind not in ("svg", "png"):
        raise click.BadParameter("name a .svg or .png file", param_hint="'--output'")
    image = api.get(f"/api/surveys/{quote(survey_id, safe='')}/qr.{kind}").body
    with open(output, "wb") as file:
        file.write(image)
    click.echo(f"QR code of survey {survey_id}'s respondent link written to {output}", err=True)


for command in (*survey_lifecycle.COMMANDS, *preview.COMMANDS, *xlsform.COMMANDS,
                *hosted_form.COMMANDS):
    survey.add_command(command)

COMMANDS = (survey,)
