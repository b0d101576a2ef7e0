"""`ldp-survey respond`: answer a survey from this device; only randomized answers leave it."""

import base64
import binascii
import json
from typing import Any

import click

from ldpsurvey.cli.api import URL_VARIABLE, check_url
from ldpsurvey.cli.options import json_option
from ldpsurvey.cli.output import emit_json, messages_to_stderr
from ldpsurvey.cli.terminal import clean
from ldpsurvey.client import (
    OPEN_WORDS,
    WHY_IT_MAY_DIFFER,
    ApiError,
    Ceilings,
    CountedBefore,
    LocalState,
    NetworkError,
    OverBudget,
    SurveyUnavailable,
    TrustError,
    bound_note,
    fetch_survey,
    intro,
    ledger,
    prepare,
    randomized_epsilons,
    release_note,
    release_summary,
    sent_note,
    submit,
    survey_notes,
    unanswered,
)
from ldpsurvey.client.ceilings import (
    DEFAULT_MAX_EPSILON,
    DEFAULT_MAX_LIFETIME_EPSILON,
    DEFAULT_MAX_TOTAL_EPSILON,
)
from ldpsurvey.client.language import N_, _, shown_in, use
from ldpsurvey.client.respondent import Submission
from ldpsurvey.client.urls import Link, parse_link
from ldpsurvey.client.verified import VerifiedSurvey
from ldpsurvey.shared import Question, Survey
from ldpsurvey.shared.survey.manifest import key_id

NOT_ANSWERING = (TrustError, SurveyUnavailable, OverBudget, CountedBefore, ApiError,
                 NetworkError, ValueError)
# What a refusal by the respondent's own limits says first, before the exact reason.
TOO_MUCH = "this survey could reveal more about you than your limits allow"
DETAILS_HINT = N_("(Add --details to see how your answers are protected: the exact chances "
                 "and your limits.)")

LANGUAGE_VARIABLE = "LDP_SURVEY_LANGUAGE"

lifetime_option = click.option(
    "--max-lifetime-epsilon", type=click.FloatRange(0, min_open=True),
    default=DEFAULT_MAX_LIFETIME_EPSILON, show_default="8 ln 3",
    help="Refuse a survey that would take what this device has disclosed, to every aggregator "
         "and signing key together (forgotten ones included), above this epsilon.")
aggregator_option = click.option(
    "--max-aggregator-epsilon", type=click.FloatRange(0, min_open=True), default=None,
    show_default="the lifetime limit",
    help="Also refuse a survey that would take what one aggregator (signing key) has received "
         "from this device above this epsilon.")


def parse_choice(question: Question, text: str) -> Any:
    """A typed true answer, as the question's scheme reads it (scheme.parse_text: yes/no, an
    option number or text, ...)."""
    try:
        return question.scheme.parse_text(text)
    except ValueError as exc:
        raise click.BadParameter(f"question {question.id!r} {exc}") from None


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


