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
import tempfile
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import click

from ldpsurvey.client.verify import verify_manifest
from ldpsurvey.shared import Survey, SurveyError, read_definition
from ldpsurvey.shared.protocol import MAX_BATCH_RESPONSES
from ldpsurvey.shared.randomizer import thresholds

from .api import Api, check_url
from .extras import load
from .output import emit_json, release_lines, table

EXAMPLES = resources.files("ldpsurvey.shared") / "examples"
ESTIMATE_KEYS = ("p_hat", "p_hat_clipped", "standard_error", "ci_low", "ci_high", "ci_method",
                 "design_consistent", "epsilon")


def read_truth(path: Path, survey: Survey) -> dict[str, list[float]]:
    """The scenario's true proportions per question: P(Yes) for yes/no, a list for choice."""
    try:
        truth = tomllib.loads(Path(path).read_text()).get("truth")
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise click.ClickException(f"truth file: {exc}") from None
    if not isinstance(truth, dict):
        raise click.ClickException("truth file: needs a [truth] table")
    result = {}
    for question in survey.questions:
        value = truth.get(question.id)
        if question.type == "yes_no" and isinstance(value, int | float):
            value = [1 - value, value]
        if (not isinstance(value, list) or len(value) != len(question.options)
                or not all(isinstance(p, int | float) and 0 <= p <= 1 for p in value)
                or abs(sum(value) - 1) > 1e-9):
            raise click.ClickException(
                f"truth file: question {question.id!r} needs "
                + ("a proportion in [0, 1]" if question.type == "yes_no" else
                   f"{len(question.options)} proportions summing to 1"))
        result[question.id] = [float(p) for p in value]
    return result


@contextlib.contextmanager
def embedded_aggregator() -> Iterator[Api]:
    """An aggregator on SQLite in a temporary folder, served on a free loopback port, with a
    researcher key."""
    aggregator = load("ldpsurvey.aggregator")
    serving = load("ldpsurvey.aggregator.serving")
    with tempfile.TemporaryDirectory(prefix="ldp-survey-mock-") as folder:
        app = aggregator.create_app({"DATABASE_URL": f"sqlite:///{folder}/mock.sqlite3",
                                     "KEY_FILE": None, "DEPLOYMENT": "development"},
                                    instance_path=folder)
        key = aggregator.create_api_key(app).key
        server = serving.make_server(app, "127.0.0.1", 0)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                  daemon=True)  # shutdown() waits for one poll
        thread.start()
        try:
            yield Api(f"http://127.0.0.1:{server.server_port}", key)
        finally:
            server.shutdown()
            thread.join()
            server.server_close()
            aggregator.close_app(app)


@dataclass(frozen=True)
class MockResult:
    survey: Survey
    respondents: int
    seed: int
    estimates: dict
    truth: dict[str, list[float]]

    def rows(self) -> list[dict]:
        """Per question and option: the estimate keys, the truth, and whether the CI covers it."""
        rows = []
        for question in self.estimates["questions"]:
            for option in question["options"]:
                truth = self.truth[question["id"]][option["index"]]
                covered = (option["ci_low"] is not None
                           and option["ci_low"] <= truth <= option["ci_high"])
                rows.append({"question": question["id"], "option": option["option"],
                             "index": option["index"], "true_proportion": truth,
                             **{key: option[key] for key in ESTIMATE_KEYS}, "covered": covered})
        return rows

    def as_json(self) -> dict:
        return {"survey_id": self.survey.survey_id, "respondents": self.respondents,
                "seed": self.seed, "total_epsilon": self.estimates["total_epsilon"],
                "release_batch": self.estimates["release_batch"],
                "central": self.estimates["central"],
                "confidence": self.estimates["confidence"], "results": self.rows()}


def run_mock(api: Api, definition: dict, truth_path: Path, respondents: int, seed: int,
             batch_size: int) -> MockResult:
    """Publish the survey, simulate and submit the respondents, close it (which releases the
    last responses), read back the estimates."""
    np = load("numpy")
    simulation = load("ldpsurvey.shared.simulation")
    survey_id = api.post("/api/surveys", json_body=definition).json()["survey_id"]
    # Read the survey back as a respondent would: verified bytes only.
    public_key = base64.b64decode(api.get("/api/key", auth=False).json()["public_key"])
    survey = verify_manifest(api.get(f"/api/surveys/{survey_id}", auth=False).body,
                             api.get(f"/api/surveys/{survey_id}/manifest.sig", auth=False).body,
                             public_key)
    truth = read_truth(truth_path, survey)
    rng = np.random.default_rng(seed)
    reports = np.column_stack([
        simulation.randomize_many(simulation.true_answers(truth[q.id], respondents, rng),
                                  thresholds(q.reported_mechanism.alpha,
                                             q.reported_mechanism.beta), rng)
        for q in survey.questions])
    ids = [q.id for q in survey.questions]
    batches = range(0, respondents, batch_size)
    with click.progressbar(length=respondents, label="submitting",
                           file=sys.stderr) as bar:
        for start in batches:
            chunk = reports[start:start + batch_size].tolist()
            body = {"responses": [{"answers": dict(zip(ids, row, strict=True))} for row in chunk]}
            api.post(f"/api/surveys/{survey_id}/responses/batch", json_body=body,
                     headers={"Idempotency-Key": secrets.token_urlsafe(18)}, retries=3)
            bar.update(len(chunk))
    # Closing releases the last pool (smaller than a batch), so every response is counted.
    api.post(f"/api/surveys/{survey_id}/close")
    estimates = api.get(f"/api/surveys/{survey_id}/estimates").json()
    return MockResult(survey, respondents, seed, estimates, truth)


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
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
def mock(respondents: int, seed: int | None, survey_file: str | None, truth_file: str | None,
         url: str | None, batch_size: int, as_json: bool) -> None:
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
        result = run_mock(api, definition, truth_path, respondents, seed, batch_size)
    if as_json:
        emit_json(result.as_json())
        return
    print_report(result)


def print_report(result: MockResult) -> None:
    survey, body = result.survey, result.estimates
    click.echo(f"\n{survey.title}: {result.respondents:,} simulated respondents (seed "
               f"{result.seed}); the server saw only randomized answers.\n")
    results = result.rows()
    rows = [(r["question"], r["option"], r["true_proportion"],
             "-" if r["p_hat"] is None else f"{r['p_hat']:.4f} ± {r['standard_error']:.4f}",
             "no fit" if not r["design_consistent"] else f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]",
             "yes" if r["covered"] else "NO", r["epsilon"]) for r in results]
    click.echo(table(rows, ["question", "option", "truth", "estimate ± SE",
                            f"{body['confidence']:.0%} CI ({body['ci_method']})", "covers",
                            "eps"]))
    covered = sum(r["covered"] for r in results)
    click.echo(f"\n{covered} of {len(results)} intervals cover the truth. Epsilon per "
               f"respondent (sum over questions): {body['total_epsilon']:.4f}.")
    for line in release_lines(body):
        click.echo(line)


COMMANDS = (mock,)
