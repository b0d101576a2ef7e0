"""Exports for other tools: one row per response in random order, no metadata, plus the
manifest and each question's design parameters in the forms other software expects."""

import csv
import io
import json

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


def parameters(survey: Survey) -> dict[str, dict]:
    return {q.id: design_parameters(q) for q in survey.questions}


def to_csv(survey: Survey, manifest: bytes, central: dict, rows: list[dict[str, int]]) -> str:
    """`#` comment lines with the manifest, the parameters and the central epsilon
    (read.csv(comment.char = "#"), pandas.read_csv(comment="#")), then a header of question ids
    and one row per released response."""
    out = io.StringIO()
    out.write(f"# ldp-survey export of survey {survey.survey_id}: one row per released "
              "response, random order; each value is the randomized option index\n")
    out.write(f"# manifest: {manifest.decode()}\n")
    out.write(f"# parameters: {json.dumps(parameters(survey), separators=(',', ':'))}\n")
    out.write(f"# central: {json.dumps(central, separators=(',', ':'))}\n")
    ids = [q.id for q in survey.questions]
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(ids)
    writer.writerows([row[qid] for qid in ids] for row in rows)
    return out.getvalue()


def to_jsonl(survey: Survey, manifest: bytes, central: dict, rows: list[dict[str, int]]) -> str:
    """A first line {"manifest", "parameters", "central"}, then one {"answers": {...}} per
    released response."""
    head = {"manifest": json.loads(manifest), "parameters": parameters(survey),
            "central": central}
    lines = [json.dumps(head, separators=(",", ":"))]
    lines += [json.dumps({"answers": row}, separators=(",", ":")) for row in rows]
    return "\n".join(lines) + "\n"
