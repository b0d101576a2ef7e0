"""--json on every command that prints something a script might want: one JSON document on
stdout with the API's field names, messages and prompts on stderr, errors one line on stderr
(never JSON) with a non-zero exit and nothing on stdout."""

import json
import math
from importlib import resources

import click
import jsonschema
import pytest
from click.testing import CliRunner

from ldpsurvey.cli import main
from ldpsurvey.cli.options import json_option
from ldpsurvey.shared import read_definition

from helpers import SURVEY, release_due

HEALTH = resources.files("ldpsurvey.shared") / "examples" / "health.toml"
HEALTH_ANSWERS = "smoked=yes,drank_and_drove=no,cannabis=n,sleep=6 to 8"

# Commands without --json, each with the reason: a script has nothing to read from them.
EXEMPT = {
    "serve": "runs the aggregator until stopped; it prints one log line for people on stderr "
             "and then request logs, no result (with --public, also the two addresses it serves, "
             "which follow from its own options)",
    "deploy systemd": "prints a systemd unit file, which is its own format, to be saved as is",
    "survey qr": "writes an image file (SVG or PNG) and says where on stderr: nothing to parse",
    "survey export-xlsform": "writes a spreadsheet (.xlsx) and says where on stderr: nothing "
                             "to parse",
}
# Commands whose --json is declared apart from options.json_option, each with the reason.
OWN_DECLARATION: dict[str, str] = {}  # a command that must declare --json itself, and why


def leaves(group: click.Group, prefix: tuple[str, ...] = ()):
    """Every command below `group`, by its full name (`survey create`)."""
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from leaves(command, (*prefix, name))
        else:
            yield " ".join((*prefix, name)), command


def test_every_command_has_json_or_a_stated_reason_not_to():
    shared = json_option(click.command()(lambda as_json: None)).params[0]
    names = []
    for name, command in leaves(main):
        names.append(name)
        flags = [p for p in command.params if "--json" in getattr(p, "opts", ())]
        if name in EXEMPT:
            assert not flags, f"{name} has --json: drop it from EXEMPT"
            continue
        assert len(flags) == 1, f"`ldp-survey {name}` has no --json and no reason in EXEMPT"
        (flag,) = flags
        assert flag.is_flag and flag.name == "as_json", name
        if name not in OWN_DECLARATION:
            assert flag.help == shared.help, f"{name}: declare --json with options.json_option"
    # the walk really reaches every level: top-level, survey and admin keys commands
    assert {"respond", "survey create", "survey tokens", "admin keys revoke",
            "serve"} <= set(names)
    assert set(EXEMPT) | set(OWN_DECLARATION) <= set(names)


