"""`ldp-survey serve`: the aggregator for development on http://HOST:PORT, or for respondents
with --public HOSTNAME (public_site.py)."""

import logging

import click

from ldpsurvey.cli.aggregator_app import (
    database_option,
    database_shown,
    instance_option,
    make_app,
    record_database,
)
from ldpsurvey.cli.extras import load
from ldpsurvey.cli.public_site import checked_site, public_options, serve_public


@click.command()
@database_option
@instance_option
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (development server).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port (development server).")
@click.option("--public", "hostname", metavar="HOSTNAME",
              help="Serve respondents at https://HOSTNAME: gunicorn behind Caddy, which gets the "
                   "certificate, redirects HTTP to HTTPS and sends HSTS.")
@public_options
def serve(database: str | None, instance: str, host: str, port: int, hostname: str | None,
          https_port: int, http_port: int, tls: str) -> None:
    """Run the aggregator: for development on http://HOST:PORT, or for respondents with
    --public HOSTNAME (production mode; Caddy's certificates and CA in the instance folder)."""
    given = click.get_current_context().get_parameter_source
    if hostname is not None:
        named = [f"--{name}" for name in ("host", "port")
                 if given(name) is not click.core.ParameterSource.DEFAULT]
        if named:
            raise click.UsageError(f"{' and '.join(named)} set the development server's address; "
                                   "--public uses --https-port and --http-port")
        serve_public(database, instance, checked_site(hostname, https_port, http_port, tls))
        return
    named = [f"--{name.replace('_', '-')}" for name in ("https_port", "http_port", "tls")
             if given(name) is not click.core.ParameterSource.DEFAULT]
    if named:
        raise click.UsageError(f"{' and '.join(named)} need --public HOSTNAME")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    app = make_app(database, instance)
    record_database(database, instance)
    server = load("ldpsurvey.aggregator.web.serving").make_server(app, host, port)
    click.echo(f"ldp-survey aggregator on http://{host}:{server.server_port} (database: "
               f"{database_shown(app)}); Ctrl-C stops it", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        load("ldpsurvey.aggregator").close_app(app)


COMMANDS = (serve,)
