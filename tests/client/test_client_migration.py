"""Migration of a respondent state file written by release 0.2 (tests/fixtures/client-state-0.2):
an aggregator with that release's key and survey ids, answered again by the new client at
another address."""

import base64
import json
import math
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ldpsurvey.cli import main
from ldpsurvey.client import LocalState, ledger
from ldpsurvey.client.state import LEGACY_CHARGE
from ldpsurvey.shared.survey.manifest import key_id

from helpers import released_n, sent_body

FIXTURE = Path(__file__).parents[1] / "fixtures" / "client-state-0.2"
SURVEYS = json.loads((FIXTURE / "surveys.json").read_text())["surveys"]


@pytest.fixture
def database_url(tmp_path):
    """One engine is enough: the client is under test."""
    return f"sqlite:///{tmp_path / 'migration.sqlite3'}"


@pytest.fixture
def app(database_url, tmp_path):
    from ldpsurvey.aggregator import close_app, create_app

    key_file = tmp_path / "signing-key.pem"
    shutil.copy(FIXTURE / "signing-key.pem", key_file)
    key_file.chmod(0o600)
    application = create_app({"DATABASE_URL": database_url, "KEY_FILE": str(key_file)},
                             instance_path=tmp_path / "instance")
    yield application
    close_app(application)


@pytest.fixture
def published(client, auth, monkeypatch):
    """The fixture's surveys under their own ids."""
    from ldpsurvey.aggregator.services import lifecycle

    for survey in SURVEYS.values():
        monkeypatch.setattr(lifecycle, "new_survey_id", lambda s=survey: s["survey_id"])
        assert create(client, auth, survey["definition"]) == survey["survey_id"]
    return {name: survey["survey_id"] for name, survey in SURVEYS.items()}


@pytest.fixture
def runner(tmp_path, monkeypatch):
    folder = tmp_path / "respondent"
    folder.mkdir()
    shutil.copy(FIXTURE / "state.json", folder / "state.json")
    monkeypatch.setenv("LDP_SURVEY_CLIENT_DIR", str(folder))
    return CliRunner()


def create(client, auth, definition):
    response = client.post("/api/surveys", json=definition, headers=auth)
    assert response.status_code == 201, response.json
    return response.json["survey_id"]



def count(client, auth, survey_id):
    return released_n(client, auth, survey_id)


def test_answered_surveys_are_never_randomized_again(runner, live_server, client, auth,
                                                     published, tmp_path):
    old = json.loads((FIXTURE / "state.json").read_text())
    kept = {name: old["surveys"][url] for url in old["surveys"] for name, sid in
            published.items() if url.endswith(sid)}
    state = LocalState(tmp_path / "respondent" / "state.json")  # migrated and written
    written = json.loads(state.path.read_text())
    fixture_key = next(iter(old["pinned_keys"].values()))
    assert written["version"] == 3 and written["pins"] == {
        "http://127.0.0.1:39235": fixture_key, "http://localhost:39235": fixture_key}
    sent_id, declined_id = published["sent"], published["declined"]
    kid = key_id(base64.b64decode(fixture_key))
    assert state.record(kid, sent_id)["charged"] == LEGACY_CHARGE  # sent: at most 4 ln 3
    assert state.record(kid, declined_id)["charged"] is None       # never sent: nothing

    for name, expected in (("sent", "You already sent this survey"),
                           ("declined", "did not send it")):
        result = runner.invoke(main, ["respond", "--url", live_server.upper(), "--survey",
                                      published[name], "--yes", "--details"])
        assert result.exit_code == 0, result.output
        assert expected in result.stdout and "Your answer" not in result.stdout
        body = {"answers": kept[name]["answers"]}
        assert sent_body(result.stdout) == body
        replay = client.post(f"/api/surveys/{published[name]}/responses", json=body,
                             headers={"Idempotency-Key": kept[name]["idempotency_key"]})
        assert replay.headers.get("Idempotent-Replayed") == "true"  # the same key was used
        assert count(client, auth, published[name]) == 1
    charged = {s["survey_id"]: s for s in ledger.summary(LocalState(state.path),
                                                         100.0)["aggregators"][0]["surveys"]}
    # seen again, the estimate becomes the survey's exact epsilon
    assert charged[sent_id]["epsilon"] == pytest.approx(math.log(3) + 1.0)
    assert charged[declined_id]["epsilon"] == pytest.approx(math.log1p(0.45 / 0.55 / 0.5))
