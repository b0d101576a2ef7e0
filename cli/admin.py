"""`ldp-survey admin`: the aggregator's API keys, administered directly in its database."""

from dataclasses import asdict

import click

from ldpsurvey.cli.aggregator_app import database_option, database_session, instance_option
from ldpsurvey.cli.options import json_option
from ldpsurvey.cli.output import emit_json, table
from ldpsurvey.shared.http_contract import ROLES


@click.group()
def admin() -> None:
    """Administer the aggregator's database directly: API keys."""


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


COMMANDS = (admin,)
