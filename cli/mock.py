"""`ldp-survey mock`: a whole survey end to end on this machine.

An aggregator (embedded, on SQLite in a temporary folder, or --url), a published survey,
simulated respondents randomized with the survey's own mechanism, submission over real HTTP,
estimates pulled back through the API and compared with the truth. The truth stays here: it
is read from a separate scenario file and never sent.
"""

import base64
import contextlib
import secrets
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import click

from ldpsurvey.client.verify import verify_manifest
from ldpsurvey.shared import Survey, SurveyError, read_definition
from ldpsurvey.shared.mechanism import BETA_SUM_TOLERANCE
from ldpsurvey.shared.protocol import MAX_BATCH_RESPONSES, next_instant, schedule_words

from . import batches
from .api import Api, check_url
from .embedded import embedded_aggregator
from .extras import load
from .options import json_option
from .output import emit_json, interval, note, release_lines, table

EXAMPLES = resources.files("ldpsurvey.shared") / "examples"
ESTIMATE_KEYS = ("p_hat", "p_hat_clipped", "p_mle", "standard_error", "ci_low", "ci_high",
                 "ci_method", "fit_p_value", "design_consistent", "warning", "epsilon")


@dataclass(frozen=True)
class Joint:
    """A scenario's joint distribution of two questions: p[a][b] = P(rows = a, cols = b)."""

    rows: str
    cols: str
    p: list[list[float]]


@dataclass(frozen=True)
class Truth:
    """A scenario: every question's true proportions, and the joint distributions they follow
    from for the questions in a [[joint]] table."""

    marginals: dict[str, list[float]]
    joints: list[Joint]


def _fail(message: str) -> click.ClickException:
    return click.ClickException(f"truth file: {message}")


def _distribution(value, size: int) -> bool:
    """Whether value is a list of `size` proportions in [0, 1] summing to 1."""
    return (isinstance(value, list) and len(value) == size
            and all(isinstance(p, int | float) and 0 <= p <= 1 for p in value)
            and abs(sum(value) - 1) <= BETA_SUM_TOLERANCE)


def _joint(table, index: int, survey: Survey, taken: set[str]) -> Joint:
    """One [[joint]] table: rows and cols two questions not given elsewhere, p a k_rows x
    k_cols matrix of proportions summing to 1."""
    where = f"[[joint]] {index + 1}"
    ids = {q.id for q in survey.questions}
    if not isinstance(table, dict) or set(table) != {"rows", "cols", "p"}:
        raise _fail(f"{where} needs exactly rows, cols and p")
    rows, cols, p = table["rows"], table["cols"], table["p"]
    for qid in (rows, cols):
        if qid not in ids:
            raise _fail(f"{where}: {qid!r} is not a question of the survey")
        if qid in taken:
            raise _fail(f"{where}: question {qid!r} is given more than once")
        taken.add(qid)
    k_rows, k_cols = (len(survey.question(q).options) for q in (rows, cols))
    if (not isinstance(p, list) or len(p) != k_rows
            or not all(isinstance(row, list) for row in p)
            or not _distribution([x for row in p for x in row], k_rows * k_cols)
            or any(len(row) != k_cols for row in p)):
        raise _fail(f"{where}: p needs {k_rows} rows of {k_cols} proportions summing to 1")
    return Joint(rows, cols, [[float(x) for x in row] for row in p])


def read_truth(path: Path, survey: Survey) -> Truth:
    """The scenario's truth: per question under [truth] as its scheme reads it (truth_of: P(Yes)
    for yes/no, a list of proportions for choice, per-option selection probabilities for
    multi_select), or for a pair of questions a [[joint]] table whose marginals they follow."""
    try:
        scenario = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise _fail(str(exc)) from None
    given = scenario.get("truth", {})
    if not isinstance(given, dict) or (not given and "joint" not in scenario):
        raise _fail("needs a [truth] table")
    taken: set[str] = set()
    tables = scenario.get("joint", [])
    joints = [_joint(table, i, survey, taken)
              for i, table in enumerate(tables if isinstance(tables, list) else [tables])]
    marginals = {}
    for joint in joints:
        marginals[joint.rows] = [sum(row) for row in joint.p]
        marginals[joint.cols] = [sum(column) for column in zip(*joint.p, strict=True)]
    for question in survey.questions:
        if question.id in taken:
            if question.id in given:
                raise _fail(f"question {question.id!r} is given more than once")
            continue
        try:
            marginals[question.id] = question.scheme.truth_of(given.get(question.id))
        except ValueError as exc:
            raise _fail(f"question {question.id!r} needs {exc}") from None
    return Truth(marginals, joints)


