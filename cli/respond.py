"""`ldp-survey respond`: answer a survey from this device; only randomized answers leave it."""

import base64
import binascii
import json

import click

from ldpsurvey.client import (
    ApiError,
    Ceilings,
    LocalState,
    NetworkError,
    TrustError,
    fetch_survey,
    prepare,
    release_note,
    submit,
    survey_notes,
    unanswered,
)
from ldpsurvey.client.respondent import Submission
from ldpsurvey.client.verify import (
    DEFAULT_MAX_EPSILON,
    DEFAULT_MAX_TOTAL_EPSILON,
    VerifiedSurvey,
)
from ldpsurvey.shared import Question

from .api import Api, pass_api, url_option

YES = {"yes", "y", "1", "true"}
NO = {"no", "n", "0", "false"}


def parse_choice(question: Question, text: str) -> int:
    """yes/no for yes/no questions; an option number (0-based) or an option's text otherwise."""
    value = text.strip().lower()
    if question.type == "yes_no":
        if value in YES:
            return 1
        if value in NO:
            return 0
        raise click.BadParameter(f"question {question.id!r} takes yes or no")
    for index, option in enumerate(question.options):
        if value in (str(index), option.lower()):
            return index
    raise click.BadParameter(f"question {question.id!r} takes an option number from 0 to "
                             f"{len(question.options) - 1} or an option's text")


def parse_answers_option(text: str | None) -> dict[str, str]:
    """'q1=yes,q2=2' -> {'q1': 'yes', 'q2': '2'}."""
    if not text:
        return {}
    pairs = {}
    for item in text.split(","):
        qid, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected question=answer, got {item!r}",
                                     param_hint="'--answers'")
        pairs[qid.strip()] = value
    return pairs


@click.command()
@url_option
@click.option("--survey", "survey_id", required=True, help="The survey id.")
@click.option("--token", help="Invitation token, for invitation-only surveys.")
@click.option("--max-epsilon", type=click.FloatRange(0, min_open=True),
              default=DEFAULT_MAX_EPSILON, show_default="ln 3",
              help="Refuse any question above this epsilon.")
@click.option("--max-total-epsilon", type=click.FloatRange(0, min_open=True),
              default=DEFAULT_MAX_TOTAL_EPSILON, show_default="4 ln 3",
              help="Refuse a survey whose answers together exceed this epsilon.")
@click.option("--answers", "answers_text", metavar="Q=A,...",
              help="Answers without prompting, e.g. smoked=yes,sleep=2.")
@click.option("--yes", "assume_yes", is_flag=True, help="Send without asking to confirm.")
@click.option("--public-key", help="The aggregator's public key (base64), instead of pinning "
              "the key it presents on first use.")
@pass_api
def respond(api: Api, survey_id: str, token: str | None, max_epsilon: float,
            max_total_epsilon: float, answers_text: str | None, assume_yes: bool,
            public_key: str | None) -> None:
    """Answer a survey. Your answers are randomized here; only the randomized ones are sent."""
    state = LocalState()
    verified = verify(api.url, survey_id, state, Ceilings(max_epsilon, max_total_epsilon),
                      public_key)
    true_answers = collect_answers(verified, state, parse_answers_option(answers_text))
    submission = prepare(verified, true_answers, state)
    del true_answers  # from here on only randomized answers exist
    confirm_and_send(verified, submission, state, token, assume_yes)


def verify(url: str, survey_id: str, state: LocalState, ceilings: Ceilings,
           public_key: str | None) -> VerifiedSurvey:
    """Fetch the survey, check its signature against the pinned (or given) key and the
    ceilings, and show its title and privacy budget."""
    try:
        key = base64.b64decode(public_key, validate=True) if public_key else None
    except binascii.Error:
        raise click.BadParameter("not base64", param_hint="'--public-key'") from None
    try:
        verified = fetch_survey(url, survey_id, state, ceilings, key)
    except (TrustError, ApiError, NetworkError, ValueError) as exc:
        raise click.ClickException(f"not answering: {exc}") from None
    survey = verified.survey
    click.echo(f"\n{survey.title}\n{survey.description}\n")
    click.echo(f"Privacy: epsilon {verified.total_epsilon:.3g} for the whole submission "
               f"(your ceilings: {ceilings.per_question:.3g} per question, "
               f"{ceilings.total:.3g} in all).")
    return verified


def collect_answers(verified: VerifiedSurvey, state: LocalState,
                    given: dict[str, str]) -> dict[str, int]:
    """The true answers to the questions not randomized before on this device: from
    --answers, else asked one by one, each with its privacy note."""
    survey = verified.survey
    pending = set(unanswered(verified, state))
    if not pending:
        click.echo("You already answered this survey on this device: the same randomized "
                   "answers are sent again, which reveals nothing new.")
    unknown = set(given) - {q.id for q in survey.questions}
    if unknown:
        raise click.BadParameter(f"no question {sorted(unknown)[0]!r} in this survey",
                                 param_hint="'--answers'")
    notes = survey_notes(verified)
    true_answers = {}
    for question in survey.questions:
        click.echo(f"\n[{question.id}] {question.text}")
        click.echo("  " + "  ".join(f"{j}) {o}" for j, o in enumerate(question.options)))
        click.echo(f"  {notes[question.id]}")
        if question.id not in pending:
            click.echo("  (answered before: the earlier randomized answer is reused)")
        elif question.id in given:
            true_answers[question.id] = parse_choice(question, given[question.id])
        else:
            true_answers[question.id] = click.prompt(
                "  Your answer", value_proc=lambda text, q=question: parse_choice(q, text))
    return true_answers


def confirm_and_send(verified: VerifiedSurvey, submission: Submission, state: LocalState,
                     token: str | None, assume_yes: bool) -> None:
    """Show exactly what will be sent, ask to confirm (unless --yes), send it."""
    survey = verified.survey
    shown = {qid: survey.question(qid).options[index] for qid, index in submission.answers.items()}
    click.echo("\nThis is exactly what will be sent (randomized on this device):")
    click.echo(f"  {json.dumps(submission.body())}   i.e. {shown}")
    click.echo(release_note(survey.release_batch))
    if not assume_yes and not click.confirm("Send it?", default=True):
        click.echo("Not sent. Your randomized answers are kept, so answering later sends the "
                   "same ones.")
        return
    try:
        submit(verified, submission, state, token)
    except (ApiError, NetworkError) as exc:
        raise click.ClickException(f"not sent: {exc}") from None
    click.echo("Sent. Thank you.")


COMMANDS = (respond,)
