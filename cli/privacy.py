"""`ldp-survey privacy`: what this device has disclosed to each aggregator, and forgetting it."""

import click

from ldpsurvey.client import LocalState, ledger

from .options import json_option
from .output import emit_json, messages_to_stderr, table
from .respond import lifetime_option, open_state
from .terminal import clean


@click.command()
@json_option
@click.option("--forget", "forget_key", metavar="KEY_ID",
              help="Delete what this device keeps for this aggregator key, after confirming.")
@lifetime_option
def privacy(as_json: bool, forget_key: str | None, max_lifetime_epsilon: float) -> None:
    """Per aggregator signing key: its addresses, every survey sent to it with the epsilon it
    charged, the total spent and what remains of the lifetime budget. --forget with --json:
    the confirmation on stderr, then the ledger as it is after forgetting."""
    state = open_state()
    if forget_key:
        with messages_to_stderr(as_json):
            forget(state, forget_key)
        if not as_json:
            return
    document = ledger.summary(state, max_lifetime_epsilon)
    if as_json:
        emit_json(document)
        return
    if not document["aggregators"]:
        click.echo("This device has sent no survey yet.")
    for aggregator in document["aggregators"]:
        click.echo(f"\nAggregator key {aggregator['key_id']} at "
                   f"{', '.join(aggregator['urls']) or '(no address pinned)'}: epsilon "
                   f"{aggregator['epsilon_spent']:.3g} spent, "
                   f"{aggregator['epsilon_remaining']:.3g} of {max_lifetime_epsilon:.3g} left")
        rows = [(s["survey_id"], clean(s["title"] or "(sent before the ledger existed; "
                                                       "charged at most)"),
                 s["epsilon"], s["sent"]) for s in aggregator["surveys"]]
        click.echo(table(rows, ("survey", "title", "epsilon", "acknowledged")))
    for origin in state.unkeyed_origins():
        click.echo(f"\nAnswers kept for {origin} join the ledger of the key it presents next.")
    click.echo("\nA web browser keeps its own, separate record for each site.")


def forget(state: LocalState, kid: str) -> None:
    """Delete a key's records after a confirmation that says what is lost."""
    kid = state.resolve(kid)
    if kid not in state.key_ids():
        raise click.BadParameter(f"this device keeps nothing for key {kid!r}; `ldp-survey "
                                 "privacy` lists the keys", param_hint="'--forget'")
    surveys = state.surveys(kid)
    click.echo(f"This deletes what this device keeps for aggregator key {kid} "
               f"({', '.join(state.urls(kid)) or 'no address pinned'}): the randomized answers "
               f"of {len(surveys)} surveys, {len(state.concepts(kid))} permanent answers, the "
               f"record of epsilon {ledger.spent(state, kid):.3g} spent, and its pins. Answering "
               "any of those surveys again would randomize afresh and spend budget again, and "
               "the server could then hold two different answers from you.")
    click.confirm("Forget it?", abort=True)
    state.forget(kid)
    click.echo(f"Forgotten: key {kid}. The next survey from its addresses pins the key it "
               "presents then.")


COMMANDS = (privacy,)