@pytest.fixture
def runner(researcher_key, tmp_path, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    monkeypatch.setenv("LDP_SURVEY_CLIENT_DIR", str(tmp_path / "respondent"))
    return CliRunner()


@pytest.fixture
def api_schemas(client) -> dict:
    """The components of the aggregator's own OpenAPI document."""
    return client.get("/api/openapi.json").json["components"]["schemas"]


def one_document(result) -> dict:
    """The command succeeded and its stdout is one JSON document and nothing else."""
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


ABOVE = ["--above-default-ceilings"]  # helpers.SURVEY's `drove` asks for more than ln 3


def survey_file(tmp_path, **changes) -> str:
    path = tmp_path / "survey.json"
    path.write_text(json.dumps({**SURVEY, **changes}))
    return str(path)


@pytest.mark.parametrize("invitation_only", [False, True])
def test_survey_create(runner, live_server, client, auth, api_schemas, tmp_path,
                       invitation_only):
    path = survey_file(tmp_path, invitation_only=invitation_only)
    document = one_document(runner.invoke(main, ["survey", "create", path, *ABOVE, "--json",
                                                 "--url", live_server]))
    jsonschema.validate(document, api_schemas["Created"])
    reply = client.post("/api/surveys", json={**SURVEY, "invitation_only": invitation_only},
                        headers=auth).json  # the API's own reply to the same request
    assert set(document) == set(reply) | {"form_url"}
    survey_id = document["survey_id"]
    assert document["manifest_url"] == reply["manifest_url"].replace(reply["survey_id"],
                                                                      survey_id)
    assert document["status"] == client.get(f"/api/surveys/{survey_id}/status").json["status"]
    assert document["total_epsilon"] == pytest.approx(reply["total_epsilon"])
    assert document["form_url"] == (None if invitation_only else f"{live_server}/s/{survey_id}")
    text = runner.invoke(main, ["survey", "create", path, *ABOVE, "--url", live_server])
    assert text.exit_code == 0 and len(text.stdout.split()) == 1  # the id alone, for $(...)
    assert client.get(f"/api/surveys/{text.stdout.strip()}/status").status_code == 200


@pytest.mark.parametrize("as_json", [False, True])
def test_a_prompted_researcher_key_stays_off_stdout(researcher_key, live_server, client,
                                                    monkeypatch, tmp_path, as_json):
    """On old main the prompt went to stdout: `ID=$(ldp-survey survey create ...)` held
    "Researcher key: " before the id, and --json output was not JSON."""
    monkeypatch.delenv("LDP_SURVEY_KEY", raising=False)
    monkeypatch.setattr("ldpsurvey.cli.api.can_prompt", lambda: True)  # as at a terminal
    result = CliRunner().invoke(main, ["survey", "create", survey_file(tmp_path), *ABOVE,
                                       "--url", live_server, *(["--json"] if as_json else [])],
                                input=f"{researcher_key}\n")
    assert result.exit_code == 0, result.output
    assert "Researcher key" in result.stderr and "Researcher key" not in result.stdout
    survey_id = (json.loads(result.stdout)["survey_id"] if as_json
                 else result.stdout.strip())
    assert client.get(f"/api/surveys/{survey_id}/status").status_code == 200


def test_survey_tokens(runner, live_server, client, auth, api_schemas):
    survey_id = client.post("/api/surveys", json={**SURVEY, "invitation_only": True},
                            headers=auth).json["survey_id"]
    document = one_document(runner.invoke(main, ["survey", "tokens", survey_id, "--count", "2",
                                                 "--json", "--url", live_server]))
    jsonschema.validate(document, api_schemas["Tokens"])
    reply = client.post(f"/api/surveys/{survey_id}/tokens", json={"count": 1}, headers=auth).json
    assert set(document) == set(reply) == {"survey_id", "tokens", "links"}
    assert document["survey_id"] == survey_id and len(document["tokens"]) == 2
    assert document["links"] == [f"{live_server}/s/{survey_id}#t={token}"
                                 for token in document["tokens"]]
    for token in document["tokens"]:  # real, unspent tokens
        assert client.post(f"/api/surveys/{survey_id}/responses", headers={"Survey-Token": token},
                           json={"answers": {"smoked": 1, "drove": 0, "sleep": 2}}
                           ).status_code == 201
    text = runner.invoke(main, ["survey", "tokens", survey_id, "--count", "2", "--url",
                                live_server])
    assert text.exit_code == 0
    assert [link.split("#t=")[0] for link in text.stdout.split()] == [
        f"{live_server}/s/{survey_id}"] * 2


def test_survey_close(runner, live_server, client, auth, api_schemas):
    first, second = (client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
                     for _ in range(2))
    document = one_document(runner.invoke(main, ["survey", "close", first, "--yes", "--json",
                                                 "--url", live_server]))
    jsonschema.validate(document, api_schemas["Status"])
    reply = client.post(f"/api/surveys/{second}/close", headers=auth).json
    assert set(document) == set(reply) and document == {"survey_id": first, "status": "closed"}
    assert client.get(f"/api/surveys/{first}/status").json["status"] == "closed"


def test_survey_close_asks_on_stderr_with_json(runner, live_server, client, auth, monkeypatch):
    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    monkeypatch.setattr("ldpsurvey.cli.survey.can_prompt", lambda: True)
    result = runner.invoke(main, ["survey", "close", survey_id, "--json", "--url", live_server],
                           input="y\n")
    assert one_document(result) == {"survey_id": survey_id, "status": "closed"}
    assert "for good?" in result.stderr
    text = runner.invoke(main, ["survey", "close", survey_id, "--yes", "--url", live_server])
    assert text.exit_code == 0 and text.stdout == "" and "closed" in text.stderr


def test_survey_share_and_unshare(runner, app, live_server, client, auth, api_schemas):
    from ldpsurvey.aggregator import create_api_key

    create_api_key(app, name="bob")
    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    shared = one_document(runner.invoke(main, ["survey", "share", survey_id, "--with", "bob",
                                               "--json", "--url", live_server]))
    jsonschema.validate(shared, api_schemas["Shares"])
    reply = client.get(f"/api/surveys/{survey_id}/shares", headers=auth).json
    assert shared == reply == {"survey_id": survey_id, "shared_with": ["bob"]}
    unshared = one_document(runner.invoke(main, ["survey", "unshare", survey_id, "--with", "bob",
                                                 "--json", "--url", live_server]))
    jsonschema.validate(unshared, api_schemas["Shares"])
    assert unshared == {"survey_id": survey_id, "shared_with": []}
    text = runner.invoke(main, ["survey", "share", survey_id, "--with", "bob", "--url",
                                live_server])
    assert text.exit_code == 0 and text.stdout == "" and "shared with bob" in text.stderr


@pytest.fixture
def health_id(client, auth):
    return client.post("/api/surveys", json={**read_definition(HEALTH), "release_batch": 1},
                       headers=auth).json["survey_id"]


SENT_FIELDS = {"survey_id", "answers", "accepted", "replayed", "epsilon_charged", "key_id",
               "epsilon_spent", "epsilon_remaining", "max_lifetime_epsilon",
               "aggregator_epsilon_spent"}


def stored_answers(client, auth, survey_id) -> list[dict]:
    release_due(client.application)
    lines = client.get(f"/api/surveys/{survey_id}/export.jsonl", headers=auth).text.splitlines()
    return [json.loads(line)["answers"] for line in lines[1:]]


def test_respond_json_is_what_was_sent_and_no_true_answer(runner, live_server, client, auth,
                                                          api_schemas, health_id):
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                  "--answers", HEALTH_ANSWERS, "--yes", "--json"])
    document = one_document(result)  # the survey, notes and privacy lines went to stderr
    assert set(document) == SENT_FIELDS
    # the answers are exactly the randomized body the server stored, and there is no other
    # place in the document for a true answer to be
    assert stored_answers(client, auth, health_id) == [document["answers"]]
    jsonschema.validate({"answers": document["answers"]}, api_schemas["Answers"])
    jsonschema.validate({k: document[k] for k in ("survey_id", "accepted")},
                        api_schemas["Accepted"])
    total = client.get(f"/api/surveys/{health_id}").json["total_epsilon"]
    assert document["survey_id"] == health_id and document["accepted"] == 1
    assert document["replayed"] is False
    assert document["key_id"] == client.get("/api/key").json["key_id"]
    assert document["epsilon_charged"] == pytest.approx(total)
    assert document["epsilon_spent"] == pytest.approx(total)
    assert document["max_lifetime_epsilon"] == pytest.approx(8 * math.log(3))
    assert document["epsilon_remaining"] == pytest.approx(8 * math.log(3) - total)
    assert document["aggregator_epsilon_spent"] == pytest.approx(total)
    assert "Health and habits" in result.stderr and "Sent." in result.stderr
    # the ledger totals are those `privacy --json` reports: the device's, and the key's
    privacy = json.loads(runner.invoke(main, ["privacy", "--json"]).stdout)
    assert {k: privacy["device"][k] for k in ("epsilon_spent", "epsilon_remaining")} == {
        k: document[k] for k in ("epsilon_spent", "epsilon_remaining")}
    [ledger] = privacy["aggregators"]
    assert (ledger["key_id"], ledger["epsilon_spent"]) == (
        document["key_id"], document["aggregator_epsilon_spent"])
    again = one_document(runner.invoke(main, ["respond", "--url", live_server, "--survey",
                                              health_id, "--yes", "--json"]))
    assert again["answers"] == document["answers"] and again["replayed"] is True
    assert again["epsilon_charged"] == 0 and again["epsilon_spent"] == document["epsilon_spent"]
    assert len(stored_answers(client, auth, health_id)) == 1  # counted once
    text = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id, "--yes"])
    assert text.exit_code == 0 and "Sent." in text.stdout and not text.stdout.startswith("{")


