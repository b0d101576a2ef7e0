"""What a survey asks of its respondents before it is published (`survey check`, and the
dashboard's upload): each question's epsilon, how sure a guess can become, the expected
margin, and every refusal respondents with the default limits would make, with its fix."""

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import resources

from ldpsurvey.shared.mechanisms.budget import (
    DEFAULT_MAX_EPSILON,
    DEFAULT_MAX_TOTAL_EPSILON,
    exceeds,
)
from ldpsurvey.shared.mechanisms.disclosed import DEFAULT_MIN_CELL
from ldpsurvey.shared.stats.posterior import posterior_bounds
from ldpsurvey.shared.survey.manifest import Survey

DEFAULT_RESPONDENTS = 1000
# The form's own words in each language it speaks (gettext catalogues, docs/languages.md).
LOCALES = resources.files("ldpsurvey.shared") / "locale"
SHOWN_DECIMALS = 3  # a suggested epsilon is shown rounded down to this many decimals


@dataclass(frozen=True)
class Refusal:
    """Why respondents with the default ceilings refuse the survey, and the fix: give each
    question of `questions` epsilon at most `max_epsilon` (the rest may stay as they are)."""

    problem: str
    fix: str
    questions: list[str]
    max_epsilon: float


def report(survey: Survey, respondents: int) -> dict:
    """Per question its epsilon, its mechanism (and what `auto` compared), whether it is
    answered openly, the posterior bound (how sure a guess starting at 1/2 can become after
    seeing the report: e^eps / (1 + e^eps); 1 for an open answer, which is the answer) and the
    expected 95 % margin with `respondents` answers; its languages (the first its texts' own)
    and those the web form has no words for (they show the form's own words in English); the
    other origins that may host its form;
    whether respondents with the default
    ceilings accept the survey, and if not, each refusal with its fix; and `disclosed`: the
    open questions and what they entail (None without any)."""
    questions = [{"id": q.id, "epsilon": q.epsilon, "mechanism": q.scheme.name,
                  "quantity": q.scheme.quantity, "disclosed": q.disclosed,
                  "posterior_max": 1.0 if q.disclosed else posterior_bounds(0.5, q.epsilon).high,
                  "margin": q.scheme.expected_margin(respondents),
                  "auto": None if q.auto is None else {"chosen": q.auto.chosen,
                                                       "variances": q.auto.variances,
                                                       "words": q.auto.words()}}
                 for q in survey.questions]
    refused = refusals(survey)
    return {"title": survey.title, "respondents": respondents,
            "languages": list(survey.languages),
            "form_words_missing": [tag for tag in survey.languages if not form_speaks(tag)],
            "form_origins": list(survey.form_origins),
            "total_epsilon": survey.total_epsilon,
            "accepted_by_default": not refused,
            "refusals": [asdict(refusal) for refusal in refused],
            "disclosed": disclosed(survey),
            "questions": questions}


def form_speaks(language: str) -> bool:
    """Whether the web form's own words (buttons, notes, errors) exist in `language`: English,
    or a compiled catalogue shared/locale/<language>/LC_MESSAGES/form.mo."""
    folder = LOCALES / language.replace("-", "_") / "LC_MESSAGES"
    return language == "en" or (folder / "form.mo").is_file()


def disclosed(survey: Survey) -> dict | None:
    """The openly answered questions and what they entail: counted in no epsilon, public
    results refused, and no regression group or weighting level of fewer than the server's
    minimum cell size (MIN_CELL, DEFAULT_MIN_CELL unless its operator changed it); None when
    every question is randomized."""
    opened = list(survey.opened)
    if not opened:
        return None
    return {"questions": opened, "counted_in_epsilon": False, "public_results": False,
            "min_cell": DEFAULT_MIN_CELL}


def water_level(epsilons: Sequence[float], total: float, cap: float) -> float:
    """The largest L <= cap with sum(min(e, L)) <= total: every question above L lowered to L,
    the others unchanged, is the change that fits `total` while giving each question the most
    it can keep (water-filling; Boyd and Vandenberghe, Convex Optimization, 2004, sec. 5.5.3).
    With the epsilons sorted, L = (total - sum of the j smallest) / (n - j) for the first j at
    which that level lies at or below the next epsilon; for n equal questions, total / n."""
    ordered = sorted(epsilons)
    below = 0.0
    for j, epsilon in enumerate(ordered):
        level = (total - below) / (len(ordered) - j)
        if level <= epsilon:
            return min(level, cap)
        below += epsilon
    return cap


def shown(epsilon: float) -> str:
    """An epsilon a fix suggests, rounded down (so that the value shown still fits)."""
    scale = 10 ** SHOWN_DECIMALS
    return f"{math.floor(epsilon * scale) / scale:.{SHOWN_DECIMALS}f}"


def refusals(survey: Survey) -> list[Refusal]:
    """Why a respondent with the default ceilings would refuse the survey (empty: accepted):
    each question above ln 3, and a total above 4 ln 3 with the largest per-question epsilon
    that fits it (water_level) and the questions to lower to it."""
    per_question, total = DEFAULT_MAX_EPSILON, DEFAULT_MAX_TOTAL_EPSILON
    found = [Refusal(f"question {q.id!r} asks for epsilon {q.epsilon:.4g}, above the default "
                     f"{per_question:.4g} (ln 3) per question",
                     f"give {q.id!r} epsilon at most {shown(per_question)}", [q.id],
                     per_question)
             for q in survey.questions if exceeds(q.epsilon, per_question)]
    if exceeds(survey.total_epsilon, total):
        epsilons = [q.epsilon for q in survey.questions]
        level = water_level(epsilons, total, per_question)
        change = [q.id for q in survey.questions if exceeds(q.epsilon, level)]
        kept = len(survey.questions) - len(change)
        rest = f" (the other {kept} may stay as they are)" if kept else ""
        found.append(Refusal(
            f"the survey asks for {survey.total_epsilon:.4g} in all, above the default "
            f"{total:.4g} (4 ln 3) per submission",
            f"the largest epsilon per question that fits is {shown(level)}: give "
            f"{_names(change)} epsilon at most {shown(level)} each{rest}, or ask fewer "
            f"questions", change, level))
    return found


def _names(ids: list[str]) -> str:
    quoted = [repr(qid) for qid in ids]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


def refused_message(refused: list[Refusal]) -> str:
    """The refusals in one sentence, each with its fix, as `survey create` and the dashboard's
    upload say them."""
    return ("respondents with default ceilings will refuse this survey: "
            + "; ".join(f"{r.problem} (fix: {r.fix})" for r in refused))
