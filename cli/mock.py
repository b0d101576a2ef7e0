"""`ldp-survey mock`: a whole survey end to end on this machine.

An aggregator (embedded, on SQLite in a temporary folder, or --url), a published survey,
simulated respondents randomized with the survey's own mechanism, submission over real HTTP,
estimates pulled back through the API and compared with the truth. The truth stays here: it
is read from a separate scenario file and never sent.
"""

import base64
import contextlib
import itertools
import json
import math
import secrets
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from urllib.parse import quote

import click

from ldpsurvey.cli import batches, embedded
from ldpsurvey.cli.api import Api, check_url
from ldpsurvey.cli.embedded import embedded_aggregator
from ldpsurvey.cli.extras import load
from ldpsurvey.cli.options import json_option
from ldpsurvey.cli.output import emit_json, interval, note, release_lines, table
from ldpsurvey.client.verify import verify_manifest
from ldpsurvey.shared import Survey, SurveyError, read_definition
from ldpsurvey.shared.http_contract import MAX_BATCH_RESPONSES, next_instant, schedule_words
from ldpsurvey.shared.survey import scenarios
from ldpsurvey.shared.survey.scenarios import (
    Regression,
    ScenarioError,
    Truth,
    given_share,
    true_answers,
)

EXAMPLES = resources.files("ldpsurvey.shared") / "examples"
ESTIMATE_KEYS = ("p_hat", "p_hat_clipped", "p_mle", "standard_error", "ci_low", "ci_high",
                 "ci_method", "fit_p_value", "design_consistent", "warning", "epsilon")


def read_truth(path: Path, survey: Survey) -> Truth:
    """The scenario's truth (scenarios.read_truth, its [regression] read here, with the
    analysis extra); a bad file is one line."""
    try:
        return scenarios.read_truth(path, survey, _regression)
    except ScenarioError as exc:
        raise click.ClickException(f"truth file: {exc}") from None


