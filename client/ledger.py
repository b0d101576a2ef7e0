"""The respondent's lifetime ledger: how much epsilon each aggregator signing key has received.

Epsilon adds up over everything one person discloses to the same researchers (sequential
composition), whatever the survey id or the spelling of the address, so the ledger is kept per
signing key. A survey is charged immediately before its first send attempt (a send that is
never acknowledged still counts), and never for a survey prepared but not sent. Sending it again
costs nothing: the same randomized answers reveal nothing new.

Concepts (RAPPOR's permanent randomized response, for surveys): the first report of a concept
under a key, for given options and (alpha, beta), draws a permanent randomized answer; each
report is a fresh randomization of it (the question's irr_alpha, uniform beta). Every report is
post-processing of the permanent answer, so the concept is charged the permanent layer's
epsilon once, when the first survey reporting it is sent; other settings draw, and charge,
afresh.
"""

import json
import math
from typing import TYPE_CHECKING

from ldpsurvey.shared import Question, total_epsilon
from ldpsurvey.shared.budget import exceeds

from .state import LocalState

if TYPE_CHECKING:
    from .verify import VerifiedSurvey


class OverBudget(Exception):
    """Sending this survey would take the key's total above the lifetime budget; nothing is
    sent."""


def concept_key(question: Question) -> str:
    """What a permanent answer is kept under: the concept, the options and the permanent
    layer's alpha and beta."""
    m = question.mechanism
    return json.dumps([question.concept, list(question.options), m.alpha, list(m.beta)])


def concept_status(verified: "VerifiedSurvey", state: LocalState) -> dict[str, str]:
    """Per concept question: "new" (no answer kept for the concept: one is drawn and charged
    once), "reused" (one is kept with these settings: its reports cost nothing more), or
    "redrawn" (kept only with other settings: a new one is drawn and charged)."""
    kept = state.concepts(verified.key_id)
    named = {json.loads(key)[0] for key in kept}
    return {q.id: "reused" if concept_key(q) in kept else
            "redrawn" if q.concept in named else "new"
            for q in verified.survey.questions if q.concept is not None}


def charge_for(verified: "VerifiedSurvey", state: LocalState) -> float:
    """What sending this survey adds to its key's ledger: nothing if it was charged before;
    else each question's epsilon, except a concept whose permanent answer was charged already
    (or earlier in this survey)."""
    if state.record(verified.key_id, verified.survey.survey_id)["charged"] is not None:
        return 0.0
    charged, seen = [], set()
    for question in verified.survey.questions:
        if question.concept is not None:
            key = concept_key(question)
            permanent = state.permanent(verified.key_id, key)
            if key in seen or (permanent and permanent["charged_by"] is not None):
                continue
            seen.add(key)
        charged.append(verified.epsilon[question.id])
    return total_epsilon(charged)


def spent(state: LocalState, kid: str) -> float:
    """The total charged to this key."""
    return total_epsilon(record["charged"] for record in state.surveys(kid).values()
                         if record["charged"] is not None)


def check_lifetime(verified: "VerifiedSurvey", state: LocalState) -> float:
    """What sending this survey would charge; OverBudget, in plain words, if that would take
    its key's total above the respondent's lifetime budget."""
    cost, before = charge_for(verified, state), spent(state, verified.key_id)
    limit = verified.ceilings.lifetime
    if cost and exceeds(before + cost, limit):
        count = sum(r["charged"] is not None for r in state.surveys(verified.key_id).values())
        raise OverBudget(
            f"this survey would add epsilon {cost:.3g} to the {before:.3g} your {count} earlier "
            f"surveys there already disclosed to this aggregator (key {verified.key_id}), "
            f"{before + cost:.3g} in all, above your lifetime budget of {limit:.3g} for it "
            f"(--max-lifetime-epsilon): together your answers could make a guess about you up "
            f"to {math.exp(before + cost):.3g} times likelier. Nothing was sent; "
            "`ldp-survey privacy` lists what it has received.")
    return cost


def charge(verified: "VerifiedSurvey", state: LocalState) -> None:
    """Charge the survey (once) before its first send attempt, and mark the concepts it pays
    for. OverBudget if that would exceed the lifetime budget."""
    survey = verified.survey
    with state.transaction():  # what another run charged meanwhile counts
        cost = check_lifetime(verified, state)
        record = state.record(verified.key_id, survey.survey_id)
        if record["charged"] is not None:
            return
        record.update(charged=cost, title=survey.title)
        for question in survey.questions:
            if question.concept is None:
                continue
            key = concept_key(question)
            permanent = state.permanent(verified.key_id, key)
            if permanent and permanent["charged_by"] is None:
                state.keep_permanent(verified.key_id, key, {**permanent,
                                                             "charged_by": survey.survey_id})
        state.remember(verified.key_id, survey.survey_id, record)


def settle(verified: "VerifiedSurvey", state: LocalState, parameters: str) -> None:
    """A survey sent before the ledger existed was charged an upper bound; seen again, it is
    charged exactly what it asked (those releases had no concepts). The caller has checked
    that it asks exactly the questions answered then (verify.check_unchanged), so a server
    serving a smaller survey cannot lower the charge; its `parameters` are kept from now on."""
    with state.transaction():
        record = state.record(verified.key_id, verified.survey.survey_id)
        if record["estimated"]:
            record.update(charged=verified.total_epsilon, estimated=False,
                          title=verified.survey.title, parameters=parameters)
            state.remember(verified.key_id, verified.survey.survey_id, record)


def summary(state: LocalState, lifetime: float) -> dict:
    """`ldp-survey privacy --json`: per key its id, the origins seen, each survey charged, the
    total spent and what remains of `lifetime`."""
    aggregators = []
    for kid in state.key_ids():
        surveys = [{"survey_id": survey_id, "title": record["title"],
                    "epsilon": record["charged"], "sent": record["submitted"]}
                   for survey_id, record in sorted(state.surveys(kid).items())
                   if record["charged"] is not None]
        total = spent(state, kid)
        aggregators.append({"key_id": kid, "urls": state.urls(kid), "epsilon_spent": total,
                            "epsilon_remaining": max(0.0, lifetime - total),
                            "surveys": surveys})
    return {"aggregators": aggregators}
