"""The respondent's lifetime ledger: how much epsilon this device has disclosed, in all and to
each aggregator signing key.

Epsilon adds up over everything one person discloses (sequential composition): researchers who
run several aggregators, or rotate their signing key, or share what they collect, learn the sum.
So the lifetime limit is the device's, over every key it answered (and every key it forgot:
forgetting never gives budget back); a lower limit per key is optional. A survey is charged
immediately before its first send attempt (a send that is never acknowledged still counts),
and never for a survey prepared but not sent. Sending it again costs nothing: the same
randomized answers reveal nothing new.

Concepts (RAPPOR's permanent randomized response, for surveys): the first report of a concept
on this device, for given options and (alpha, beta), draws a permanent randomized answer,
whichever aggregator asks; each report is a fresh randomization of it (the question's
irr_alpha, uniform beta). Every report is post-processing of the permanent answer, so the
device is charged the permanent layer's epsilon once, when the first survey reporting it is
sent; other settings draw, and charge, afresh. A key that had not received the concept before
counts it in its own total too (what that aggregator learned), not in the device's again.
"""

import json
import math
from dataclasses import dataclass

from ldpsurvey.client.state import LocalState
from ldpsurvey.client.verified import VerifiedSurvey
from ldpsurvey.shared import Question, total_epsilon
from ldpsurvey.shared.mechanisms.budget import exceeds


class OverBudget(Exception):
    """Sending this survey would take the device's total (or its key's, under a per-aggregator
    limit) above the lifetime budget; nothing is sent."""


class CountedBefore(Exception):
    """This device sent (or tried to send) this survey, which reports a concept, before its
    key was forgotten: reusing the concept's permanent answer would cost nothing, and the
    survey would count the device twice in its n; nothing is sent."""


@dataclass(frozen=True)
class Charge:
    """What sending a survey adds: to the device's total, and to its key's (at least as much:
    a concept paid for under another key is new to this one)."""

    device: float
    aggregator: float


def concept_key(question: Question) -> str:
    """What a permanent answer is kept under: the concept, the options and the permanent
    layer's alpha and beta."""
    m = question.mechanism
    return json.dumps([question.concept, list(question.options), m.alpha, list(m.beta)])


def concept_status(verified: VerifiedSurvey, state: LocalState) -> dict[str, str]:
    """Per concept question: "new" (no answer kept for the concept: one is drawn and charged
    once), "reused" (one is kept with these settings: its reports cost nothing more), or
    "redrawn" (kept only with other settings: a new one is drawn and charged)."""
    kept = state.concepts()
    named = {json.loads(key)[0] for key in kept}
    return {q.id: "reused" if concept_key(q) in kept else
            "redrawn" if q.concept in named else "new"
            for q in verified.survey.questions if q.concept is not None}


def charge_for(verified: VerifiedSurvey, state: LocalState) -> Charge:
    """What sending this survey adds: nothing if it was charged before; else each question's
    epsilon, except that a concept whose permanent answer was charged already (or earlier in
    this survey) adds nothing to the device, and to the key only if no survey sent to it
    reported the concept before."""
    if state.record(verified.key_id, verified.survey.survey_id)["charged"] is not None:
        return Charge(0.0, 0.0)
    kid = state.resolve(verified.key_id)
    device, aggregator, seen = [], [], set()
    for question in verified.survey.questions:
        epsilon = verified.epsilon[question.id]
        if question.concept is not None:
            key = concept_key(question)
            if key in seen:
                continue
            seen.add(key)
            permanent = state.permanent(key)
            if permanent and permanent["charged_by"] is not None:
                if kid not in permanent["keys"]:
                    aggregator.append(epsilon)
                continue
        device.append(epsilon)
        aggregator.append(epsilon)
    return Charge(total_epsilon(device), total_epsilon(aggregator))


def spent(state: LocalState, kid: str) -> float:
    """What this key has learned from this device: the epsilon disclosed to it."""
    return total_epsilon(record["disclosed"] or 0.0 for record in state.surveys(kid).values())


def device_spent(state: LocalState) -> float:
    """The device's total: every key's charges, those of migrated records waiting for their
    key, and those of forgotten keys."""
    charged = [record["charged"] or 0.0 for kid in state.key_ids()
               for record in state.surveys(kid).values()]
    charged += [record["charged"] or 0.0 for at in state.unkeyed_origins()
                for record in state.unkeyed(at).values()]
    return total_epsilon([*charged, state.forgotten()])


def check_counted_once(verified: VerifiedSurvey, state: LocalState) -> None:
    """CountedBefore if a concept this survey reports lists it among the surveys of a
    forgotten key (LocalState.forget)."""
    sent = [state.resolve(verified.key_id), verified.survey.survey_id]
    for question in verified.survey.questions:
        permanent = state.permanent(concept_key(question)) if question.concept else None
        if permanent and sent in permanent.get("forgotten_surveys", []):
            raise CountedBefore(
                f"this device sent survey {sent[1]} to aggregator key {sent[0]} before that "
                "key was forgotten (ldp-survey privacy --forget), and it reports a concept "
                "whose permanent answer this device keeps: answering again would count you "
                "twice in its results. Nothing was sent.")