def _regression(table, survey: Survey, given: dict, taken: set[str]) -> Regression:
    """The [regression] table: formula (outcome ~ covariates, question ids: a forced-response
    yes/no outcome not given under [truth], covariates forced-response questions given
    there) and coefficients, the true value of every column of the formula's model matrix
    by its name ("Intercept", "sleep[T.6 to 8]", ...)."""
    where = "[regression]"
    if not isinstance(table, dict) or set(table) != {"formula", "coefficients"}:
        raise ScenarioError(f"{where} needs exactly formula and coefficients")
    formula, coefficients = table["formula"], table["coefficients"]
    regression = load("ldpsurvey.analysis.regression")
    try:
        outcome, covariates = regression.parse_formula(formula)
    except regression.AnalysisError as exc:
        raise ScenarioError(f"{where}: {exc}") from None
    ids = {q.id: q for q in survey.questions}
    for name in (outcome, *covariates):
        if name not in ids or ids[name].scheme.name != "forced_response":
            raise ScenarioError(f"{where}: {name!r} is not a forced-response question of the survey")
        if name in taken:
            raise ScenarioError(f"{where}: {name!r} is in a [[joint]] table: give a covariate under "
                        "[truth]")
    if ids[outcome].type != "yes_no" or outcome in given:
        raise ScenarioError(f"{where}: the outcome {outcome!r} must be a yes/no question not given "
                    "under [truth] (the model gives its truth)")
    missing = [name for name in covariates if name not in given]
    if missing:
        raise ScenarioError(f"{where}: give the covariate {missing[0]!r} under [truth]")
    combinations = list(itertools.product(*(range(len(ids[c].options)) for c in covariates)))
    pd = load("pandas")
    frame = pd.DataFrame({c: pd.Categorical.from_codes([t[j] for t in combinations],
                                                       categories=ids[c].options)
                          for j, c in enumerate(covariates)}, index=range(len(combinations)))
    design = load("formulaic").Formula(formula).rhs.get_model_matrix(frame)
    names = list(design.columns)
    if not isinstance(coefficients, dict) or set(coefficients) != set(names) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in coefficients.values()):
        raise ScenarioError(f"{where}: coefficients needs a number for each of {', '.join(names)}")
    b = [float(coefficients[name]) for name in names]
    cells = []
    for row, combination in zip(design.to_numpy().tolist(), combinations, strict=True):
        linear = math.fsum(x * c for x, c in zip(row, b, strict=True))
        weight = math.prod(given_share(ids[c], given[c], combination[j])
                           for j, c in enumerate(covariates))
        cells.append((combination, weight, 1.0 / (1.0 + math.exp(-linear))))
    return Regression(formula, outcome, covariates, dict(zip(names, b, strict=True)), cells)


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
    regression: dict | None = None  # the fit of the scenario's [regression] (the API's)
    weighted: dict | None = None  # the estimates raked to the [weights] margins (the API's)

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

    def regression_rows(self) -> list[dict] | None:
        """Per coefficient of the [regression] model: the fit's estimate, SE and interval, the
        true value beside it and whether the interval covers it (None: no model, or nothing
        released to fit)."""
        if self.truth.regression is None or self.regression is None:
            return None
        true = self.truth.regression.coefficients
        return [{"coefficient": c["name"],
                 **beside(true[c["name"]], {key: c[key] for key in (
                     "estimate", "standard_error", "ci_low", "ci_high", "p_value")},
                          "true_value")}
                for c in self.regression["coefficients"]]

    def weights_rows(self) -> list[dict] | None:
        """Per option of the [weights] outcome, its weighted and its unweighted estimate, each
        with the population's truth beside it (sum_l population_l prevalence_l) and whether
        its interval covers it: the weighted one should, the unweighted one targets the
        sample's prevalence instead. None: no [weights] table, or nothing released."""
        model = self.truth.weights
        if model is None or self.weighted is None:
            return None
        yes = model.prevalence_in(model.population)
        found = {"weighted": self.weighted["questions"],
                 "unweighted": self.estimates["questions"]}
        rows = []
        for estimate, questions in found.items():
            options = next(q for q in questions if q["id"] == model.outcome)["options"]
            rows.extend({"question": model.outcome, "option": option["option"],
                         "estimate": estimate,
                         **beside(truth, {key: option[key] for key in (
                             "p_hat", "standard_error", "ci_low", "ci_high")})}
                        for option, truth in zip(options, (1.0 - yes, yes), strict=True))
        return rows

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
                "crosstab": self.crosstab_rows(),
                "regression": None if self.truth.regression is None else {
                    "formula": self.truth.regression.formula,
                    "n": None if self.regression is None else self.regression["n"],
                    "coefficients": self.regression_rows()},
                "weights": None if self.truth.weights is None else {
                    "margins": self.truth.weights.margins(),
                    "effective_n": None if self.weighted is None else
                    self.weighted["weights"]["effective_n"],
                    "results": self.weights_rows()}}


URL_BATCH = 5_000  # --batch-size with --url (the embedded aggregator takes MAX_BATCH_RESPONSES)
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
             batch_size: int, keep_open: bool = False,
             senders: int = batches.SENDERS) -> MockResult:
    """Publish the survey, simulate and submit the respondents (batches of `batch_size`,
    `senders` in flight), close it (which releases the last responses) unless `keep_open`,
    read back the estimates, the cross-tab of the first joint table, the [regression] fit and
    the estimates weighted to the [weights] margins."""
    np = load("numpy")
    load("ldpsurvey.shared.sim.simulation")  # the sim extra, or a clear error saying so
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
                     batches.cut(rows, batch_size), bar.update, senders)
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
    fit = None
    if truth.regression:  # what `results --regress FORMULA` reads
        fit = api.get(f"/api/surveys/{survey_id}/estimates?regress="
                      f"{quote(truth.regression.formula, safe='')}").json()["regression"]
    weighted = None
    if truth.weights:  # what `results --weights FILE` reads
        margins = quote(json.dumps(truth.weights.margins()), safe="")
        weighted = api.get(f"/api/surveys/{survey_id}/estimates?weights={margins}").json()[
            "weighted"]
    return MockResult(survey, respondents, seed, estimates, truth, crosstab, read_at, fit,
                      weighted)


@click.command()
@click.option("--respondents", type=click.IntRange(min=1), default=10_000, show_default=True)
@click.option("--seed", type=click.IntRange(min=0), help="Seed of the simulation (default: random).")
@click.option("--survey", "survey_file", type=click.Path(exists=True, dir_okay=False),
              help="Survey definition (default: the bundled health.toml).")
