"""The `ldp-survey` command: the one place where client and aggregator code meet.

Commands that need an optional extra import it lazily (see `extras.load`).
"""

import sys

import click

from ldpsurvey.cli import (
    admin,
    deploy,
    mock,
    privacy,
    privacy_math,
    respond,
    results,
    serve,
    survey,
    verify,
)
from ldpsurvey.cli.terminal import clean


class LdpSurveyGroup(click.Group):
    """A click group whose errors are one line on stderr (no usage dump), exit code 2, cleaned
    for the terminal (terminal.clean): an error may quote a server or a page."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            click.echo(f"ldp-survey: error: {clean(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("ldp-survey: aborted", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=LdpSurveyGroup)
@click.version_option(package_name="ldp-survey")
def main() -> None:
    """Local-differential-privacy surveys: randomized response on the respondent's device."""


for module in (mock, privacy_math, serve, admin, survey, results, respond, privacy, deploy,
               verify):
    for command in module.COMMANDS:
        main.add_command(command)