def true_answers(truth: Truth, survey: Survey, respondents: int, rng) -> dict:
    """Each question's true answers of the simulated respondents (NumPy arrays): drawn from
    the joint distribution for the questions of a [[joint]] table, else independently."""
    simulation = load("ldpsurvey.shared.simulation")
    answers = {}
    for joint in truth.joints:
        k_cols = len(joint.p[0])
        cells = simulation.true_answers([x for row in joint.p for x in row], respondents, rng)
        answers[joint.rows], answers[joint.cols] = cells // k_cols, cells % k_cols
    for question in survey.questions:
        if question.id not in answers:
            answers[question.id] = question.scheme.draw_answers(truth.marginals[question.id],
                                                                respondents, rng)
    return answers


def beside(truth: float | None, entry: dict, key: str = "true_proportion") -> dict:
    """An estimate with the truth beside it and whether its interval covers the truth. The
    truth is rounded to 12 significant digits: sums of the scenario's shares (0.8200000000000001)
    carry float noise nobody wrote."""
    truth = None if truth is None else float(f"{truth:.12g}")
    if entry["ci_low"] is None:  # nothing released yet (--keep-open): no interval to cover it
        covered = None
    else:
        covered = truth is not None and entry["ci_low"] <= truth <= entry["ci_high"]
    return {key: truth, **entry, "covered": covered}


@dataclass(frozen=True)
class MockResult:
    survey: Survey
    respondents: int
    seed: int
    estimates: dict
    truth: Truth
    crosstab: dict | None  # the cross-tab of the scenario's first [[joint]] table
    read_at: float  # when the estimates were read: seconds since the epoch, by this machine

    def rows(self) -> list[dict]:
        """Per question and estimated quantity (an option's share, or a mean): the estimate keys,
        the truth (true_proportion, or true_value for a mean), and whether the CI covers it."""
        rows = []
        for question in self.estimates["questions"]:
            scheme = self.survey.question(question["id"]).scheme
            truths = scheme.true_values(self.truth.marginals[question["id"]])
            named = "true_value" if scheme.quantity == "mean" else "true_proportion"
            rows.extend({"question": question["id"], "option": option["option"],
                         "index": option["index"],
                         **beside(truths[option["index"]],
                                  {key: option[key] for key in ESTIMATE_KEYS}, named)}
                        for option in question["options"])
        return rows

    def crosstab_rows(self) -> dict | None:
        """The cross-tab with the truth beside each joint cell and each conditional proportion
        P(cols = col | rows = row) (whose truth is None where P(rows = row) = 0)."""
        if self.crosstab is None:
            return None
        p = self.truth.joints[0].p
        body = self.crosstab
        rows, cols = (self.survey.question(body[key]).options for key in ("rows", "cols"))

        def labelled(entry: dict) -> dict:
            return {"row_option": rows[entry["row"]], "col_option": cols[entry["col"]], **entry}

        return {"rows": body["rows"], "cols": body["cols"], "n": body["n"],
                "cells": [labelled(beside(p[c["row"]][c["col"]], c)) for c in body["cells"]],
                "conditional": [labelled(beside(
                    p[c["row"]][c["col"]] / sum(p[c["row"]]) if sum(p[c["row"]]) else None, c))
                    for c in body["conditional"]]}

    @property
    def released(self) -> int:
        """How many of the responses sent the aggregator has released (all, once closed)."""
        return self.estimates["questions"][0]["options"][0]["n"]

    @property
    def next_release(self) -> str | None:
        """While responses wait (--keep-open), the aggregator's next scheduled release instant
        after the estimates were read (the next multiple of its release_every since the epoch,
        by this machine's clock), in ISO 8601 UTC; None once all are released."""
        if self.released == self.respondents:
            return None
        instant = next_instant(self.read_at, self.estimates["release_every"])
        return datetime.fromtimestamp(instant, UTC).isoformat(timespec="seconds")

    def as_json(self) -> dict:
        return {"survey_id": self.survey.survey_id, "respondents": self.respondents,
                "released": self.released, "release_every": self.estimates["release_every"],
                "next_release": self.next_release,
                "seed": self.seed, "total_epsilon": self.estimates["total_epsilon"],
                "release_batch": self.estimates["release_batch"],
                "central": self.estimates["central"],
                "confidence": self.estimates["confidence"], "results": self.rows(),
                "covariance": {q["id"]: q["covariance"] for q in self.estimates["questions"]},
                "warnings": {q["id"]: q["warning"] for q in self.estimates["questions"]
                             if q.get("warning")},
                "crosstab": self.crosstab_rows()}


