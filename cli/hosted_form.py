"""`survey form ID --output DIR`: a copy of a published survey's form for another origin to
serve (aggregator/web/hosted_form.py). The manifest and its signature come from the aggregator,
checked with its key (--public-key, else the key this device pinned for it, if any); the form's
code comes from this installation, and must be the code the survey signs."""

import base64
import binascii
from pathlib import Path
from urllib.parse import quote

import click

from ldpsurvey.cli.api import Api, pass_api, url_option
from ldpsurvey.cli.extras import load
from ldpsurvey.cli.options import json_option
from ldpsurvey.cli.output import emit_json
from ldpsurvey.cli.respond import open_state
from ldpsurvey.client import ApiError, NetworkError
from ldpsurvey.client.form_audit import signed_survey
from ldpsurvey.client.verify import TrustError


@click.command("form")
@click.argument("survey_id")
@click.option("--output", "-o", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The folder to write the copy into (new, or empty).")
@click.option("--public-key", help="The aggregator's public key (base64), as its researchers "
                                   "published it: the served key must be this one.")
@json_option
@url_option
@pass_api
def form(api: Api, survey_id: str, output: Path, public_key: str | None,
         as_json: bool) -> None:
    """Write a copy of published survey SURVEY_ID's form into DIR (under s/SURVEY_ID/), for a
    static host at one of the origins the survey lists in form_origins to serve from its root:
    the page in each of its languages, the form's scripts and stylesheet (this installation's,
    which must be those the survey signs), and the signed manifest with its signature and the
    aggregator's key, which verified it (the key given, else the one this device pinned, if
    any). Respondents there send their answers to the aggregator, which takes them from those
    origins only; no one but the host can change the code they run. Prints the files written
    and the copy's addresses (--json: with the survey's origins)."""
    try:
        key = base64.b64decode(public_key, validate=True) if public_key else None
    except (binascii.Error, ValueError):
        raise click.BadParameter("not base64", param_hint="'--public-key'") from None
    load("ldpsurvey.aggregator")
    hosted_form = load("ldpsurvey.aggregator.web.hosted_form")
    try:
        signed = signed_survey(api.url, survey_id, open_state(), key)
        status = api.get(f"/api/surveys/{quote(survey_id, safe='')}/status", auth=False)
        every = status.json()["release_every"]
        written = hosted_form.write(signed.survey, signed.raw, signed.signature,
                                    signed.public_key, every, output)
    except ApiError as exc:
        hint = (" (a draft is published first; --url is the aggregator's address, not a "
                "respondent's link)" if exc.status == 404 else "")
        raise click.ClickException(f"no copy written: {exc}{hint}") from None
    except (NetworkError, TrustError, ValueError, OSError) as exc:
        raise click.ClickException(f"no copy written: {exc}") from None
    files = [str(path.relative_to(output)) for path in written]
    addresses = [f"{origin}/s/{quote(survey_id, safe='')}/"
                 for origin in signed.survey.form_origins]
    if signed.checked_against is None:
        click.echo(f"the signature was checked with the key the aggregator serves now, key id "
                   f"{signed.survey.key_id}, which this device never pinned: compare it with the "
                   "key id the researchers published, or pass their key with --public-key",
                   err=True)
    if as_json:
        emit_json({"survey_id": survey_id, "folder": str(output), "files": files,
                   "form_origins": list(signed.survey.form_origins), "addresses": addresses,
                   "aggregator": signed.survey.origin, "key_id": signed.survey.key_id,
                   "key_checked_against": signed.checked_against})
        return
    click.echo("\n".join(files))
    click.echo(f"the form of survey {survey_id} written to {output}: serve that folder from the "
               f"root of {' or '.join(signed.survey.form_origins)}, and respondents answer at "
               f"{' or '.join(addresses)}, sending to {signed.survey.origin}. Check a copy with "
               "`ldp-survey verify ADDRESS`", err=True)


COMMANDS = (form,)
