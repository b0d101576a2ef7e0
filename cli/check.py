"""What a survey asks of its respondents, before it is published: `survey check`, and the
guard `survey create` applies (a survey respondents' default ceilings would refuse)."""

from ldpsurvey.client.ceilings import DEFAULTS
from ldpsurvey.shared import Survey, expected_margin, posterior_bounds
from ldpsurvey.shared.budget import exceeds

DEFAULT_RESPONDENTS = 1000


def report(survey: Survey, respondents: int) -> dict:
    """Per question its epsilon, the posterior bound (how sure a guess starting at 1/2 can
    become after seeing the report: e^eps / (1 + e^eps)) and the expected 95 % margin with
    `respondents` answers; whether respondents with the default ceilings accept the survey."""
    questions = [{"id": q.id, "epsilon": q.epsilon,
                  "posterior_max": posterior_bounds(0.5, q.epsilon).high,
                  "margin": expected_margin(q.reported_mechanism, respondents)}
                 for q in survey.questions]
    return {"title": survey.title, "respondents": respondents,
            "total_epsilon": survey.total_epsilon,
            "accepted_by_default": not refusals(survey),
            "questions": questions}


def refusals(survey: Survey) -> list[str]:
    """Why a respondent with the default ceilings would refuse the survey (empty: accepted)."""
    reasons = [f"question {q.id!r} asks for epsilon {q.epsilon:.4g}, above the default "
               f"{DEFAULTS.per_question:.4g} (ln 3) per question"
               for q in survey.questions if exceeds(q.epsilon, DEFAULTS.per_question)]
    if exceeds(survey.total_epsilon, DEFAULTS.total):
        reasons.append(f"the survey asks for {survey.total_epsilon:.4g} in all, above the "
                       f"default {DEFAULTS.total:.4g} (4 ln 3) per submission")
    return reasons


def lines(checked: dict, release_batch: int) -> list[str]:
    """The report for people."""
    out = [f"{checked['title']}: total epsilon per respondent {checked['total_epsilon']:.4g}"]
    for q in checked["questions"]:
        out.append(f"  {q['id']}: epsilon {q['epsilon']:.4g}; a guess of 50 % can become at "
                   f"most {q['posterior_max']:.0%}; expected margin ±{q['margin']:.1%} with "
                   f"{checked['respondents']:,} respondents")
    out.append("respondents with default ceilings will accept it" if checked["accepted_by_default"]
               else "respondents with default ceilings will REFUSE it")
    out.append(f"results stay hidden until {release_batch} responses arrive, then move in "
               f"steps of {release_batch} (release_batch)")
    return out
