"""`survey preview FILE`: the respondent form for a survey file, served on this machine exactly
as respondents will see it, storing and sending nothing (aggregator/web/preview.py)."""

import contextlib
import logging

import click

from ldpsurvey.cli import check
from ldpsurvey.cli.extras import load
from ldpsurvey.cli.options import json_option
from ldpsurvey.cli.output import emit_json
from ldpsurvey.shared import Survey, SurveyError, load_definition


def _reader(file: str):
    """FILE's survey, read again at each call; a file gone or unreadable is a SurveyError the
    preview shows."""

    def read() -> Survey:
        try:
            return load_definition(file)
        except OSError as exc:
            raise SurveyError(f"{file}: {exc.strerror}") from None

    return read


@click.command("preview")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8001, show_default=True,
              help="0 picks a free port.")
@json_option
def preview(file: str, host: str, port: int, as_json: bool) -> None:
    """Serve the form for the survey in FILE exactly as respondents will see it (the real page
    and in-page randomizer), marked as a preview: nothing is stored or sent. FILE is read again
    at each page load: edit it and reload. Prints the address (--json: {"url", "file"}), then
    serves until Ctrl-C."""
    check.read(file)  # a file that does not read stops here, in one line
    load("ldpsurvey.aggregator")
    app = load("ldpsurvey.aggregator.web.preview").preview_app(_reader(file))
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    server = load("ldpsurvey.aggregator.web.serving").make_server(app, host, port)
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)  # noqa: S104  # nosec B104
    url = f"http://{f'[{shown}]' if ':' in shown else shown}:{server.server_port}/"
    if as_json:
        emit_json({"url": url, "file": file})
    else:
        click.echo(url)
    click.echo(f"preview of {file} at {url}: exactly as respondents will see it, but nothing is "
               "stored or sent; reload after editing the file. Ctrl-C stops it", err=True)
    with server, contextlib.suppress(KeyboardInterrupt):  # closed when it stops
        server.serve_forever()


COMMANDS = (preview,)
