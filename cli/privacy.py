"""`ldp-survey privacy`: what this device has disclosed, in all and to each aggregator, and
forgetting an aggregator (which never gives budget back)."""

import click

from ldpsurvey.cli.options import json_option
from ldpsurvey.cli.output import emit_json, messages_to_stderr, table
from ldpsurvey.cli.respond import aggregator_option, lifetime_option, open_state
from ldpsurvey.cli.terminal import clean
from ldpsurvey.client import LocalState, ledger


@click.command()
@json_option
@click.option("--forget", "forget_key", metavar="KEY_ID",
              help="Delete what this device keeps for this aggregator key, after confirming. "
                   "What it was charged stays in this device's total.")
@lifetime_option
@aggregator_option
def privacy(as_json: bool, forget_key: str | None, max_lifetime_epsilon: float,
            max_aggregator_epsilon: float | None) -> None:
    """The device's total against its lifetime budget; per aggregator signing key: its
    addresses, every survey sent to it with the epsilon it charged, and what it received.
    --forget with --json: the confirmation on stderr, then the ledger as it is after
    forgetting."""
    state = open_state()
    if forget_key:
        with messages_to_stderr(as_json):
            forget(state, forget_key)
        if not as_json:
            return
    document = ledger.summary(state, max_lifetime_epsilon, max_aggregator_epsilon)
    if as_json:
        emit_json(document)
        return
    device = document["device"]
    click.echo(f"This device has disclosed epsilon {device['epsilon_spent']:.3g} to all "
               f"aggregators together ({device['forgotten']:.3g} of it to aggregators since "
               f"forgotten): {device['epsilon_remaining']:.3g} of its lifetime budget of "
               f"{max_lifetime_epsilon:.3g} left.")
    if not document["aggregators"]:
        click.echo("It keeps no survey sent to an aggregator.")
    for aggregator in document["aggregators"]:
        click.echo(f"\nAggregator key {aggregator['key_id']} at "
                   f"{', '.join(aggregator['urls']) or '(no address pinned)'}: received epsilon "
                   f"{aggregator['epsilon_spent']:.3g}; "
                   f"{aggregator['epsilon_remaining']:.3g} more may go to it")
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
               f"of {len(surveys)} surveys and its pins. The epsilon it was charged stays in "
               "this device's total (forgetting gives no budget back), and the permanent "
               "answers of concepts stay this device's, with the surveys of this key that were "
               "sent while it reported them: this device refuses to answer a survey that "
               "reports a concept again, which would cost nothing and count you twice. "
               "Answering any other of those surveys again would randomize afresh and spend "
               "budget again, and the server could then hold two different answers from you.")
    click.confirm("Forget it?", abort=True)
    state.forget(kid)
    click.echo(f"Forgotten: key {kid}. The next survey from its addresses pins the key it "
               "presents then.")


COMMANDS = (privacy,)
