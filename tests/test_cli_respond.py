"""`ldp-survey respond` against a real aggregator."""

from importlib import resources

import pytest
from click.testing import CliRunner

from ldpsurvey.cli import main
from ldpsurvey.shared import read_definition


@pytest.fixture
def health_id(client, auth):
    example = resources.files("ldpsurvey.shared") / "examples" / "health.toml"
    with resources.as_file(example) as path:
        # released at once, so a test reads the count right after answering
        response = client.post("/api/surveys", json={**read_definition(path), "release_batch": 1},
                               headers=auth)
    return response.json["survey_id"]


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_CLIENT_DIR", str(tmp_path / "respondent"))
    return CliRunner()


def responses(client, auth, survey_id):
    return client.get(f"/api/surveys/{survey_id}/estimates",
                      headers=auth).json["questions"][0]["n"]


ANSWERS = "smoked=yes,drank_and_drove=no,cannabis=n,sleep=6 to 8"


def test_scripted(runner, live_server, client, auth, health_id):
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                  "--answers", ANSWERS, "--yes"])
    assert result.exit_code == 0, result.output
    assert "If you answer Yes, the server receives Yes with 75 % probability" in result.stdout
    assert "at most 75 % sure after seeing this answer" in result.stdout
    assert "This is exactly what will be sent" in result.stdout and "Sent." in result.stdout
    assert responses(client, auth, health_id) == 1
    again = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id, "--yes"])
    assert again.exit_code == 0, again.output
    assert "You already sent this survey from this device" in again.stdout
    assert responses(client, auth, health_id) == 1


def test_interactive(runner, live_server, client, auth, health_id):
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id],
                           input="maybe\nyes\nno\nno\n7\n1\ny\n")
    assert result.exit_code == 0, result.output
    assert "takes yes or no" in result.output and "option number from 0 to 2" in result.output
    assert responses(client, auth, health_id) == 1


def test_declining_sends_nothing_but_keeps_the_randomized_answers(runner, live_server, client,
                                                                  auth, health_id):
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                  "--answers", ANSWERS], input="n\n")
    assert result.exit_code == 0 and "Not sent" in result.stdout
    assert responses(client, auth, health_id) == 0
    sent_first = result.stdout.split("exactly what will be sent")[1].splitlines()[1]
    later = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id, "--yes"])
    assert later.stdout.split("exactly what will be sent")[1].splitlines()[1] == sent_first
    assert "did not send it" in later.stdout and "already sent" not in later.stdout


def test_refuses_above_the_ceiling(runner, live_server, client, auth, health_id):
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                  "--max-epsilon", "0.5", "--answers", ANSWERS, "--yes"])
    assert result.exit_code == 1
    assert "not answering" in result.stderr and "above your ceiling of 0.5" in result.stderr
    assert responses(client, auth, health_id) == 0


@pytest.mark.parametrize("answers, message", [
    ("smoked=perhaps", "takes yes or no"),
    ("nosuch=1", "no question 'nosuch'"),
    ("smoked", "expected question=answer"),
])
def test_bad_answers_option(runner, live_server, health_id, answers, message):
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                  "--answers", answers, "--yes"])
    assert result.exit_code == 2 and message in result.stderr


def test_the_release_batch_is_shown_as_the_servers_promise(runner, live_server, client, auth):
    definition = {**read_definition(resources.files("ldpsurvey.shared") / "examples" /
                                    "health.toml"), "release_batch": 250}
    survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", survey_id,
                                  "--answers", ANSWERS, "--yes"])
    assert result.exit_code == 0, result.output
    assert "until at least 250 submissions have arrived" in result.stdout
    assert "This is the server's promise: your device cannot check it." in result.stdout