SIMULATION_CHUNK = 2**16  # respondents drawn, randomized and encoded at a time


def simulated_rows(truth: Truth, survey: Survey, respondents: int, rng) -> Iterator[list[str]]:
    """The simulated respondents' randomized responses as JSON rows (batches.response_rows),
    SIMULATION_CHUNK respondents at a time, so memory does not grow with `respondents`: per
    chunk their true answers (true_answers), then each question's reports (scheme.simulate),
    all from `rng`. The draws depend on the seed and on SIMULATION_CHUNK, not on the batch
    size."""
    ids = [q.id for q in survey.questions]
    for start in range(0, respondents, SIMULATION_CHUNK):
        answers = true_answers(truth, survey, min(SIMULATION_CHUNK, respondents - start), rng)
        yield batches.response_rows(ids, [q.scheme.simulate(answers[q.id], rng)
                                          for q in survey.questions])


def run_mock(api: Api, definition: dict, truth_path: Path, respondents: int, seed: int,
             batch_size: int, keep_open: bool = False) -> MockResult:
    """Publish the survey, simulate and submit the respondents, close it (which releases the
    last responses) unless `keep_open`, read back the estimates and the cross-tab of the first
    joint table."""
    np = load("numpy")
    load("ldpsurvey.shared.simulation")  # the sim extra, or a clear error saying so
    survey_id = api.post("/api/surveys", json_body=definition).json()["survey_id"]
    click.echo(f"survey {survey_id} published on {api.url}", err=True)
    # Read the survey back as a respondent would: verified bytes only.
    public_key = base64.b64decode(api.get("/api/key", auth=False).json()["public_key"])
    survey = verify_manifest(api.get(f"/api/surveys/{survey_id}", auth=False).body,
                             api.get(f"/api/surveys/{survey_id}/manifest.sig", auth=False).body,
                             public_key)
    truth = read_truth(truth_path, survey)
    rows = simulated_rows(truth, survey, respondents, np.random.default_rng(seed))
    with click.progressbar(length=respondents, label="submitting",
                           file=sys.stderr) as bar:
        batches.send(api, f"/api/surveys/{survey_id}/responses/batch",
                     batches.cut(rows, batch_size), bar.update)
    # Closing releases the last pool (smaller than a batch), so every response is counted.
    if not keep_open:
        api.post(f"/api/surveys/{survey_id}/close")
    read_at = time.time()
    estimates = api.get(f"/api/surveys/{survey_id}/estimates").json()
    crosstab = None
    if truth.joints:
        pair = truth.joints[0]
        crosstab = api.get(f"/api/surveys/{survey_id}/crosstab?rows={pair.rows}&cols={pair.cols}"
                           ).json()
    return MockResult(survey, respondents, seed, estimates, truth, crosstab, read_at)


@click.command()
@click.option("--respondents", type=click.IntRange(min=1), default=10_000, show_default=True)
@click.option("--seed", type=click.IntRange(min=0), help="Seed of the simulation (default: random).")
@click.option("--survey", "survey_file", type=click.Path(exists=True, dir_okay=False),
              help="Survey definition (default: the bundled health.toml).")
