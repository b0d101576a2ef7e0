"""The researcher commands against a real aggregator over HTTP."""

import json
import math
from importlib import resources

import click
import pytest
from click.testing import CliRunner

from ldpsurvey.cli import main
from ldpsurvey.shared import DEFAULT_METHOD

from helpers import release_due

EXAMPLE = resources.files("ldpsurvey.shared") / "examples" / "health.toml"


@pytest.fixture
def runner(researcher_key, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    return CliRunner()


def test_create_answer_results_close(runner, live_server, client, tmp_path):
    path = tmp_path / "released-at-once.toml"  # the example, releasing every response at once
    path.write_text("release_batch = 1\n" + EXAMPLE.read_text())
    created = runner.invoke(main, ["survey", "create", str(path), "--url", live_server])
    assert created.exit_code == 0, created.output
    survey_id = created.stdout.strip()
    answers = {"smoked": 1, "drank_and_drove": 0, "cannabis": 1, "sleep": 2}
    assert client.post(f"/api/surveys/{survey_id}/responses",
                       json={"answers": answers}).status_code == 201
    release_due(client.application)
    shown = runner.invoke(main, ["results", "--url", live_server, "--survey", survey_id, "--json"])
    assert shown.exit_code == 0, shown.output
    body = json.loads(shown.stdout)
    assert body["questions"][0]["options"][1]["reported_count"] == 1
    table = runner.invoke(main, ["results", "--url", live_server, "--survey", survey_id])
    assert "smoked" in table.stdout and DEFAULT_METHOD in table.stdout
    unconfirmed = runner.invoke(main, ["survey", "close", survey_id, "--url", live_server])
    assert unconfirmed.exit_code == 2 and "--yes" in unconfirmed.stderr  # no terminal to ask at
    assert client.get(f"/api/surveys/{survey_id}/status").json["status"] == "open"
    closed = runner.invoke(main, ["survey", "close", survey_id, "--yes", "--url", live_server])
    assert closed.exit_code == 0
    assert client.get(f"/api/surveys/{survey_id}/status").json["status"] == "closed"


def test_invalid_file_is_refused_before_sending(runner, live_server, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('title = "x"\n[[questions]]\nid = "q"\ntext = "?"\ntype = "yes_no"\n'
                   "alpha = 1.5\n")
    result = runner.invoke(main, ["survey", "create", str(bad), "--url", live_server])
    assert result.exit_code == 1
    assert "question 'q'.alpha: must be in (0, 1)" in result.stderr


def test_wrong_key_is_explained(live_server, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_KEY", "ldp_res_wrong")
    with resources.as_file(EXAMPLE) as path:
        result = CliRunner().invoke(main, ["survey", "create", str(path), "--url", live_server])
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1
    assert "did not accept the researcher key" in result.stderr
    assert "set LDP_SURVEY_KEY" in result.stderr and "Authorization" not in result.stderr


def test_without_a_key_or_a_terminal_it_says_so_in_one_line(live_server, monkeypatch):
    monkeypatch.delenv("LDP_SURVEY_KEY", raising=False)
    with resources.as_file(EXAMPLE) as path:
        result = CliRunner().invoke(main, ["survey", "create", str(path), "--url", live_server])
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1
    assert "set LDP_SURVEY_KEY (there is no terminal to ask at)" in result.stderr


def test_key_is_prompted_for_when_not_in_the_environment(researcher_key, live_server,
                                                         monkeypatch):
    monkeypatch.delenv("LDP_SURVEY_KEY", raising=False)
    monkeypatch.setattr("ldpsurvey.cli.api.can_prompt", lambda: True)  # as at a terminal
    with resources.as_file(EXAMPLE) as path:
        result = CliRunner().invoke(main, ["survey", "create", str(path), "--url", live_server],
                                    input=f"{researcher_key}\n")
    assert result.exit_code == 0, result.output
    assert researcher_key not in result.stdout


def test_unreachable_server(runner):
    result = runner.invoke(main, ["results", "--url", "http://127.0.0.1:9", "--survey", "x"])
    assert result.exit_code == 1 and "could not reach" in result.stderr


def test_admin_create_key_stores_only_a_hash(tmp_path, database_url):
    result = CliRunner().invoke(main, ["admin", "create-key", "--instance", str(tmp_path),
                                       "--database", database_url])
    assert result.exit_code == 0, result.output
    key = result.stdout.strip()
    assert key.startswith("ldp_res_")
    from ldpsurvey.aggregator import close_app, create_app
    from ldpsurvey.aggregator.config.ids import hash_text
    from ldpsurvey.aggregator.web.request_connection import get_db

    app = create_app({"DATABASE_URL": database_url}, instance_path=tmp_path)
    with app.app_context():
        assert get_db().query("SELECT key_hash FROM api_keys") == [(hash_text(key),)]
    close_app(app)


def test_tokens_and_csv_export(runner, live_server, client, auth):
    from helpers import SURVEY

    survey_id = client.post("/api/surveys", json={**SURVEY, "invitation_only": True},
                            headers=auth).json["survey_id"]
    minted = runner.invoke(main, ["survey", "tokens", survey_id, "--count", "2", "--url",
                                  live_server])
    assert minted.exit_code == 0, minted.output
    links = minted.stdout.split()
    assert len(links) == 2 and all(f"/s/{survey_id}#t=" in link for link in links)
    token = links[0].split("#t=")[1]
    response = client.post(f"/api/surveys/{survey_id}/responses", headers={"Survey-Token": token},
                           json={"answers": {"smoked": 1, "drove": 0, "sleep": 2}})
    assert response.status_code == 201
    release_due(client.application)
    exported = runner.invoke(main, ["results", "--url", live_server, "--survey", survey_id,
                                    "--csv"])
    assert exported.exit_code == 0
    assert exported.stdout.splitlines() == ["smoked,drove,sleep", "Yes,No,>8"]


@pytest.mark.parametrize("command", [["survey", "create"], ["survey", "close"],
                                     ["survey", "tokens"], ["results"], ["respond"]])
def test_help_says_the_url_comes_from_ldp_survey_url(command):
    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0 and "LDP_SURVEY_URL" in result.output


def test_the_url_is_read_from_the_environment(runner, live_server, client, auth, monkeypatch):
    from helpers import SURVEY

    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    monkeypatch.setenv("LDP_SURVEY_URL", live_server + "/")
    assert runner.invoke(main, ["survey", "close", survey_id, "--yes"]).exit_code == 0
    assert client.get(f"/api/surveys/{survey_id}/status").json["status"] == "closed"


def test_public_results_are_read_without_a_key_and_others_ask_for_one(
        researcher_key, live_server, client, auth, monkeypatch):
    """results tries without a key first: a public survey never prompts; a private one asks
    once, only after the server answered 401."""
    from helpers import SURVEY

    monkeypatch.delenv("LDP_SURVEY_KEY", raising=False)
    monkeypatch.setattr("ldpsurvey.cli.api.can_prompt", lambda: True)  # as at a terminal
    public = client.post("/api/surveys", json={**SURVEY, "public_results": True},
                         headers=auth).json["survey_id"]
    private = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    shown = CliRunner().invoke(main, ["results", "--url", live_server, "--survey", public,
                                      "--json"], input="")
    assert shown.exit_code == 0 and "Researcher key" not in shown.output
    asked = CliRunner().invoke(main, ["results", "--url", live_server, "--survey", private,
                                      "--json"], input=f"{researcher_key}\n")
    assert asked.exit_code == 0, asked.output
    assert asked.output.count("Researcher key") == 1 and "Researcher key" in asked.stderr
    assert json.loads(asked.stdout)["survey_id"] == private  # the prompt is not in the JSON


@pytest.mark.parametrize("command", [["results", "--survey", "x"],
                                     ["survey", "close", "x", "--yes"],
                                     ["respond", "--survey", "x", "--yes"]])
def test_plain_http_to_another_machine_needs_insecure_http(command, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_KEY", "ldp_res_unused")
    refused = CliRunner().invoke(main, [*command, "--url", "http://survey.example.org"])
    assert refused.exit_code == 2 and "--insecure-http" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    allowed = CliRunner().invoke(main, [*command, "--insecure-http", "--url",
                                        "http://127.0.0.1:9"])
    assert "insecure" not in allowed.stderr and "could not reach" in allowed.stderr



def test_the_url_check():
    from ldpsurvey.cli.api import check_url

    assert check_url("https://survey.example.org/") == "https://survey.example.org"
    assert check_url("http://localhost:8000") == "http://localhost:8000"
    assert check_url("http://[::1]:8000") == "http://[::1]:8000"
    assert check_url("http://survey.example.org", insecure_http=True)
    for url in ("http://survey.example.org", "http://127.0.0.1.example.org", "ftp://x"):
        with pytest.raises(click.BadParameter):
            check_url(url)


def admin(database_url, tmp_path, *args):
    return CliRunner().invoke(main, ["admin", *args, "--instance", str(tmp_path),
                                     "--database", database_url])


def test_admin_keys_create_list_and_revoke(tmp_path, database_url):
    made = admin(database_url, tmp_path, "create-key", "--name", "alice")
    assert made.exit_code == 0, made.output
    key = made.stdout.strip()  # the key alone on stdout: $(ldp-survey admin create-key) works
    assert key.startswith("ldp_res_") and "\n" not in key
    assert "new researcher 'alice'" in made.stderr
    taken = admin(database_url, tmp_path, "create-key", "--name", "alice")
    assert taken.exit_code == 1 and "the name 'alice' is taken" in taken.stderr
    again = admin(database_url, tmp_path, "create-key", "--name", "alice", "--existing",
                  "--role", "admin")
    assert again.stdout.startswith("ldp_adm_") and "for researcher 'alice'" in again.stderr
    listed = admin(database_url, tmp_path, "keys", "list", "--json")
    keys = json.loads(listed.stdout)["keys"]
    assert [set(k) for k in keys] == [{"api_key_id", "name", "role", "created", "last_used"}] * 2
    assert sorted(k["role"] for k in keys) == ["admin", "researcher"]
    assert {k["name"] for k in keys} == {"alice"} and all(k["last_used"] is None for k in keys)
    table = admin(database_url, tmp_path, "keys", "list")
    assert keys[0]["api_key_id"] in table.stdout and "last_used" in table.stdout
    revoked = admin(database_url, tmp_path, "keys", "revoke", keys[0]["api_key_id"])
    assert revoked.exit_code == 0 and "revoked" in revoked.stderr
    assert len(json.loads(admin(database_url, tmp_path, "keys", "list", "--json").stdout)[
        "keys"]) == 1
    gone = admin(database_url, tmp_path, "keys", "revoke", keys[0]["api_key_id"])
    assert gone.exit_code == 1 and "no API key with id" in gone.stderr


@pytest.mark.parametrize("args, message", [
    (["--role", "relay"], "needs the surveys"),
    (["--role", "relay", "--survey", "nosuchsurveyhere"], "no survey with id"),
    (["--name", "Not A Name"], "a name is 1 to 64"),
])
def test_admin_create_key_refuses_bad_requests_in_one_line(tmp_path, database_url, args,
                                                           message):
    result = admin(database_url, tmp_path, "create-key", *args)
    assert result.exit_code == 1 and result.stdout == ""
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_survey_share_and_unshare(runner, app, live_server, client, auth):
    from ldpsurvey.aggregator import create_api_key

    from helpers import SURVEY

    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    bob = {"Authorization": f"Bearer {create_api_key(app, name='bob').key}"}
    assert client.get(f"/api/surveys/{survey_id}/estimates", headers=bob).status_code == 404
    shared = runner.invoke(main, ["survey", "share", survey_id, "--with", "bob",
                                  "--url", live_server])
    assert shared.exit_code == 0 and "shared with bob" in shared.stderr
    assert client.get(f"/api/surveys/{survey_id}/estimates", headers=bob).status_code == 200
    unshared = runner.invoke(main, ["survey", "unshare", survey_id, "--with", "bob",
                                    "--url", live_server])
    assert unshared.exit_code == 0 and "shared with nobody" in unshared.stderr
    assert client.get(f"/api/surveys/{survey_id}/estimates", headers=bob).status_code == 404
    unknown = runner.invoke(main, ["survey", "share", survey_id, "--with", "nobody",
                                   "--url", live_server])
    assert unknown.exit_code == 1 and "no researcher named 'nobody'" in unknown.stderr


def test_an_export_streams_to_a_file_with_a_progress_bar(runner, live_server, client, auth,
                                                          tmp_path):
    from helpers import SURVEY

    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    rows = [{"answers": {"smoked": i % 2, "drove": 0, "sleep": i % 3}} for i in range(3000)]
    client.post(f"/api/surveys/{survey_id}/responses/batch", json={"responses": rows},
                headers=auth)
    release_due(client.application)
    path = tmp_path / "export.jsonl"
    written = runner.invoke(main, ["results", "--url", live_server, "--survey", survey_id,
                                   "--jsonl", "--output", str(path)])
    assert written.exit_code == 0, written.output
    assert "3000 responses written" in written.stderr and written.stdout == ""
    assert path.read_bytes() == client.get(f"/api/surveys/{survey_id}/export.jsonl",
                                           headers=auth).get_data()
    missing = runner.invoke(main, ["results", "--url", live_server, "--survey", "a" * 21,
                                   "--csv"])
    assert missing.exit_code == 1 and "does not know this survey" in missing.stderr


def test_admin_commands_say_which_database_and_never_start_an_unnamed_instance(
        tmp_path, monkeypatch):
    """Run from another folder, create-key used to make a new ./instance and print a key the
    running server never saw."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LDP_SURVEY_INSTANCE", raising=False)
    monkeypatch.delenv("LDP_SURVEY_DATABASE_URL", raising=False)
    refused = CliRunner().invoke(main, ["admin", "create-key"])
    assert refused.exit_code == 1 and refused.stdout == ""
    assert "no aggregator instance folder at ./instance" in refused.stderr
    assert not (tmp_path / "instance").exists()
    made = CliRunner().invoke(main, ["admin", "create-key", "--instance", "server"])
    assert made.exit_code == 0
    assert f"database: sqlite:///{tmp_path / 'server' / 'ldp-survey.sqlite3'}" in made.stderr
    again = CliRunner().invoke(main, ["admin", "keys", "list"],
                               env={"LDP_SURVEY_INSTANCE": "server"})
    assert again.exit_code == 0 and "researcher" in again.stdout


def test_survey_list(runner, live_server, client, auth):
    from helpers import SURVEY

    empty = runner.invoke(main, ["survey", "list", "--url", live_server])
    assert empty.exit_code == 0 and "no surveys yet" in empty.stderr
    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    client.post(f"/api/surveys/{survey_id}/responses",
                json={"answers": {"smoked": 1, "drove": 0, "sleep": 2}})
    release_due(client.application)
    listed = runner.invoke(main, ["survey", "list", "--url", live_server, "--json"])
    (entry,) = json.loads(listed.stdout)["surveys"]
    assert set(entry) == {"survey_id", "title", "status", "created", "n", "invitation_only",
                          "archived"}
    assert entry["invitation_only"] is False
    assert (entry["survey_id"], entry["title"], entry["n"]) == (survey_id, "Habits", 1)
    shown = runner.invoke(main, ["survey", "list", "--url", live_server])
    assert survey_id in shown.stdout and "Habits" in shown.stdout


ABOVE_CEILINGS = """title = "Above"
invitation_only = true
[[questions]]
id = "smoked"
text = "Smoked?"
type = "yes_no"
alpha = 0.5
beta = 0.3
"""


def test_survey_check_reports_without_publishing(tmp_path):
    path = tmp_path / "above.toml"
    path.write_text(ABOVE_CEILINGS)
    checked = CliRunner().invoke(main, ["survey", "check", str(path), "--json",
                                        "--respondents", "400"])
    assert checked.exit_code == 0, checked.output
    body = json.loads(checked.stdout)
    assert set(body) == {"title", "respondents", "total_epsilon", "accepted_by_default",
                         "refusals", "questions", "disclosed", "languages",
                         "form_words_missing", "form_origins"}
    assert body["languages"] == ["en"]  # a survey that names none is in English
    assert body["disclosed"] is None  # no openly answered question
    (question,) = body["questions"]
    assert set(question) == {"id", "epsilon", "posterior_max", "margin", "mechanism", "quantity",
                             "auto", "disclosed"}
    assert (question["mechanism"], question["quantity"], question["auto"],
            question["disclosed"]) == ("forced_response", "proportion", None, False)
    eps = math.log(1 + 0.5 / (0.5 * 0.3))  # ln(13/3), above ln 3
    assert question["epsilon"] == pytest.approx(eps)
    assert question["posterior_max"] == pytest.approx(math.exp(eps) / (1 + math.exp(eps)))
    # worst case: the reported rate nearest 1/2 is 1/2: z sqrt(1/4 / 400) / 0.5
    assert question["margin"] == pytest.approx(1.959963984540054 * 0.025 / 0.5)
    assert body["accepted_by_default"] is False and body["respondents"] == 400
    (refusal,) = body["refusals"]
    assert refusal["questions"] == ["smoked"] and "at most 1.098" in refusal["fix"]
    plain = CliRunner().invoke(main, ["survey", "check", str(EXAMPLE)])
    assert "will accept it" in plain.stdout and "steps of 100" in plain.stdout


def test_survey_create_refuses_what_default_ceilings_refuse(runner, live_server, client, auth,
                                                            tmp_path):
    path = tmp_path / "above.toml"
    path.write_text(ABOVE_CEILINGS)
    refused = runner.invoke(main, ["survey", "create", str(path), "--url", live_server])
    assert refused.exit_code == 1 and "--above-default-ceilings" in refused.stderr
    assert client.get("/api/surveys", headers=auth).json["surveys"] == []
    made = runner.invoke(main, ["survey", "create", str(path), "--url", live_server,
                                "--above-default-ceilings"])
    assert made.exit_code == 0
    assert f"ldp-survey survey tokens {made.stdout.strip()} --count N" in made.stderr
    assert "/s/" not in made.stderr  # no plain link: nobody could use it without a token


def test_admin_commands_use_the_database_serve_was_given(tmp_path, database_url, monkeypatch):
    """`serve --database URL --instance FOLDER` records URL in the folder (mode 0600), and
    `admin create-key --instance FOLDER` then makes a key that server accepts, with no SQLite
    file in the folder; a --database named to admin still wins (the server refuses that
    key)."""
    import stat
    import subprocess
    import sys

    from processes import free_port, kill, request, wait_until_up

    monkeypatch.delenv("LDP_SURVEY_DATABASE_URL", raising=False)
    instance, port = tmp_path / "instance", free_port()
    server = subprocess.Popen([sys.executable, "-m", "ldpsurvey.cli", "serve", "--port",
                               str(port), "--instance", str(instance), "--database",
                               database_url], stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/healthz")
        recorded = instance / "database-url"
        assert recorded.read_text().strip() == database_url
        assert stat.S_IMODE(recorded.stat().st_mode) == 0o600
        made = CliRunner().invoke(main, ["admin", "create-key", "--instance", str(instance)])
        assert made.exit_code == 0, made.output
        other = CliRunner().invoke(main, ["admin", "create-key", "--instance", str(instance),
                                          "--database", f"sqlite:///{tmp_path}/other.sqlite3"])
        assert other.exit_code == 0, other.output
        statuses = [request("GET", f"http://127.0.0.1:{port}/api/surveys", headers={
            "Authorization": f"Bearer {result.stdout.strip()}"})[0] for result in (made, other)]
    finally:
        kill(server)
    assert statuses == [200, 401]
    assert not (instance / "ldp-survey.sqlite3").exists()


def test_the_recorded_database_never_writes_through_a_planted_link(tmp_path):
    """The attack: in an instance folder others can write, a link planted at the name `serve`
    wrote through made it copy the database URL (and its password) into the link's target,
    keeping that file's mode. The URL goes to a file of a fresh name, 0600, renamed into place."""
    import stat

    from ldpsurvey.cli.aggregator_app import DATABASE_FILE, record_database

    instance, victim = tmp_path / "instance", tmp_path / "victim"
    instance.mkdir()
    victim.write_text("")
    victim.chmod(0o644)
    for name in (f".{DATABASE_FILE}.new", DATABASE_FILE):
        (instance / name).unlink(missing_ok=True)
        (instance / name).symlink_to(victim)
        record_database("postgresql://u:SECRET@h/db", str(instance))
        assert victim.read_text() == ""
        recorded = instance / DATABASE_FILE
        assert not recorded.is_symlink() and "SECRET" in recorded.read_text()
        assert stat.S_IMODE(recorded.stat().st_mode) == 0o600