@click.option("--truth", "truth_file", type=click.Path(exists=True, dir_okay=False),
              help="Scenario file with the true proportions (needed with --survey).")
@click.option("--url", help="Use this aggregator (key from LDP_SURVEY_KEY) instead of an "
              "embedded one.")
@click.option("--batch-size", type=click.IntRange(1, MAX_BATCH_RESPONSES),
              help=f"Responses per batch [default: {URL_BATCH:,} with --url, "
                   f"{MAX_BATCH_RESPONSES:,} (the API's limit) with the embedded aggregator]")
@click.option("--keep-open", is_flag=True,
              help="Leave the survey open at the end (--url): only what the aggregator has "
                   "released at its scheduled instants is counted (often nothing yet).")
@json_option
def mock(respondents: int, seed: int | None, survey_file: str | None, truth_file: str | None,
         url: str | None, batch_size: int | None, keep_open: bool, as_json: bool) -> None:
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
        if url:
            api, default_batch, senders = Api(check_url(url)), URL_BATCH, batches.SENDERS
        else:
            api, default_batch, senders = (stack.enter_context(embedded_aggregator()),
                                           MAX_BATCH_RESPONSES, embedded.senders())
        result = run_mock(api, definition, truth_path, respondents, seed,
                          batch_size or default_batch, keep_open, senders)
    if as_json:
        emit_json(result.as_json())
        return
    print_report(result)


COVERED = {True: "yes", False: "NO", None: "-"}  # None: nothing released to cover it


def print_report(result: MockResult) -> None:
    survey, body = result.survey, result.estimates
    opened = survey.opened
    saw = (f"only randomized answers, and the open ones ({', '.join(opened)}) as given"
           if opened else "only randomized answers")
    click.echo(f"\n{survey.title}: {result.respondents:,} simulated respondents (seed "
               f"{result.seed}); the server saw {saw}.\n")
    results = result.rows()
    rows = [(r["question"], r["option"], r.get("true_proportion", r.get("true_value")),
             "-" if r["p_hat"] is None else f"{r['p_hat']:.4f} ± {r['standard_error']:.4f}",
             r["p_mle"], interval(r), COVERED[r["covered"]], r["epsilon"],
             "; ".join(filter(None, (f"{r['ci_method']} CI" if r["ci_method"] != body[
                 "ci_method"] else "", note(r)))))
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
                         ["row", "col", "truth", "unbiased joint ± SE", "CI", "truth",
                          "unbiased conditional", "CI"]))
    coefficients = result.regression_rows()
    if coefficients:
        click.echo(f"\nLogistic regression {result.truth.regression.formula} (n = "
                   f"{result.regression['n']}): each true coefficient beside its estimate")
        click.echo(table([(c["coefficient"], c["true_value"],
                           f"{c['estimate']:.4f} ± {c['standard_error']:.4f}", interval(c),
                           COVERED[c["covered"]]) for c in coefficients],
                         ["coefficient", "truth", "estimate ± SE",
                          f"{result.regression['confidence']:.0%} CI", "covers"]))
        click.echo(f"{sum(c['covered'] for c in coefficients)} of {len(coefficients)} "
                   "coefficient intervals cover the truth.")
    weighted = result.weights_rows()
    if weighted:
        model = result.truth.weights
        shares = ", ".join(f"{label} {share:g}" for label, share in
                           result.truth.weights.margins()[model.covariate].items())
        click.echo(f"\n{model.outcome}, weighted to the population's {model.covariate} ({shares};"
                   f" effective n = {result.weighted['weights']['effective_n']:,.0f}) and "
                   "unweighted, beside the population's truth")
        click.echo(table([(r["option"], r["estimate"], r["true_proportion"],
                           f"{r['p_hat']:.4f} ± {r['standard_error']:.4f}", interval(r),
                           COVERED[r["covered"]]) for r in weighted],
                         ["option", "estimate", "truth", "unbiased ± SE",
                          f"{body['confidence']:.0%} CI", "covers"]))
    for line in release_lines(body):
        click.echo(line)


COMMANDS = (mock,)
