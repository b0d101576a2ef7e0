"""Running the aggregator: `serve` for development and `admin` for researcher keys."""

import logging

import click

from ldpsurvey.shared.protocol import ROLES

from .extras import load

database_option = click.option(
    "--database", metavar="URL", envvar="LDP_SURVEY_DATABASE_URL",
    help="sqlite:///PATH or postgresql://... (default: SQLite in the instance folder).")
instance_option = click.option(
    "--instance", type=click.Path(file_okay=False), envvar="LDP_SURVEY_INSTANCE",
    default="instance", show_default=True,
    help="Folder for the development signing key and the SQLite file.")


def make_app(database: str | None, instance: str):
    """The aggregator configured from LDP_SURVEY_* variables; --database overrides one."""
    aggregator = load("ldpsurvey.aggregator")
    try:
        return aggregator.create_app({"DATABASE_URL": database} if database else None,
                                     instance_path=instance)
    except (aggregator.ConfigurationError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None


@click.command()
@database_option
@instance_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
def serve(database: str | None, instance: str, host: str, port: int) -> None:
    """Run the aggregator for development (use gunicorn with deploy/ for production)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    app = make_app(database, instance)
    server = load("ldpsurvey.aggregator.serving").make_server(app, host, port)
    click.echo(f"ldp-survey aggregator on http://{host}:{server.server_port} (database: "
               f"{app.config['DATABASE_URL'].split('@')[-1]}); Ctrl-C stops it", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        load("ldpsurvey.aggregator").close_app(app)


@click.group()
def admin() -> None:
    """Administer the aggregator's database directly."""


@admin.command("create-key")
@database_option
@instance_option
@click.option("--role", type=click.Choice(ROLES), default="researcher", show_default=True,
              help="relay keys may only submit batches.")
def create_key(database: str | None, instance: str, role: str) -> None:
    """Create an API key and print it once; only its hash is stored."""
    app = make_app(database, instance)
    aggregator = load("ldpsurvey.aggregator")
    try:
        key = aggregator.create_api_key(app, role)
    finally:
        aggregator.close_app(app)
    click.echo(key)
    click.echo(f"{role} key created; it is shown only now. Give it to clients as LDP_SURVEY_KEY.",
               err=True)


COMMANDS = (serve, admin)
