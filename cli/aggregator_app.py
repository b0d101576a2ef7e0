"""The aggregator app the server commands (`serve`, `admin`, `serve --public`) run on: the
--database and --instance options, the database `serve` was last given for an instance folder,
and an app context on it for `admin`."""

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from ldpsurvey.cli.extras import load

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
