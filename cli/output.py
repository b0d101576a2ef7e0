"""Printing results: a plain table for people, exact JSON for machines."""

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, redirect_stdout
from typing import Any

import click

from ldpsurvey.cli.terminal import clean
from ldpsurvey.shared.http_contract import schedule_words
from ldpsurvey.shared.stats.distributions import P_FLOOR


def format_value(value: Any) -> str:
    """One format per kind of number in tables (JSON keeps full precision): fractional numbers
    (proportions, estimates, epsilons) to 4 decimals, as the intervals beside them; whole
    numbers with thousands separators; None as '-'; the rest as text, `terminal.clean`ed."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, int):
        return f"{value:,}"
    return clean(str(value))


def table(rows: Sequence[Sequence[Any]], header: Sequence[str] | None = None) -> str:
    """Left-aligned columns separated by two spaces."""
    cells = [[format_value(v) for v in row] for row in rows]
    if header:
        cells.insert(0, list(header))
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in cells]
    if header:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2))


def emit(record: Mapping[str, Any], as_json: bool) -> None:
    """Print one record: JSON with exactly its keys, or a key/value table."""
    if as_json:
        emit_json(record)
    else:
        click.echo(table(list(record.items())))


def p_text(p: float) -> str:
    """A p-value to two significant figures, as the bound '< 1e-300' at the floor
    (distributions.reported_p): never 0, which a fixed number of decimals would print."""
    return f"< {P_FLOOR:.0e}" if p <= P_FLOOR else f"{p:.2g}"


def p_phrase(p: float) -> str:
    """'p = 0.0012', or 'p < 1e-300' at the floor."""
    return f"p < {P_FLOOR:.0e}" if p <= P_FLOOR else f"p = {p:.2g}"


def interval(entry: dict) -> str:
    """An estimate's confidence interval, '-' before the first answer."""
    if entry.get("ci_low") is None:
        return "-"
    return f"[{entry['ci_low']:.4f}, {entry['ci_high']:.4f}]"


def note(option: dict) -> str:
    """An option's warning and a misfit of the design, in words ('' if none): shown beside the
    numbers, so that small samples are read with care."""
    notes = [option["warning"]] if option.get("warning") else []
    if option.get("design_consistent") is False:
        notes.append(f"the data do not fit the design ({p_phrase(option['fit_p_value'])})")
    return "; ".join(notes)


def release_lines(document: dict) -> list[str]:
    """What an estimates document says about release batches and shuffling, in words."""
    lines = [f"Responses are released at scheduled instants, "
             f"{schedule_words(document['release_every'])}, in groups of at least "
             f"{document['release_batch']} (the last, at close, can be smaller): results "
             "change only then."]
    central, local = document["central"], document["total_epsilon"]
    if central["epsilon_per_release"] < local - 1e-9:
        lines.append(f"Shuffled in releases: central epsilon {central['epsilon_per_release']:.3g} "
                     f"per release, if the other responses in a release come from honest "
                     f"respondents; {central['epsilon_whole_survey']:.3g} over all released "
                     "responses only against someone who sees the final export alone, not "
                     "whoever looked after each release "
                     f"(delta {central['delta']:.1g}).")
    elif any(question.get("disclosed") for question in document["questions"]):
        lines.append(f"No amplification by shuffling: the openly answered questions can tell "
                     f"one response from the others of its release, so each respondent has "
                     f"the local epsilon {local:.4g} only.")
    else:
        lines.append(f"No amplification by shuffling yet: no release has been large enough, so "
                     f"each respondent has the local epsilon {local:.4g} only.")
    lines.append("Whoever controls who may respond (the owner of an invitation-only survey, "
                 "anyone on one open to all) can fill a release around one respondent and "
                 "see their report alone: against them only the local epsilon holds.")
    return lines


@contextmanager
def messages_to_stderr(as_json: bool) -> Iterator[None]:
    """With --json, stdout carries the JSON document alone: whatever a command prints for people
    meanwhile, its prompts as well, goes to stderr."""
    if not as_json:
        yield
        return
    with redirect_stdout(sys.stderr):
        yield