@click.option("--truth", "truth_file", type=click.Path(exists=True, dir_okay=False),
              help="Scenario file with the true proportions (needed with --survey).")
@click.option("--url", help="Use this aggregator (key from LDP_SURVEY_KEY) instead of an "
              "embedded one.")
@click.option("--batch-size", type=click.IntRange(1, MAX_BATCH_RESPONSES), default=5_000,
              show_default=True)
@click.option("--keep-open", is_flag=True,
              help="Leave the survey open at the end (--url): only what the aggregator has "
                   "released at its scheduled instants is counted (often nothing yet).")
@json_option
def mock(respondents: int, seed: int | None, survey_file: str | None, truth_file: str | None,
         url: str | None, batch_size: int, keep_open: bool, as_json: bool) -> None:
    """Run a whole mock survey end to end and compare the estimates with the truth."""
    if (survey_file is None) != (truth_file is None):
        raise click.UsageError("--survey and --truth go together")
    seed = secrets.randbits(32) if seed is None else seed
    with contextlib.ExitStack() as stack:
        survey_path = Path(survey_file) if survey_file else stack.enter_context(
            resources.as_file(EXAMPLES / "health.toml"))
        truth_path = Path(truth_file) if truth_file else stack.enter_context(
            resources.as_file(EXAMPLES / "health_truth.toml"))
        try:
            definition = read_definition(survey_path)
        except SurveyError as exc:
            raise click.ClickException(str(exc)) from None
        api = Api(check_url(url)) if url else stack.enter_context(embedded_aggregator())
        result = run_mock(api, definition, truth_path, respondents, seed, batch_size, keep_open)
    if as_json:
        emit_json(result.as_json())
        return
    print_report(result)


COVERED = {True: "yes", False: "NO", None: "-"}  # None: nothing released to cover it


def print_report(result: MockResult) -> None:
    survey, body = result.survey, result.estimates
    click.echo(f"\n{survey.title}: {result.respondents:,} simulated respondents (seed "
               f"{result.seed}); the server saw only randomized answers.\n")
    results = result.rows()
    rows = [(r["question"], r["option"], r.get("true_proportion", r.get("true_value")),
             "-" if r["p_hat"] is None else f"{r['p_hat']:.4f} ± {r['standard_error']:.4f}",
             r["p_mle"], interval(r), COVERED[r["covered"]], r["epsilon"], note(r))
            for r in results]
    click.echo(table(rows, ["question", "option", "truth", "unbiased ± SE", "MLE",
                            f"{body['confidence']:.0%} CI ({body['ci_method']})", "covers",
                            "eps", "note"]))
    if result.released == 0:
        click.echo(f"\nNothing is released yet: the aggregator releases a survey's pooled "
                   f"responses at its scheduled instants, {schedule_words(body['release_every'])}"
                   f", when at least {body['release_batch']} are pooled, and all of them when "
                   f"the survey closes. Its next instant: {result.next_release} (by this "
                   "machine's clock).")
    else:
        covered = sum(r["covered"] for r in results)
        click.echo(f"\n{covered} of {len(results)} intervals cover the truth ({result.released:,} "
                   "released).")
    click.echo(f"Epsilon per respondent (sum over questions): {body['total_epsilon']:.4f}.")
    for question in body["questions"]:
        if question.get("warning"):
            click.echo(f"{question['id']}: {question['warning']}.")
    crosstab = result.crosstab_rows()
    if crosstab:
        click.echo(f"\nCross-tab of {crosstab['rows']} (rows) and {crosstab['cols']} (columns), "
                   f"n = {crosstab['n']}: joint and conditional P({crosstab['cols']} | "
                   f"{crosstab['rows']}) with the truth")
        click.echo(table([(c["row_option"], c["col_option"], c["true_proportion"],
                           f"{c['p_hat']:.4f} ± {c['standard_error']:.4f}", interval(c),
                           d["true_proportion"], d["p_hat"], interval(d))
                          for c, d in zip(crosstab["cells"], crosstab["conditional"], strict=True)],
                         ["row", "col", "truth", "joint ± SE", "CI", "truth", "conditional",
                          "CI"]))
    for line in release_lines(body):
        click.echo(line)


COMMANDS = (mock,)