def check_lifetime(verified: VerifiedSurvey, state: LocalState) -> Charge:
    """What sending this survey would charge; OverBudget, in plain words, if that would take
    the device's total above the lifetime budget, or its key's above a per-aggregator limit;
    CountedBefore (check_counted_once) if the survey was sent before its key was forgotten."""
    check_counted_once(verified, state)
    cost, before = charge_for(verified, state), device_spent(state)
    limit = verified.ceilings.lifetime
    if cost.device and exceeds(before + cost.device, limit):
        raise OverBudget(
            f"this survey would add epsilon {cost.device:.3g} to the {before:.3g} this device "
            f"has already disclosed to every aggregator it answered (forgotten ones "
            f"included), {before + cost.device:.3g} in all, above your lifetime budget of {limit:.3g} "
            f"for this device, which counts every aggregator and key together "
            f"(--max-lifetime-epsilon): together your answers could make a guess about you "
            f"up to {math.exp(before + cost.device):.3g} times likelier. Nothing was sent; "
            "`ldp-survey privacy` lists what each has received.")
    bound, received = verified.ceilings.aggregator, spent(state, verified.key_id)
    if bound is not None and cost.aggregator and exceeds(received + cost.aggregator, bound):
        raise OverBudget(
            f"this survey would add epsilon {cost.aggregator:.3g} to the {received:.3g} this "
            f"aggregator (key {verified.key_id}) has already received from this device, "
            f"{received + cost.aggregator:.3g} in all, above your limit of {bound:.3g} per "
            f"aggregator (--max-aggregator-epsilon). Nothing was sent; `ldp-survey privacy` "
            "lists what it has received.")
    return cost


def charge(verified: VerifiedSurvey, state: LocalState) -> None:
    """Charge the survey (once) before its first send attempt, and mark the concepts it
    reports: paid for (if not yet) and known to its key. OverBudget if that would exceed a
    lifetime budget."""
    survey = verified.survey
    with state.transaction():  # what another run charged meanwhile counts
        cost = check_lifetime(verified, state)
        record = state.record(verified.key_id, survey.survey_id)
        if record["charged"] is not None:
            return
        record.update(charged=cost.device, disclosed=cost.aggregator, title=survey.title)
        kid = state.resolve(verified.key_id)
        for question in survey.questions:
            permanent = state.permanent(concept_key(question)) if question.concept else None
            if permanent is None:
                continue
            if permanent["charged_by"] is None:
                permanent["charged_by"] = survey.survey_id
            if kid not in permanent["keys"]:
                permanent["keys"].append(kid)
            state.keep_permanent(concept_key(question), permanent)
        state.remember(verified.key_id, survey.survey_id, record)


def settle(verified: VerifiedSurvey, state: LocalState, parameters: str) -> None:
    """A survey sent before the ledger existed was charged an upper bound; seen again, it is
    charged exactly what it asked (those releases had no concepts). The caller has checked
    that it asks exactly the questions answered then (verify.check_unchanged), so a server
    serving a smaller survey cannot lower the charge; its `parameters` are kept from now on."""
    with state.transaction():
        record = state.record(verified.key_id, verified.survey.survey_id)
        if record["estimated"]:
            record.update(charged=verified.total_epsilon, disclosed=verified.total_epsilon,
                          estimated=False, title=verified.survey.title, parameters=parameters)
            state.remember(verified.key_id, verified.survey.survey_id, record)


def summary(state: LocalState, lifetime: float, aggregator: float | None = None) -> dict:
    """`ldp-survey privacy --json`: the device's total (with what forgotten keys were charged)
    and what remains of `lifetime`; per key its id, the origins seen, each survey charged, the
    total it received and what remains for it (of the device's budget, and of `aggregator`
    when given)."""
    device = device_spent(state)
    left = max(0.0, lifetime - device)
    aggregators = []
    for kid in state.key_ids():
        surveys = [{"survey_id": survey_id, "title": record["title"],
                    "epsilon": record["charged"], "disclosed": record["disclosed"],
                    "sent": record["submitted"]}
                   for survey_id, record in sorted(state.surveys(kid).items())
                   if record["charged"] is not None]
        total = spent(state, kid)
        remaining = left if aggregator is None else min(left, max(0.0, aggregator - total))
        aggregators.append({"key_id": kid, "urls": state.urls(kid), "epsilon_spent": total,
                            "epsilon_remaining": remaining, "surveys": surveys})
    return {"device": {"epsilon_spent": device, "epsilon_remaining": left,
                       "lifetime_limit": lifetime, "aggregator_limit": aggregator,
                       "forgotten": state.forgotten()},
            "aggregators": aggregators}