@pytest.mark.parametrize("args, message", [
    (["--answers", HEALTH_ANSWERS], "add --yes"),
    (["--answers", "smoked=yes", "--yes"], "give question 'drank_and_drove' with --answers"),
])
def test_respond_json_never_asks_and_sends_nothing_without_everything(
        runner, live_server, client, auth, health_id, args, message):
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                  "--json", *args], input="yes\nno\nno\n1\n\ny\n")
    assert result.exit_code == 2 and result.stdout == ""
    assert message in result.stderr and "Your answer" not in result.output
    assert stored_answers(client, auth, health_id) == []
    listed = json.loads(runner.invoke(main, ["privacy", "--json"]).stdout)
    assert all(a["surveys"] == [] for a in listed["aggregators"])  # nothing charged


def test_privacy_forget_with_json_prints_the_ledger_after(runner, live_server, client,
                                                          health_id):
    sent = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                "--answers", HEALTH_ANSWERS, "--yes"])
    assert sent.exit_code == 0, sent.output
    kid = client.get("/api/key").json["key_id"]
    result = runner.invoke(main, ["privacy", "--forget", kid, "--json"], input="y\n")
    after = one_document(result)
    total = client.get(f"/api/surveys/{health_id}").json["total_epsilon"]
    assert after["aggregators"] == []  # forgotten, yet still counted for the device:
    assert after["device"]["forgotten"] == pytest.approx(total)
    assert after["device"]["epsilon_spent"] == pytest.approx(total)
    assert "Forget it?" in result.stderr and "Forgotten" in result.stderr


