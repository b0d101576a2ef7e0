"""`ldp-survey mock`, end to end."""

import io
import json
import os
import re
import time
from datetime import datetime, timedelta
from importlib import resources

import pytest
from click.testing import CliRunner
from scipy import stats

from ldpsurvey.cli import main
from ldpsurvey.cli.mock import EXAMPLES, embedded_aggregator, run_mock
from ldpsurvey.shared import read_definition
from ldpsurvey.shared.http_contract import next_instant

from helpers import released_n

KEYS = {"question", "option", "index", "true_proportion", "p_hat", "p_hat_clipped", "p_mle",
        "standard_error", "ci_low", "ci_high", "ci_method", "fit_p_value", "design_consistent",
        "warning", "epsilon", "covered"}
CELL_KEYS = {"row", "col", "row_option", "col_option", "true_proportion", "p_hat", "p_constrained",
             "standard_error", "ci_low", "ci_high", "covered"}


def test_json_output():
    result = CliRunner().invoke(main, ["mock", "--respondents", "3000", "--seed", "5", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["respondents"] == 3000 and body["seed"] == 5
    assert len(body["results"]) == 9
    for row in body["results"]:
        assert set(row) == KEYS
        assert row["ci_method"] == "clopper-pearson"
        assert 0 <= row["p_mle"] <= 1 and 0 <= row["fit_p_value"] <= 1
    assert [len(body["covariance"][q]) for q in ("smoked", "sleep")] == [2, 3]
    crosstab = body["crosstab"]
    assert (crosstab["rows"], crosstab["cols"], crosstab["n"]) == ("smoked", "sleep", 3000)
    assert len(crosstab["cells"]) == len(crosstab["conditional"]) == 6
    for cell in crosstab["cells"]:
        assert set(cell) == CELL_KEYS
        assert cell["covered"] == (cell["ci_low"] <= cell["true_proportion"] <= cell["ci_high"])
    smokers_short_sleep = crosstab["conditional"][3]
    assert (smokers_short_sleep["row_option"], smokers_short_sleep["col_option"]) == ("Yes",
                                                                                      "Under 6")
    assert smokers_short_sleep["true_proportion"] == pytest.approx(0.5)


def test_human_table():
    result = CliRunner().invoke(main, ["mock", "--respondents", "500", "--seed", "1"])
    assert result.exit_code == 0, result.output
    assert "intervals cover the truth" in result.stdout and "sleep" in result.stdout


def test_coverage_over_many_seeds():
    """23 mock surveys of 400 respondents: 207 intervals. 95 % intervals may miss, but more
    misses than the 99.9 % binomial quantile means the pipeline is biased or overconfident."""
    with resources.as_file(EXAMPLES / "health.toml") as survey, \
            resources.as_file(EXAMPLES / "health_truth.toml") as truth, \
            embedded_aggregator() as api:
        definition = read_definition(survey)
        rows = [row for seed in range(23)
                for row in run_mock(api, definition, truth, 400, seed, 400).rows()]
    assert len(rows) >= 200
    misses = sum(not row["covered"] for row in rows)
    assert misses <= stats.binom.ppf(0.999, len(rows), 0.05), misses


def test_the_truth_never_reaches_the_server(app, live_server, researcher_key, monkeypatch):
    """Every request body the aggregator receives holds only the survey and randomized answers."""
    bodies = []
    inner = app.wsgi_app

    def recording(environ, start_response):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length)
        bodies.append(raw)
        environ["wsgi.input"] = io.BytesIO(raw)
        return inner(environ, start_response)

    app.wsgi_app = recording
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    result = CliRunner().invoke(main, ["mock", "--url", live_server, "--respondents", "200",
                                       "--seed", "3", "--json"])
    assert result.exit_code == 0, result.output
    posted = [json.loads(b) for b in bodies if b]
    survey, batches = posted[0], posted[1:]
    assert survey["title"] == "Health and habits"
    assert sum(len(b["responses"]) for b in batches) == 200
    for batch in batches:
        for response in batch["responses"]:
            assert set(response) == {"answers"}
            assert all(isinstance(v, int) for v in response["answers"].values())
    truth_text = (EXAMPLES / "health_truth.toml").read_text()
    assert "0.475" in truth_text and not any(b"0.475" in b for b in bodies)


JOINT = ("[[joint]]\nrows = \"smoked\"\ncols = \"sleep\"\np = [[0.3, 0.2, 0.1], [0.2, 0.1, 0.1]]\n"
         "[truth]\ndrank_and_drove = 0.1\ncannabis = 0.2\n")


def test_a_joint_table_gives_its_questions_marginals_and_association(tmp_path):
    """The marginals follow from the joint table, and the simulated true answers follow it."""
    import numpy as np

    from ldpsurvey.cli.mock import read_truth
    from ldpsurvey.shared import load_definition
    from ldpsurvey.shared.survey.scenarios import true_answers

    path = tmp_path / "truth.toml"
    path.write_text(JOINT)
    with resources.as_file(EXAMPLES / "health.toml") as survey_file:
        survey = load_definition(survey_file)
    truth = read_truth(path, survey)
    assert truth.marginals["smoked"] == pytest.approx([0.6, 0.4])
    assert truth.marginals["sleep"] == pytest.approx([0.5, 0.3, 0.2])
    n = 20_000
    answers = true_answers(truth, survey, n, np.random.default_rng(7))
    for a, row in enumerate(truth.joints[0].p):
        for b, p in enumerate(row):
            share = np.mean((answers["smoked"] == a) & (answers["sleep"] == b))
            assert abs(share - p) < 5 * (p * (1 - p) / n) ** 0.5


@pytest.mark.parametrize("truth, message", [
    ("[truth]\nsmoked = 1.5\n", "question 'smoked' needs a proportion"),
    ("smoked = 0.1\n", "needs a [truth] table"),
    ("[truth]\nsmoked = 0.1\ndrank_and_drove = 0.1\ncannabis = 0.2\nsleep = [0.5, 0.5]\n",
     "question 'sleep' needs 3 proportions"),
    (JOINT.replace("0.2, 0.1", "0.2, 0.2"), "[[joint]] 1: p needs 2 rows of 3 proportions "
                                            "summing to 1"),
    (JOINT.replace('cols = "sleep"', 'cols = "nope"'), "[[joint]] 1: 'nope' is not a question"),
    (JOINT + "smoked = 0.1\n", "question 'smoked' is given more than once"),
])
def test_bad_truth_files(tmp_path, truth, message):
    path = tmp_path / "truth.toml"
    path.write_text(truth)
    with resources.as_file(EXAMPLES / "health.toml") as survey:
        result = CliRunner().invoke(main, ["mock", "--survey", str(survey), "--truth", str(path),
                                           "--respondents", "10"])
    assert result.exit_code == 1 and message in result.stderr


def test_survey_and_truth_go_together():
    with resources.as_file(EXAMPLES / "health.toml") as survey:
        result = CliRunner().invoke(main, ["mock", "--survey", str(survey)])
    assert result.exit_code == 2 and "--survey and --truth go together" in result.stderr


def test_a_mock_against_a_server_says_which_survey_and_can_leave_it_open(
        live_server, client, auth, researcher_key, monkeypatch):
    """Without --keep-open the mock closes its survey, which releases every response; with it
    the survey stays open and the mock counts only what the server has released at its
    scheduled instants: nothing yet, said in words with the server's next instant (the next
    multiple of its release_every since the epoch) and with no interval claiming to cover."""
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    closed = CliRunner().invoke(main, ["mock", "--url", live_server, "--respondents", "150",
                                       "--seed", "4", "--json"])
    document = json.loads(closed.stdout)
    survey_id = document["survey_id"]
    assert f"survey {survey_id} published on {live_server}" in closed.stderr
    assert client.get(f"/api/surveys/{survey_id}/status").json["status"] == "closed"
    assert document["released"] == 150 and document["release_every"] == 3600
    assert document["next_release"] is None  # nothing waits
    assert all(row["covered"] in (True, False) for row in document["results"])
    arguments = ["mock", "--url", live_server, "--respondents", "150", "--batch-size", "50",
                 "--seed", "4", "--keep-open"]
    before = time.time()
    kept = CliRunner().invoke(main, [*arguments, "--json"])
    after = time.time()
    kept_document = json.loads(kept.stdout)
    kept_id = kept_document["survey_id"]
    assert client.get(f"/api/surveys/{kept_id}/status").json["status"] == "open"
    assert kept_document["released"] == 0  # pooled until the server's next scheduled instant
    assert {row["covered"] for row in kept_document["results"]} == {None}
    instant = datetime.fromisoformat(kept_document["next_release"])
    assert instant.utcoffset() == timedelta(0)
    assert instant.timestamp() in {next_instant(before, 3600), next_instant(after, 3600)}
    text = CliRunner().invoke(main, arguments)
    assert text.exit_code == 0, text.output
    assert "Nothing is released yet" in text.stdout and "intervals cover" not in text.stdout
    assert "scheduled instants, once an hour, when at least 100 are pooled" in text.stdout
    assert "released at scheduled instants, once an hour, in groups of at least 100" in text.stdout
    assert re.search(r"Its next instant: \d{4}-\d\d-\d\dT\d\d:00:00\+00:00 ", text.stdout)
    # The three batches of 50 wait in the pool: one release of 100 or more takes all of them.
    assert released_n(client, auth, kept_id) == 150


def test_the_mock_streams_in_memory_that_does_not_grow_with_respondents(monkeypatch):
    """The mock draws, randomizes, encodes and sends a chunk of respondents at a time: its own
    peak of traced memory (the aggregator runs in gunicorn's processes) at 40,000 respondents
    is within 1 MB of its peak at 4,000, with the same batch size and chunk. Holding every
    report first, as it once did, took about 100 bytes more per respondent (3.6 MB here)."""
    import tracemalloc

    from ldpsurvey.cli import mock

    monkeypatch.setattr(mock, "SIMULATION_CHUNK", 2_000)
    with resources.as_file(EXAMPLES / "health.toml") as survey, \
            resources.as_file(EXAMPLES / "health_truth.toml") as truth, \
            embedded_aggregator() as api:
        definition = read_definition(survey)
        peaks = []
        for respondents in (4_000, 40_000):
            tracemalloc.start()
            try:
                result = run_mock(api, definition, truth, respondents, 3, 500)
                peaks.append(tracemalloc.get_traced_memory()[1])
            finally:
                tracemalloc.stop()
            assert result.released == respondents
    assert peaks[1] < peaks[0] + 2**20, peaks


def test_a_seed_gives_the_same_results_whatever_the_batch_size():
    """The draws depend on the seed (chunk by chunk), not on how the rows are cut into
    batches or in which order the batches arrive: the same estimates; another seed, others."""
    with resources.as_file(EXAMPLES / "health.toml") as survey, \
            resources.as_file(EXAMPLES / "health_truth.toml") as truth, \
            embedded_aggregator() as api:
        definition = read_definition(survey)
        runs = [run_mock(api, definition, truth, 3_000, seed, batch)
                for seed, batch in ((8, 1_000), (8, 1_000), (8, 777), (9, 1_000))]
    first, again, recut, other = (([r["p_hat"] for r in run.rows()], run.crosstab["cells"])
                                  for run in runs)
    assert first == again == recut
    assert first[0] != other[0]


def test_rows_are_cut_into_batches_in_order():
    from ldpsurvey.cli.batches import body, cut, response_rows

    rows = response_rows(["a", "b_2"], [[0, 1, 2], [[0, 1], [1, 0], [0, 0]]])
    assert rows == ['{"answers":{"a":0,"b_2":[0,1]}}', '{"answers":{"a":1,"b_2":[1,0]}}',
                    '{"answers":{"a":2,"b_2":[0,0]}}']
    assert json.loads(body(rows)) == {"responses": [json.loads(row) for row in rows]}
    chunks = [[f"{c}.{i}" for i in range(n)] for c, n in enumerate((5, 1, 0, 7))]
    assert list(cut(chunks, 4)) == [["0.0", "0.1", "0.2", "0.3"], ["0.4", "1.0", "3.0", "3.1"],
                                    ["3.2", "3.3", "3.4", "3.5"], ["3.6"]]
    assert list(cut(chunks, 13)) == [[row for chunk in chunks for row in chunk]]


def test_the_embedded_aggregator_releases_every_second_without_rate_limits(monkeypatch):
    """Its gunicorn workers make the app from the same settings (worker_environment: a None
    setting unset, whatever this environment says); they release every second and answer
    more estimates requests than its workers would allow a minute as a server's (60 each)."""
    from ldpsurvey.cli.embedded import RELEASE_EVERY, settings, worker_environment, workers

    monkeypatch.setenv("LDP_SURVEY_KEY_FILE", "/nowhere/key.pem")
    monkeypatch.setenv("LDP_SURVEY_RELEASE_EVERY", "3600")
    env = worker_environment(settings("/tmp/x"))
    assert "LDP_SURVEY_KEY_FILE" not in env
    assert (env["LDP_SURVEY_RELEASE_EVERY"], env["LDP_SURVEY_RATE_LIMITS_ENABLED"]) == ("1", "false")
    monkeypatch.delenv("LDP_SURVEY_KEY_FILE")
    monkeypatch.delenv("LDP_SURVEY_RELEASE_EVERY")
    with resources.as_file(EXAMPLES / "health.toml") as survey, \
            resources.as_file(EXAMPLES / "health_truth.toml") as truth, \
            embedded_aggregator() as api:
        result = run_mock(api, read_definition(survey), truth, 500, 1, 100, keep_open=True)
        path = f"/api/surveys/{result.survey.survey_id}/estimates"
        deadline = time.monotonic() + 30
        while api.get(path).json()["questions"][0]["options"][0]["n"] < 500:
            assert time.monotonic() < deadline, "nothing released within 30 s"
            time.sleep(0.2)
        requests = 60 * workers() + 10
        assert [api.get(path).status for _ in range(requests)] == [200] * requests
    assert result.estimates["release_every"] == RELEASE_EVERY == 1


def test_the_embedded_aggregator_takes_full_batches_from_more_senders(
        live_server, researcher_key, monkeypatch):
    """Without --batch-size the mock sends its embedded aggregator batches of the API's limit,
    one in flight per thread of each of its workers (one per core and one more), and an
    aggregator at --url batches of 5,000, four in flight; --batch-size sets either."""
    from ldpsurvey.cli import batches, embedded
    from ldpsurvey.shared.http_contract import MAX_BATCH_RESPONSES

    sent, real = [], batches.send

    def recording(api, path, rows, progress, senders=batches.SENDERS):
        cut = list(rows)
        sent.append((senders, [len(batch) for batch in cut]))
        real(api, path, cut, progress, senders)

    monkeypatch.setattr(batches, "send", recording)
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    respondents = MAX_BATCH_RESPONSES + 2_000
    for where in ([], ["--url", live_server], ["--batch-size", "7000"]):
        result = CliRunner().invoke(main, ["mock", "--respondents", str(respondents), "--seed",
                                           "2", "--json", *where])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["released"] == respondents
    assert embedded.workers() == len(os.sched_getaffinity(0)) + 1
    assert sent == [(embedded.workers() * embedded.THREADS, [MAX_BATCH_RESPONSES, 2_000]),
                    (4, [5_000, 5_000, 2_000]),
                    (embedded.workers() * embedded.THREADS, [7_000, 5_000])]