def open_state() -> LocalState:
    """This device's store; one clear line if it cannot be read."""
    try:
        return LocalState()
    except (ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None


def read_link(url: str | None, ask: bool, insecure_http: bool) -> Link:
    """The aggregator, and from a survey link its survey id and token: from --url, or typed
    at a prompt that does not echo it (--link). The link itself is never printed."""
    if ask:
        url = click.prompt("Survey link", hide_input=True)
    elif not url:
        raise click.UsageError(f"give the survey link or the aggregator's address with --url "
                               f"(or ${URL_VARIABLE}), or --link to paste the link unseen")
    try:
        link = parse_link(url)
    except ValueError:
        raise click.BadParameter("not an http(s) address or survey link",
                                 param_hint="'--link'" if ask else "'--url'") from None
    check_url(link.base, insecure_http)
    return link


@click.command()
@click.option("--url", envvar=URL_VARIABLE, show_envvar=True,
              help="The survey link you were given (https://host/s/ID#t=TOKEN: it gives "
                   "--survey and --token), or the aggregator's address.")
@click.option("--link", "ask_link", is_flag=True,
              help="Paste the survey link at a prompt that does not echo it (a link on the "
                   "command line reaches `ps` and shell history).")
@click.option("--insecure-http", is_flag=True, help="Allow a plain http:// URL to another machine.")
@click.option("--survey", "survey_id", help="The survey id (not needed with a survey link).")
@click.option("--token", help="Invitation token (not needed with the invitation link).")
@click.option("--max-epsilon", type=click.FloatRange(0, min_open=True),
              default=DEFAULT_MAX_EPSILON, show_default="ln 3",
              help="Refuse any question above this epsilon.")
@click.option("--max-total-epsilon", type=click.FloatRange(0, min_open=True),
              default=DEFAULT_MAX_TOTAL_EPSILON, show_default="4 ln 3",
              help="Refuse a survey whose answers together exceed this epsilon.")
@lifetime_option
@aggregator_option
@click.option("--answers", "answers_text", metavar="Q=A,...",
              help="Answers without prompting, e.g. smoked=yes,sleep=2.")
@click.option("--yes", "assume_yes", is_flag=True, help="Send without asking to confirm.")
@click.option("--details", is_flag=True,
              help="Also show how your answers are protected: each question's exact chances, "
                   "epsilon, your limits and this device's ledger.")
@click.option("--public-key", help="Accept this public key (base64) for the aggregator instead "
              "of pinning the one it presents on first use; what this device kept for a key "
              "pinned before moves to it.")
@click.option("--language", metavar="TAG", envvar=LANGUAGE_VARIABLE, show_envvar=True,
              help="Answer in this language (a tag such as fr or es): the survey's texts if it "
                   "has them (else in its own first language), and this client's words if it "
                   "speaks it (else English).")
@json_option
def respond(url: str | None, ask_link: bool, insecure_http: bool, survey_id: str | None,
            token: str | None, max_epsilon: float, max_total_epsilon: float,
            max_lifetime_epsilon: float, max_aggregator_epsilon: float | None,
            answers_text: str | None, assume_yes: bool, details: bool, public_key: str | None,
            language: str | None, as_json: bool) -> None:
    """Answer a survey. Your answers are randomized here; only the randomized ones are sent.
    What happens is said in everyday words; --details adds the exact chances and limits.
    --json asks no question (every answer still to give comes from --answers; it needs --yes)
    and prints what was sent: the randomized answers, the server's acknowledgement, the
    epsilon charged and this device's ledger for the aggregator; the rest goes to stderr."""
    if as_json and not assume_yes:
        raise click.UsageError("--json asks nothing: add --yes to send, and give every answer "
                               "with --answers")
    use(language)
    with messages_to_stderr(as_json):
        sent = answer(url, ask_link, insecure_http, survey_id, token,
                      Ceilings(max_epsilon, max_total_epsilon, max_lifetime_epsilon,
                               max_aggregator_epsilon),
                      answers_text, assume_yes, public_key, ask=not as_json,
                      details=details, language=language)
    if as_json:
        emit_json(sent)


def answer(url: str | None, ask_link: bool, insecure_http: bool, survey_id: str | None,
           token: str | None, ceilings: Ceilings, answers_text: str | None, assume_yes: bool,
           public_key: str | None, ask: bool, details: bool = False,
           language: str | None = None) -> dict | None:
    """`respond` itself: what was sent (`sent_document`), or None if the respondent declined.
    ask=False: a true answer missing from --answers is a usage error, never a prompt.
    details: also print how the answers are protected (epsilon, limits, exact chances).
    language: show the survey's texts in it (language.shown_in); what is answered is the
    survey as signed."""
    link = read_link(url, ask_link, insecure_http)
    if survey_id and link.survey_id and survey_id != link.survey_id:
        raise click.BadParameter("the link is for another survey", param_hint="'--survey'")
    survey_id = survey_id or link.survey_id
    if not survey_id:
        raise click.UsageError("give --survey, or the survey link with --url or --link")
    state = open_state()
    verified = verify(link.base, survey_id, state, ceilings, public_key, token or link.token,
                      details, language)
    shown = shown_in(verified.survey, language)
    given = parse_answers_option(answers_text)
    true_answers = collect_answers(verified, state, given, ask, details, shown)
    if set(true_answers) - set(given):  # some were typed here: review them before randomizing
        true_answers = review(shown, true_answers)
    try:  # another run may have answered a changed version of it since it was fetched
        submission = prepare(verified, true_answers, state)
    except TrustError as exc:
        raise click.ClickException(clean(f"not answering: {exc}")) from None
    del true_answers  # from here on only randomized answers exist
    return confirm_and_send(verified, submission, state, token or link.token, assume_yes,
                            details, shown)


def verify(url: str, survey_id: str, state: LocalState, ceilings: Ceilings,
           public_key: str | None, token: str | None, details: bool = False,
           language: str | None = None) -> VerifiedSurvey:
    """Fetch the survey, check its signature against the pinned (or given) key, the ceilings,
    that it is open and the lifetime budget; say which key is trusted and show the survey,
    what happens to the answers in everyday words, and with `details` the epsilon, limits and
    ledger."""
    try:
        key = base64.b64decode(public_key, validate=True) if public_key else None
    except binascii.Error:
        raise click.BadParameter("not base64", param_hint="'--public-key'") from None
    before = state.pinned_key(url)
    try:
        verified = fetch_survey(url, survey_id, state, ceilings, key, token)
    except OverBudget as exc:
        raise click.ClickException(clean(f"not answering: {TOO_MUCH}. {exc}")) from None
    except NOT_ANSWERING as exc:
        raise click.ClickException(clean(f"not answering: {exc}")) from None
    if before is None:
        click.echo(f"First use of {verified.aggregator}: this device now trusts its signing key "
                   f"{verified.key_id} and will refuse surveys signed with another.")
    elif key_id(before) != verified.key_id:
        click.echo(f"Accepted signing key {verified.key_id} for {verified.aggregator}; what this "
                   f"device kept for key {key_id(before)} moved to it.")
    survey = shown_in(verified.survey, language)
    click.echo(f"\n{clean(survey.title)}\n{clean(survey.description, keep_newlines=True)}\n")
    click.echo(intro(survey.questions))
    click.echo(bound_note(randomized_epsilons(verified)))
    if not details:
        click.echo(_(DETAILS_HINT))
        return verified
    cost = ledger.charge_for(verified, state)
    click.echo(f"\nHow your answers are protected. Privacy: epsilon "
               f"{verified.total_epsilon:.3g} for the whole submission "
               f"(your ceilings: {ceilings.per_question:.3g} per question, "
               f"{ceilings.total:.3g} in all). Sending it adds {cost.device:.3g} to the "
               f"{ledger.device_spent(state):.3g} this device has disclosed to all aggregators "
               f"(your lifetime budget for this device: {ceilings.lifetime:.3g}); this "
               f"aggregator has received {ledger.spent(state, verified.key_id):.3g} of it"
               + (f" (your limit per aggregator: {ceilings.aggregator:.3g})."
                  if ceilings.aggregator is not None else "."))
    return verified


def collect_answers(verified: VerifiedSurvey, state: LocalState, given: dict[str, str],
                    ask: bool = True, details: bool = False, shown: Survey | None = None
                    ) -> dict[str, Any]:
    """The true answers to the questions not randomized before on this device: from
    --answers, else asked one by one (in `shown`'s words), with `details` each with its
    privacy note (ask=False: a usage error naming the first one missing)."""
    survey = shown or verified.survey
    pending = set(unanswered(verified, state))
    record = state.record(verified.key_id, survey.survey_id)
    if not pending:
        click.echo(again_message(record))
    unknown = set(given) - {q.id for q in survey.questions}
    if unknown:
        raise click.BadParameter(f"no question {sorted(unknown)[0]!r} in this survey",
                                 param_hint="'--answers'")
    notes = survey_notes(verified, ledger.concept_status(verified, state))
    true_answers = {}
    for question in survey.questions:
        click.echo("\n" + clean(f"[{question.id}] {question.text}"))
        click.echo(clean("  " + question.scheme.asked()))
        if question.disclosed:
            click.echo("  " + _(OPEN_WORDS))
        if details:
            click.echo(f"  {notes[question.id]}")
        if question.id in record["answers"]:
            click.echo("  " + _("(you answered this before: that answer is used again)"))
        elif question.id not in pending:
            click.echo("  " + _("(nothing to answer: you answered this in an earlier survey, "
                                "and that answer is used)"))
        elif question.id in given:
            true_answers[question.id] = parse_choice(question, given[question.id])
        elif not ask:
            raise click.UsageError(f"--json asks nothing: give question {question.id!r} "
                                   "with --answers")
        else:
            true_answers[question.id] = click.prompt(
                "  " + _("Your answer"), value_proc=lambda text, q=question: parse_choice(q, text))
    return true_answers


def review(survey: Survey, true_answers: dict[str, Any]) -> dict[str, Any]:
    """Show the true answers, on this device only, and let the respondent change any before
    anything is randomized (once randomized they are final: asking again until a report one
    likes would bias the estimates)."""
    while True:
        click.echo("\n" + (_("Your answers, before the coin flips (only you see them; only "
                             "those marked as answered openly leave this device as they are):")
                           if survey.opened else _("Your answers, before the coin flips (only "
                                                   "you see them; they never leave this "
                                                   "device):")))
        for qid, answer in true_answers.items():
            click.echo(clean(f"  [{qid}] {survey.question(qid).scheme.shown(answer)}"))
        choice = click.prompt(_("Press Enter to flip the coins (then they are final), or type "
                                "a question id to change its answer"), default="",
                              show_default=False).strip()
        if not choice:
            return true_answers
        if choice not in true_answers:
            click.echo(clean("  " + _("{choice} is not one of the questions above").format(
                choice=repr(choice))))
            continue
        question = survey.question(choice)
        true_answers[choice] = click.prompt(
            "  " + _("Your answer"), value_proc=lambda text, q=question: parse_choice(q, text))


def again_message(record: dict) -> str:
    """What answering a survey again does, saying truly whether it was sent before."""
    if record["submitted"]:
        return _("You already sent this survey from this device. The same answers are sent "
                 "again: that reveals nothing new, and they are counted once.")
    if record["charged"] is not None:
        return _("You tried to send this survey from this device before, without confirmation "
                 "that it arrived. The same answers are sent, and counted once.")
    return _("You answered this survey on this device before but did not send it. The same "
             "answers are used, so nothing new is revealed.")


def confirm_and_send(verified: VerifiedSurvey, submission: Submission, state: LocalState,
                     token: str | None, assume_yes: bool, details: bool = False,
                     shown: Survey | None = None) -> dict | None:
    """Show exactly what will be sent (in `shown`'s words; with `details`, the request body
    too), ask to confirm (unless --yes), send it: what was sent (`sent_document`), or None if
    the respondent declined."""
    survey = shown or verified.survey
    click.echo("\n" + _("This is exactly what will be sent, after the coin flips on this "
                        "device:"))
    for qid, report in submission.answers.items():
        click.echo(clean(f"  [{qid}] {survey.question(qid).scheme.plain_report(report)}"))
    click.echo(_(WHY_IT_MAY_DIFFER))
    click.echo(release_summary(survey.release_batch,
                               bool(survey.opened)))
    if details:
        click.echo("As the server reads it:")
        for qid, report in submission.answers.items():
            click.echo(clean(f"  [{qid}] {survey.question(qid).scheme.shown_report(report)}"))
        click.echo(clean(f"The request body: {json.dumps(submission.body())}"))
        click.echo(release_note(survey.release_batch))
    if not assume_yes and not click.confirm(_("Send it?"), default=True):
        click.echo(_("Not sent. Your randomized answers are kept, so answering later sends the "
                     "same ones."))
        return None
    charge = ledger.charge_for(verified, state)
    try:
        reply = submit(verified, submission, state, token)
    except OverBudget as exc:
        raise click.ClickException(clean(f"not sent: {TOO_MUCH}. {exc}")) from None
    except (TrustError, CountedBefore) as exc:
        raise click.ClickException(clean(f"not sent: {exc}")) from None
    except NetworkError as exc:
        raise click.ClickException(
            f"not sent: {clean(str(exc))}. Your randomized answers are kept: running the same "
            "command again sends them, and the server counts them once.") from None
    except ApiError as exc:
        if exc.code == "invalid_token":
            raise click.ClickException(
                "not sent: the server did not accept this invitation: it is unknown or was "
                "already used. Each invitation answers once; if you answered with it before, "
                "on another device or in a browser, that answer was counted.") from None
        raise click.ClickException(clean(f"not sent: {exc}")) from None
    click.echo(sent_note(survey.questions))
    if details:
        click.echo(f"This device has now disclosed epsilon {ledger.device_spent(state):.3g} to "
                   f"all aggregators, of your lifetime budget of "
                   f"{verified.ceilings.lifetime:.3g}; this aggregator has received "
                   f"{ledger.spent(state, verified.key_id):.3g} of it.")
    return sent_document(verified, submission, reply, charge, state)


def sent_document(verified: VerifiedSurvey, submission: Submission, reply: dict,
                  charge: ledger.Charge, state: LocalState) -> dict:
    """`respond --json`: the survey, the body exactly as sent (randomized answers only, never
    a true one), the server's reply (accepted; replayed: it had these answers already and
    counted them once), the epsilon this send added to the device's ledger (0 when charged
    before), and the ledger as `privacy --json` names it: the device's total and what remains
    of its lifetime budget, and what this aggregator key has received. `accepted` is null if
    the server's reply had none (a 2xx is what acknowledges the answers)."""
    spent = ledger.device_spent(state)
    return {"survey_id": submission.survey_id, **submission.body(),
            "accepted": reply.get("accepted"), "replayed": reply["replayed"],
            "epsilon_charged": charge.device, "key_id": verified.key_id,
            "epsilon_spent": spent,
            "epsilon_remaining": max(0.0, verified.ceilings.lifetime - spent),
            "max_lifetime_epsilon": verified.ceilings.lifetime,
            "aggregator_epsilon_spent": ledger.spent(state, verified.key_id)}


COMMANDS = (respond,)
