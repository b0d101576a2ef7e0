"""What a survey asks of its respondents, before it is published: `survey check`, and the
guard `survey create` applies (a survey respondents' default ceilings would refuse), each
refusal with the change that would make respondents accept it."""

import click

from ldpsurvey.shared import Survey, SurveyError, parse_definition, read_definition
from ldpsurvey.shared.mechanisms.protocol import required_n
from ldpsurvey.shared.survey.check import DEFAULT_RESPONDENTS, refusals, refused_message, report

__all__ = ["DEFAULT_RESPONDENTS", "above_option", "lines", "read", "read_guarded", "refusals",
           "report"]


above_option = click.option(
    "--above-default-ceilings", is_flag=True,
    help="Go ahead even though respondents with default ceilings will refuse it.")


def read(file: str) -> tuple[dict, Survey]:
    """The definition in FILE as read and as validated here (errors name the question and
    field, in one line)."""
    try:
        definition = read_definition(file)
        return definition, parse_definition(definition)
    except (SurveyError, OSError) as exc:
        raise click.ClickException(str(exc)) from None


def read_guarded(file: str, above_default_ceilings: bool) -> tuple[dict, Survey]:
    """read(file), refused (with each refusal's fix) if respondents with the default ceilings
    would refuse the survey, unless `above_default_ceilings`."""
    definition, parsed = read(file)
    refused = refusals(parsed)
    if refused and not above_default_ceilings:
        raise click.ClickException(
            f"{refused_message(refused)}. Lower its epsilon, or "
            "go ahead with --above-default-ceilings (respondents must then raise their "
            "ceilings to answer)")
    return definition, parsed


def lines(checked: dict, release_batch: int) -> list[str]:
    """The report for people."""
    out = [f"{checked['title']}: total epsilon per respondent {checked['total_epsilon']:.4g}"]
    if len(checked["languages"]) > 1:
        first, *others = checked["languages"]
        out.append(f"in {len(checked['languages'])} languages: {first} (the texts' own), "
                   f"{', '.join(others)}, every text translated")
    if checked["form_words_missing"]:
        out.append(f"the web form has no words of its own in {', '.join(checked['form_words_missing'])}: "
                   "respondents reading those see its buttons and notes in English (docs/"
                   "languages.md says how to add a language)")
    for q in checked["questions"]:
        mechanism = "" if q["mechanism"] == "forced_response" else f" ({q['mechanism']})"
        share = " of its range" if q["quantity"] == "mean" else ""
        margin = f"expected margin ±{q['margin']:.1%}{share} with {checked['respondents']:,} " \
                 "respondents"
        if q["disclosed"]:
            out.append(f"  {q['id']}: ANSWERED OPENLY, stored as given, not randomized: counted "
                       f"in no epsilon, and whoever reads a response sees it; {margin}")
            continue
        out.append(f"  {q['id']}{mechanism}: epsilon {q['epsilon']:.4g}; a guess of 50 % can "
                   f"become at most {q['posterior_max']:.0%}; {margin}")
        if q["auto"]:
            out.append(f"    {q['auto']['words']}")
    if checked["disclosed"]:
        opened = checked["disclosed"]
        out.append(f"answered openly: {', '.join(opened['questions'])}. The total epsilon "
                   "counts none of them; this survey cannot have public results, and no "
                   "regression group or weighting level of fewer than "
                   f"{opened['min_cell']} respondents is reported (the server's MIN_CELL "
                   "setting)")
    if checked["accepted_by_default"]:
        out.append("respondents with default ceilings will accept it")
    else:
        out.append("respondents with default ceilings will REFUSE it:")
        out.extend(f"  {r['problem']}; fix: {r['fix']}" for r in checked["refusals"])
    out.append(f"results stay hidden until {release_batch} responses arrive, then move in "
               f"steps of {release_batch} (release_batch)")
    if checked["form_origins"]:
        out.append(f"its form may also be hosted at {', '.join(checked['form_origins'])} "
                   "(`ldp-survey survey form` writes the copy)")
    return out


def plan(survey: Survey, margin: float, confidence: float) -> dict:
    """`plan --survey`: per question its mechanism (what `auto` chose), epsilon and the
    respondents needed for an expected half-width of `margin` on every estimate (for a mean,
    `margin` is a share of its range, also given in its units), and the survey's largest."""
    questions = []
    for q in survey.questions:
        entry = {"id": q.id, "mechanism": q.scheme.name, "epsilon": q.epsilon,
                 "n_required": required_n(q.scheme, margin, confidence)}
        if q.scheme.quantity == "mean":
            entry["margin_units"] = margin * (q.scheme.high - q.scheme.low)
        if q.auto is not None:
            entry["auto"] = q.auto.words()
        questions.append(entry)
    return {"title": survey.title, "margin": margin, "confidence": confidence,
            "n_required": max(q["n_required"] for q in questions), "questions": questions}
