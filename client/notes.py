"""Plain-words privacy notes for respondents, from a survey's own numbers."""

from ldpsurvey.shared import Question, posterior_bounds

from .verify import VerifiedSurvey


def percent(p: float) -> str:
    return f"{100 * p:.0f} %"


def question_note(question: Question, epsilon: float, total_epsilon: float) -> str:
    """What the server receives for each answer, and how sure an observer could become."""
    m = question.mechanism
    if question.type == "yes_no":
        what = (f"If you answer Yes, the server receives Yes with {percent(m.probability(1, 1))} "
                f"probability and No with {percent(m.probability(1, 0))}; if you answer No, it "
                f"receives No with {percent(m.probability(0, 0))} and Yes with "
                f"{percent(m.probability(0, 1))}.")
        belief = "you would say Yes"
    else:
        kept = [m.probability(j, j) for j in range(m.k)]
        low, high = percent(min(kept)), percent(max(kept))
        chance = low if low == high else f"{low} to {high} (depending on the answer)"
        what = (f"The server receives your own answer with {chance} probability, and "
                "otherwise one of the other options.")
        belief = "you would give a particular answer"
    one = posterior_bounds(0.5, epsilon).high
    every = posterior_bounds(0.5, total_epsilon).high
    return (f"{what} Someone who thought it 50 % likely {belief} could be at most "
            f"{percent(one)} sure after seeing this answer; after seeing all your answers, at "
            f"most {percent(every)}.")


def survey_notes(verified: VerifiedSurvey) -> dict[str, str]:
    """question id -> its note, using the epsilon realized by the randomizer's thresholds."""
    return {q.id: question_note(q, verified.epsilon[q.id], verified.total_epsilon)
            for q in verified.survey.questions}


def release_note(release_batch: int) -> str:
    """What the server promises to do with the submission before anyone sees it."""
    if release_batch <= 1:
        return ("The server shows each submission to the researchers as soon as it arrives: it "
                "does not pool them, so results can change with yours alone.")
    return (f"The server promises to hold your answers until at least {release_batch} "
            "submissions have arrived and then release them all together in a random order, so "
            "that the researchers, and anyone they show results to, cannot tell when you "
            "answered or pick out your answers by when they arrived. The last release, when the "
            "survey closes, can be smaller. This is the server's promise: your device cannot "
            "check it.")
