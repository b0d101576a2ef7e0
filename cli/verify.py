"""`ldp-survey verify URL`: is the form a survey's page serves the code its manifest signs and
the code of this ldp-survey release? A verdict in plain words (or --json); exit 0 only when
every file matches, 1 when something differs."""

import base64
import binascii
import importlib

import click

from ldpsurvey.cli.api import check_url
from ldpsurvey.cli.options import json_option
from ldpsurvey.cli.output import emit_json
from ldpsurvey.cli.respond import open_state
from ldpsurvey.cli.terminal import clean
from ldpsurvey.client import ApiError, NetworkError
from ldpsurvey.client.form_audit import Audit, PageRenderer, audit
from ldpsurvey.client.urls import parse_link

KEY_WORDS = {
    "pinned": "the key this device pinned for the aggregator",
    "given": "the key given with --public-key",
    None: "nothing: this device has not pinned a key for this aggregator; compare the key id "
          "with the one the researchers published (or pass it with --public-key)",
}


@click.command("verify")
@click.argument("url")
@click.option("--public-key", help="The aggregator's public key (base64), as its researchers "
                                   "published it: the served key must be this one.")
@click.option("--insecure-http", is_flag=True, help="Allow a plain http:// URL to another machine.")
@json_option
def verify(url: str, public_key: str | None, insecure_http: bool, as_json: bool) -> int:
    """Check the respondent form at URL (https://HOST/s/SURVEY_ID, or a copy of it another
    origin hosts: `survey form`): fetch the page, the signed manifest, its signature and the
    key (a copy's manifest must be the aggregator's, byte for byte, and list its origin);
    check the signature (and the key this device pinned, or --public-key); fetch every script,
    module (imports too) and stylesheet the page loads and compare each with the SHA-384
    digests the survey signs and those of this installed ldp-survey release. Exit 0 only when
    everything matches."""
    try:
        link = parse_link(url)
    except ValueError:
        raise click.BadParameter("not an http(s) survey link", param_hint="'URL'") from None
    check_url(link.base, insecure_http)
    try:
        key = base64.b64decode(public_key, validate=True) if public_key else None
    except (binascii.Error, ValueError):
        raise click.BadParameter("not base64", param_hint="'--public-key'") from None
    try:
        found = audit(url, open_state(), key, page_renderer())
    except (ApiError, NetworkError, ValueError) as exc:
        raise click.ClickException(f"could not check {url}: {exc}") from None
    if as_json:
        emit_json(found.as_json())
    else:
        click.echo(verdict(found))
    return 0 if found.matches else 1


def page_renderer() -> PageRenderer | None:
    """How this release writes a copy's pages (hosted_form.render), if the server extra is
    installed: `verify` compares a copy's pages with it."""
    try:
        hosted_form = importlib.import_module("ldpsurvey.aggregator.web.hosted_form")
    except ImportError:
        return None
    return lambda survey, language, every: hosted_form.render(survey, language, every).encode()


def verdict(found: Audit) -> str:
    """The verdict for a reader who is not a programmer (an ethics board), cleaned for the
    terminal: its addresses, names and problems come from the page and its servers."""
    return clean(plain_verdict(found), keep_newlines=True)


def plain_verdict(found: Audit) -> str:
    checked = sum(file.served is not None for file in found.files)
    if found.matches:
        lines = [f"MATCHES: the form at {found.url} is exactly the code that survey "
                 f"{found.survey_id} signs, and exactly the form of ldp-survey {found.release}.",
                 f"Checked {checked} files (every script, module and stylesheet the page loads)."]
    else:
        lines = [f"DOES NOT MATCH: the form at {found.url} is not exactly the code that survey "
                 f"{found.survey_id} signs and ldp-survey {found.release} ships. Do not answer "
                 "it in a browser until this is explained.", "", "What differs:",
                 *(f"  - {problem}" for problem in found.problems)]
    if found.aggregator:
        lines += ["", f"A copy of the form: answers go to {found.aggregator}.",
                  *(f"  - {check}" for check in found.copy_checks)]
    if found.key_id:
        lines += ["", f"Signing key {found.key_id}, checked against "
                  f"{KEY_WORDS[found.key_checked_against]}."]
    lines += ["", *(f"  {'ok  ' if file.matches else 'DIFF'}  {file.name:<16} {file.url}"
                    for file in found.files)]
    return "\n".join(lines).rstrip()


COMMANDS = [verify]
