"""Exports for other tools: one row per response in random order, no metadata, plus the
manifest and each question's design parameters in the forms other software expects. Exports
are generators of text pieces, so a response of any size streams in constant memory."""

import csv
import io
import json
from collections.abc import Iterable, Iterator

from ldpsurvey.shared import Question, Survey


def design_parameters(question: Question) -> dict:
    """alpha, beta, epsilon, the report matrix P[i][j] = P(report j | true i), and for yes/no
    R's rr package forced-known design: p = alpha, p1 = (1-alpha)*beta_yes, p0 = (1-alpha)*beta_no.
    For a concept question alpha and beta are those of the two layers composed (what one report
    is); epsilon is the permanent layer's, what a respondent spends on the concept."""
    m = question.reported_mechanism
    parameters = {
        "alpha": m.alpha, "beta": list(m.beta), "epsilon": question.epsilon,
        "options": list(question.options),
        "report_matrix": [[m.probability(i, j) for j in range(m.k)] for i in range(m.k)],
    }
    if question.type == "yes_no":
        parameters["rr_forced_known"] = {"p": m.alpha, "p1": (1 - m.alpha) * m.beta[1],
                                         "p0": (1 - m.alpha) * m.beta[0]}
    return parameters


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(text: str) -> str:
    """Text a spreadsheet opening a CSV will not run as a formula (OWASP, CSV injection): a
    leading = + - @ tab or carriage return gets a leading apostrophe."""
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


def parameters(survey: Survey) -> dict[str, dict]:
    return {q.id: design_parameters(q) for q in survey.questions}


CHUNK_BYTES = 64 * 1024  # what each streamed piece of an export holds, about


def to_csv(survey: Survey, manifest: bytes, central: dict, answers: Iterable[str]) -> Iterator[str]:
    """`#` comment lines with the manifest, the parameters and the central epsilon
    (read.csv(comment.char = "#"), pandas.read_csv(comment="#")), then a header of question ids
    and one row per released response (its stored canonical JSON `answers`), in pieces."""
    ids = [q.id for q in survey.questions]
    head = io.StringIO()
    head.write(f"# ldp-survey export of survey {survey.survey_id}: one row per released "
               "response, random order; each value is the randomized option index\n")
    head.write(f"# manifest: {manifest.decode()}\n")
    head.write(f"# parameters: {json.dumps(parameters(survey), separators=(',', ':'))}\n")
    head.write(f"# central: {json.dumps(central, separators=(',', ':'))}\n")
    csv.writer(head, lineterminator="\n").writerow(ids)
    yield head.getvalue()
    row = ",".join(f"{{{qid}}}" for qid in ids) + "\n"  # option indices need no quoting
    yield from _pieces(row.format_map(json.loads(stored)) for stored in answers)


def to_jsonl(survey: Survey, manifest: bytes, central: dict,
             answers: Iterable[str]) -> Iterator[str]:
    """A first line {"manifest", "parameters", "central"}, then one {"answers": {...}} per
    released response (its stored canonical JSON, as is), in pieces."""
    head = {"manifest": json.loads(manifest), "parameters": parameters(survey),
            "central": central}
    yield json.dumps(head, separators=(",", ":")) + "\n"
    yield from _pieces(f'{{"answers":{stored}}}\n' for stored in answers)


def _pieces(lines: Iterable[str]) -> Iterator[str]:
    """Lines joined into pieces of about CHUNK_BYTES: few writes, little memory."""
    piece: list[str] = []
    size = 0
    for line in lines:
        piece.append(line)
        size += len(line)
        if size >= CHUNK_BYTES:
            yield "".join(piece)
            piece, size = [], 0
    if piece:
        yield "".join(piece)