def admin(database_url, tmp_path, *args):
    return CliRunner().invoke(main, ["admin", *args, "--instance", str(tmp_path),
                                     "--database", database_url])


def test_admin_create_key_and_revoke(tmp_path, database_url):
    made = one_document(admin(database_url, tmp_path, "create-key", "--name", "alice", "--json"))
    assert set(made) == {"key", "api_key_id", "name", "role", "new_researcher"}
    assert made["key"].startswith("ldp_res_") and made["name"] == "alice"
    assert made["role"] == "researcher" and made["new_researcher"] is True
    [listed] = json.loads(admin(database_url, tmp_path, "keys", "list", "--json").stdout)["keys"]
    assert {k: made[k] for k in ("api_key_id", "name", "role")} == {
        k: listed[k] for k in ("api_key_id", "name", "role")}  # the names `keys list` uses
    revoked = one_document(admin(database_url, tmp_path, "keys", "revoke", made["api_key_id"],
                                 "--json"))
    assert revoked == {"api_key_id": made["api_key_id"], "status": "revoked"}
    assert json.loads(admin(database_url, tmp_path, "keys", "list", "--json").stdout) == {
        "keys": []}
    other = admin(database_url, tmp_path, "create-key", "--name", "bob")
    assert other.exit_code == 0 and other.stdout.strip().startswith("ldp_res_")
    text = admin(database_url, tmp_path, "keys", "revoke", json.loads(admin(
        database_url, tmp_path, "keys", "list", "--json").stdout)["keys"][0]["api_key_id"])
    assert text.exit_code == 0 and text.stdout == "" and "revoked" in text.stderr


@pytest.mark.parametrize("args", [
    ["survey", "close", "nosuchsurvey", "--yes"],
    ["survey", "tokens", "nosuchsurvey", "--count", "1"],
    ["survey", "share", "nosuchsurvey", "--with", "bob"],
    ["survey", "unshare", "nosuchsurvey", "--with", "bob"],
    ["respond", "--survey", "nosuchsurvey", "--yes"],
])
def test_errors_with_json_are_one_line_on_stderr_and_nothing_on_stdout(runner, live_server,
                                                                       args):
    result = runner.invoke(main, [*args, "--json", "--url", live_server])
    assert result.exit_code == 1 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("ldp-survey: error: ")


def test_admin_errors_with_json_are_one_line_on_stderr(tmp_path, database_url):
    result = admin(database_url, tmp_path, "keys", "revoke", "nosuchkey", "--json")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("ldp-survey: error: ") and "no API key" in result.stderr
