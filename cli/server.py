"""Running the aggregator: `serve` for development and `admin` for API keys."""

import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from ldpsurvey.cli.extras import load
from ldpsurvey.cli.options import json_option
from ldpsurvey.cli.output import emit_json, table
from ldpsurvey.cli.public import checked_site, public_options, serve_public
from ldpsurvey.shared.http_contract import ROLES

database_option = click.option(
    "--database", metavar="URL", envvar="LDP_SURVEY_DATABASE_URL",
    help="sqlite:///PATH or postgresql://... (default: SQLite in the instance folder).")
instance_option = click.option(
    "--instance", type=click.Path(file_okay=False), envvar="LDP_SURVEY_INSTANCE",
    default="instance", show_default=True,
    help="Folder for the development signing key, the SQLite file, and the database "
         "`serve --database` was last given (used when none is named).")


def database_shown(app) -> str:
    """The app's database URL without user and password."""
    return load("ldpsurvey.aggregator.store.connection").display_url(app.config["DATABASE_URL"])


DATABASE_FILE = "database-url"  # in the instance folder: the database `serve` was given


def served_database(database: str | None, instance: str) -> str | None:
    """--database (or LDP_SURVEY_DATABASE_URL), else the database `serve` was last given for
    this instance folder (recorded there), else None: SQLite in the folder."""
    if database:
        return database
    try:
        return (Path(instance) / DATABASE_FILE).read_text().strip() or None
    except FileNotFoundError:
        return None


def record_database(database: str | None, instance: str) -> None:
    """Remember a database given to `serve` in its instance folder (mode 0600: the URL may
    hold a password), so that `admin` commands naming the folder reach the same database."""
    if not database:
        return
    folder = Path(instance)
    # a new file of a fresh name (O_EXCL, 0600): never one planted there, nor a link's target
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=f".{DATABASE_FILE}.")
    with open(descriptor, "w") as file:
        file.write(database + "\n")
    os.replace(temporary, folder / DATABASE_FILE)


def make_app(database: str | None, instance: str):
    """The aggregator configured from LDP_SURVEY_* variables; --database overrides one, and
    without either, the database `serve` was given for this instance folder (served_database)."""
    aggregator = load("ldpsurvey.aggregator")
    database = served_database(database, instance)
    try:
        return aggregator.create_app({"DATABASE_URL": database} if database else None,
                                     instance_path=instance)
    except (aggregator.ConfigurationError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None


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


@click.group()
def admin() -> None:
    """Administer the aggregator's database directly: API keys."""


@contextmanager
def database_session(database_url: str | None, instance: str) -> Iterator[tuple[Any, Any]]:
    """The aggregator package and an app context on the configured database; the domain
    errors of its services become one-line CLI errors. Says which database it uses, and
    refuses to start a new, empty instance folder nobody named (run from another folder, it
    would make keys the running server never sees)."""
    named = click.get_current_context().get_parameter_source("instance")
    if (database_url is None and named is click.core.ParameterSource.DEFAULT
            and not Path(instance).is_dir()):
        raise click.ClickException(
            f"no aggregator instance folder at ./{instance}: run this where `ldp-survey serve` "
            "runs, or name the server's database with --database or --instance (or "
            "LDP_SURVEY_DATABASE_URL, LDP_SURVEY_INSTANCE)")
    aggregator = load("ldpsurvey.aggregator")
    app = make_app(database_url, instance)
    try:
        with app.app_context():
            yield aggregator, load("ldpsurvey.aggregator.web.request_connection").get_db()
    except aggregator.DomainError as exc:
        raise click.ClickException(str(exc)) from None
    else:
        click.echo(f"database: {database_shown(app)}", err=True)
    finally:
        aggregator.close_app(app)


@admin.command("create-key")
@database_option
@instance_option
@click.option("--name", help="The new researcher the key is for (default: a generated name).")
@click.option("--existing", is_flag=True,
              help="Give another key to the existing researcher --name (names are never "
                   "given to anyone else).")
@click.option("--role", type=click.Choice(ROLES), default="researcher", show_default=True,
              help="relay keys only submit batches to their --survey; admin keys may do "
                   "anything to any survey.")
@click.option("--survey", "surveys", multiple=True, metavar="ID",
              help="A survey a relay key may submit batches to (repeatable; relay keys only).")
@json_option
def create_key(database: str | None, instance: str, name: str | None, existing: bool,
               role: str, surveys: tuple[str, ...], as_json: bool) -> None:
    """Create an API key and print it (only it, on stdout) once; only its hash is stored.
    --json: the key with its api_key_id, name, role and new_researcher (as `keys list`)."""
    with database_session(database, instance) as (aggregator, db):
        issued = aggregator.accounts.create_key(db, role, name, surveys, existing)
    if as_json:
        emit_json(asdict(issued))
    else:
        click.echo(issued.key)
    whose = "new researcher" if issued.new_researcher else "researcher"
    click.echo(f"{role} key {issued.api_key_id} for {whose} {issued.name!r} created; it is shown "
               "only now. Give it to clients as LDP_SURVEY_KEY.", err=True)


@admin.group()
def keys() -> None:
    """List and revoke API keys."""


@keys.command("list")
@database_option
@instance_option
@json_option
def list_keys(database: str | None, instance: str, as_json: bool) -> None:
    """Every key: its id, researcher, role, the day made and the day last used."""
    with database_session(database, instance) as (aggregator, db):
        listing = aggregator.accounts.list_keys(db)
    records = [asdict(entry) for entry in listing]
    if as_json:
        emit_json({"keys": records})
    elif records:
        click.echo(table([list(r.values()) for r in records], list(records[0])))
    else:
        click.echo("no keys yet: ldp-survey admin create-key makes one", err=True)


@keys.command("revoke")
@click.argument("api_key_id")
@database_option
@instance_option
@json_option
def revoke(api_key_id: str, database: str | None, instance: str, as_json: bool) -> None:
    """Revoke a key at once, for the API and for the results-page sessions it opened (--json:
    its api_key_id and status "revoked", as `survey close --json` gives a survey's)."""
    with database_session(database, instance) as (aggregator, db):
        aggregator.accounts.revoke(db, api_key_id)
    if as_json:
        emit_json({"api_key_id": api_key_id, "status": "revoked"})
    click.echo(f"key {api_key_id} revoked; requests and sessions with it now fail", err=True)


COMMANDS = (serve, admin)
