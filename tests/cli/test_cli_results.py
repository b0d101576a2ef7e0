"""`ldp-survey results` with --simultaneous, --difference and --crosstab, over HTTP."""

import json

import pytest
from click.testing import CliRunner

from ldpsurvey.cli import main
from ldpsurvey.shared import crosstab, difference, estimate, parse_manifest

from helpers import SURVEY, release_due

RESPONSES = ([{"smoked": 1, "drove": 0, "sleep": 0}] * 12 + [{"smoked": 0, "drove": 1, "sleep": 1}]
             * 9 + [{"smoked": 0, "drove": 0, "sleep": 2}] * 5)


@pytest.fixture
def answered(client, auth, researcher_key, monkeypatch):
    """A survey with 26 released responses (fewer than 30: every option carries a warning)."""
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    client.post(f"/api/surveys/{survey_id}/responses/batch",
                json={"responses": [{"answers": a} for a in RESPONSES]}, headers=auth)
    release_due(client.application)
    return survey_id, parse_manifest(client.get(f"/api/surveys/{survey_id}").data)


def results(live_server, survey_id, *args):
    result = CliRunner().invoke(main, ["results", "--url", live_server, "--survey", survey_id,
                                       *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def counts_of(question):
    return [sum(1 for r in RESPONSES if r[question.id] == j) for j in range(len(question.options))]


def test_difference_of_two_options_is_the_shared_difference(live_server, answered):
    survey_id, survey = answered
    out = json.loads(results(live_server, survey_id, "--difference", "sleep:0,sleep:2",
                             "--confidence", "0.9", "--json"))
    sleep = survey.question("sleep")
    assert out == difference(sleep.reported_mechanism, counts_of(sleep), 0, 2,
                             confidence=0.9).as_dict()


@pytest.mark.parametrize("spec", ["sleep:0,smoked:1", "sleep:0", "nope:0,nope:1", "sleep:0,sleep:0",
                                  "sleep:0,sleep:9"])
def test_a_bad_difference_is_one_line(live_server, answered, spec):
    result = CliRunner().invoke(main, ["results", "--url", live_server, "--survey", answered[0],
                                       "--difference", spec])
    assert result.exit_code == 2 and "--difference" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_simultaneous_intervals(live_server, answered):
    survey_id, survey = answered
    body = json.loads(results(live_server, survey_id, "--simultaneous", "--json"))
    assert body["simultaneous"] is True
    sleep = survey.question("sleep")
    expected = estimate(sleep.reported_mechanism, counts_of(sleep), confidence=0.95,
                        simultaneous=True)
    assert [(o["ci_low"], o["ci_high"]) for o in body["questions"][2]["options"]] == [
        (e.ci_low, e.ci_high) for e in expected]
    assert "95% simultaneous" in results(live_server, survey_id, "--simultaneous")


def test_the_table_shows_warnings_beside_the_numbers(live_server, answered):
    table = results(live_server, answered[0])
    assert "small sample: n = 26 < 30" in table and "MLE" in table


def test_crosstab_json_and_table(live_server, answered):
    survey_id, survey = answered
    body = json.loads(results(live_server, survey_id, "--crosstab", "smoked,sleep", "--json"))
    joint = [[sum(1 for r in RESPONSES if (r["smoked"], r["sleep"]) == (a, b)) for b in range(3)]
             for a in range(2)]
    expected = crosstab(survey.question("smoked").reported_mechanism,
                        survey.question("sleep").reported_mechanism, joint)
    assert body["joint"] == [list(row) for row in expected.joint] and body["n"] == 26
    table = results(live_server, survey_id, "--crosstab", "smoked,sleep")
    assert "conditional" in table and ">8" in table and "Yes" in table
    bad = CliRunner().invoke(main, ["results", "--url", live_server, "--survey", survey_id,
                                    "--crosstab", "smoked,nope"])
    assert bad.exit_code == 1 and "cols must be a question id" in bad.stderr
