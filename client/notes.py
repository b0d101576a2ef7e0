"""Plain-words privacy notes for respondents, from a survey's own numbers. The words read
first are in the language chosen with language.use() (the "client" catalogue); the details
(--details) are in English."""

from collections.abc import Iterable

from ldpsurvey.client.language import N_, _
from ldpsurvey.client.verified import VerifiedSurvey
from ldpsurvey.shared import Question, posterior_bounds
from ldpsurvey.shared.mechanisms.protocol import percent

# The words a respondent reads first, in the CLI and the web form (shared/web/form.js has a
# copy of each, which the browser tests compare): what happens, in everyday words. Epsilon,
# limits and the exact chances are in "How your answers are protected" (question_note and the
# rest below), one tap (or --details) away.
INTRO = N_("Your device flips a coin for each answer and sometimes sends another answer on "
           "purpose. No one can know your real answers. Researchers can still count how common "
           "each one is.")

# INTRO for a survey that asks some questions openly (disclosed = true): its first words must
# not promise that no one can know those answers.
OPEN_INTRO = N_("Your device flips a coin for each answer not marked \"Answered openly\", "
                "and sometimes sends another answer on purpose. No one can know those real "
                "answers, yet researchers can still count them. Open answers are stored as you "
                "give them.")

WHY_IT_MAY_DIFFER = N_("Some answers may differ from what you chose. That is on purpose: it "
                       "keeps your real answers private.")

# shared/mechanisms/disclosed.py's WORDS, the mark of an openly answered question, in this catalogue too
# (tests/test_translations.py compares them).
OPEN_WORDS = N_("Answered openly: stored as you give it.")


def intro(questions: Iterable[Question]) -> str:
    """The first words: OPEN_INTRO if any question is answered openly, else INTRO."""
    return _(OPEN_INTRO if any(q.disclosed for q in questions) else INTRO)


def bound_note(epsilons: Iterable[float]) -> str:
    """The concrete bound read first: one report of a question with epsilon e moves a belief of
    at most 1/2 to at most e^e / (1 + e^e) (posterior_bounds), here for the question that
    reveals most. "No idea before" is a prior of at most 1/2 on the answer (a larger bound
    holds for nobody who starts at 1/2 or less). The epsilons are those of the randomized
    questions only (an open answer has no bound); with none, ALL_OPEN."""
    epsilons = list(epsilons)
    if not epsilons:
        return _(ALL_OPEN)
    most = max(posterior_bounds(0.5, epsilon).high for epsilon in epsilons)
    return _("From one sent answer, someone with no idea can be at most {chance} sure of your "
             "real answer.").format(chance=percent(most))


ALL_OPEN = N_("Nothing here is changed at random: every answer is stored as you give it.")


def randomized_epsilons(verified: VerifiedSurvey) -> list[float]:
    """The epsilons of the questions that are randomized (bound_note's argument)."""
    return [verified.epsilon[q.id] for q in verified.survey.questions if not q.disclosed]


def sent_note(questions: Iterable[Question]) -> str:
    """The last words after a send: the real answers stayed on the device, but for open ones."""
    if any(q.disclosed for q in questions):
        return _("Sent. Thank you. Your real answers never left this device, except those you "
                 "gave openly.")
    return _("Sent. Thank you. Your real answers never left this device.")


OPEN_NOT_MIXED = N_("Answers you give openly can still point to you.")


def release_summary(release_batch: int, any_open: bool = False) -> str:
    """release_note in everyday words; with openly answered questions (any_open), that the
    mixing does not hide them (an open answer can single a response out of its group)."""
    if release_batch <= 1:
        return _("The researchers see your answers as soon as they arrive.")
    mixed = _("The researchers see your answers only mixed with others, in groups of at least "
              "{size} (the last can be smaller).").format(size=release_batch)
    return f"{mixed} {_(OPEN_NOT_MIXED)}" if any_open else mixed


def question_note(question: Question, epsilon: float, total_epsilon: float) -> str:
    """What the server receives for each answer (scheme.note; for a concept question, through
    both layers), and how sure an observer could become (for an open answer: that it is sent
    as given, alone)."""
    what, belief = question.scheme.note()
    if question.disclosed:  # nothing randomized: no bound to state
        return what
    one = posterior_bounds(0.5, epsilon).high
    every = posterior_bounds(0.5, total_epsilon).high
    return (f"{what} Someone who thought it 50 % likely {belief} could be at most "
            f"{percent(one)} sure after seeing this answer; after seeing all your answers, at "
            f"most {percent(every)}.")


def concept_note(question: Question, status: str) -> str:
    """Whether a concept question draws a permanent answer now or reuses one (ledger
    .concept_status), and what that costs."""
    name = question.concept
    if status == "reused":
        return (f"You answered about '{name}' before with these same settings: a fresh "
                "randomization of the permanent randomized answer your device keeps for it is "
                "sent, which reveals nothing beyond that answer and costs no more privacy "
                "budget once it has been charged.")
    redrawn = (f"You answered about '{name}' before with other settings: that answer cannot "
               "be reused, so a new one is drawn and charged. " if status == "redrawn" else "")
    return (f"{redrawn}This asks about '{name}', something that should not "
            "change: your device randomizes your answer once into a permanent answer, charged "
            "once, and sends a fresh randomization of it here and in later surveys that ask "
            "the same with the same settings, so repeated answers neither add up nor match.")


def survey_notes(verified: VerifiedSurvey, concepts: dict[str, str] | None = None
                 ) -> dict[str, str]:
    """question id -> its note, using the epsilon realized by the randomizer's thresholds, and
    for a concept question its concept note (from ledger.concept_status)."""
    notes = {q.id: question_note(q, verified.epsilon[q.id], verified.total_epsilon)
             for q in verified.survey.questions}
    for qid, status in (concepts or {}).items():
        notes[qid] += " " + concept_note(verified.survey.question(qid), status)
    return notes


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
