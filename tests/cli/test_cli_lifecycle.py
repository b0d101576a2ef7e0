"""The survey lifecycle from the command line against a live aggregator: create --draft, edit,
publish, copy, archive, unarchive and delete, with --json and each refusal in one line."""

import json

import pytest
from click.testing import CliRunner
from openapi_schema_validator import OAS30Validator

from ldpsurvey.cli import main

from helpers import SURVEY

ABOVE = ["--above-default-ceilings"]  # helpers.SURVEY's `drove` asks for more than ln 3


@pytest.fixture
def runner(researcher_key, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    return CliRunner()


@pytest.fixture
def schemas(client) -> dict:
    return client.get("/api/openapi.json").json["components"]["schemas"]


def survey_file(tmp_path, name="survey.json", **changes) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({**SURVEY, **changes}))
    return str(path)


def run(runner, live_server, *args, ok=True):
    result = runner.invoke(main, [*args, "--url", live_server])
    if ok:
        assert result.exit_code == 0, result.output
    return result


def listed(client, auth, query="") -> dict:
    return {s["survey_id"]: s for s in client.get(f"/api/surveys{query}",
                                                  headers=auth).json["surveys"]}


def test_a_draft_is_created_edited_and_published(runner, live_server, client, auth, schemas,
                                                 tmp_path):
    path = survey_file(tmp_path)
    made = run(runner, live_server, "survey", "create", path, "--draft", *ABOVE)
    survey_id = made.stdout.strip()
    assert f"ldp-survey survey publish {survey_id}" in made.stderr
    assert f"survey edit {survey_id} {path}" in made.stderr
    assert listed(client, auth)[survey_id]["status"] == "draft"
    assert client.get(f"/api/surveys/{survey_id}").status_code == 404
    as_json = json.loads(run(runner, live_server, "survey", "create", path, "--draft", *ABOVE,
                             "--json").stdout)
    OAS30Validator(schemas["Created"]).validate(as_json)
    assert as_json["status"] == "draft" and as_json["form_url"] is None
    refused = run(runner, live_server, "survey", "create", path, "--draft", ok=False)
    assert refused.exit_code == 1 and "--above-default-ceilings" in refused.stderr

    edited = survey_file(tmp_path, "edited.json", title="Edited")
    result = run(runner, live_server, "survey", "edit", survey_id, edited, *ABOVE, "--json")
    assert json.loads(result.stdout)["status"] == "draft" and "now holds" in result.stderr
    assert listed(client, auth)[survey_id]["title"] == "Edited"
    assert run(runner, live_server, "survey", "edit", survey_id, edited,
               ok=False).exit_code == 1  # the ceilings guard, as create

    published = run(runner, live_server, "survey", "publish", survey_id)
    assert published.stdout.strip() == survey_id
    assert f"respondents answer at {live_server}/s/{survey_id}" in published.stderr
    assert client.get(f"/api/surveys/{survey_id}/status").json["status"] == "open"
    twice = run(runner, live_server, "survey", "publish", survey_id, ok=False)
    assert twice.exit_code == 1 and twice.stderr.count("\n") == 1
    assert "is published" in twice.stderr and f"survey copy {survey_id}" in twice.stderr
    changed = run(runner, live_server, "survey", "edit", survey_id, edited, *ABOVE, ok=False)
    assert changed.exit_code == 1 and f"survey copy {survey_id}" in changed.stderr


def test_publish_json_and_an_invitation_only_draft(runner, live_server, client, schemas,
                                                   tmp_path):
    path = survey_file(tmp_path, invitation_only=True)
    survey_id = run(runner, live_server, "survey", "create", path, "--draft",
                    *ABOVE).stdout.strip()
    document = json.loads(run(runner, live_server, "survey", "publish", survey_id,
                              "--json").stdout)
    OAS30Validator(schemas["Created"]).validate(document)
    assert document["status"] == "open" and document["form_url"] is None
    text = run(runner, live_server, "survey", "publish", survey_id, ok=False)
    assert "already" not in text.stdout and text.stdout == ""
    other = run(runner, live_server, "survey", "create", path, "--draft", *ABOVE).stdout.strip()
    announced = run(runner, live_server, "survey", "publish", other)
    assert f"ldp-survey survey tokens {other} --count N" in announced.stderr
    assert "/s/" not in announced.stderr


def test_copy_makes_a_new_draft(runner, live_server, client, auth, schemas):
    original = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    copied = run(runner, live_server, "survey", "copy", original)
    new_id = copied.stdout.strip()
    assert new_id != original and listed(client, auth)[new_id]["status"] == "draft"
    assert f"survey publish {new_id}" in copied.stderr
    document = json.loads(run(runner, live_server, "survey", "copy", original, "--json").stdout)
    OAS30Validator(schemas["Created"]).validate(document)
    assert document["status"] == "draft" and document["form_url"] is None
    assert run(runner, live_server, "survey", "copy", "nope", ok=False).exit_code == 1


def test_archive_and_unarchive(runner, live_server, client, auth, schemas):
    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    still_open = run(runner, live_server, "survey", "archive", survey_id, ok=False)
    assert still_open.exit_code == 1 and "close it first" in still_open.stderr
    client.post(f"/api/surveys/{survey_id}/close", headers=auth)
    document = json.loads(run(runner, live_server, "survey", "archive", survey_id,
                              "--json").stdout)
    OAS30Validator(schemas["Archived"]).validate(document)
    assert document == {"survey_id": survey_id, "status": "closed", "archived": True}
    assert survey_id not in run(runner, live_server, "survey", "list").stdout
    shown = run(runner, live_server, "survey", "list", "--archived").stdout
    assert survey_id in shown and "closed (archived)" in shown
    assert json.loads(run(runner, live_server, "survey", "list", "--archived", "--json")
                      .stdout)["surveys"][0]["archived"] is True
    back = run(runner, live_server, "survey", "unarchive", survey_id)
    assert back.stdout == "" and "listed again" in back.stderr
    assert survey_id in run(runner, live_server, "survey", "list").stdout
    text = run(runner, live_server, "survey", "archive", survey_id)
    assert text.stdout == "" and "--archived" in text.stderr


def test_delete_asks_for_the_id_again(runner, live_server, client, auth, monkeypatch):
    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    client.post(f"/api/surveys/{survey_id}/close", headers=auth)
    no_terminal = run(runner, live_server, "survey", "delete", survey_id, ok=False)
    assert no_terminal.exit_code == 2 and "--yes" in no_terminal.stderr
    monkeypatch.setattr("ldpsurvey.cli.survey_lifecycle.can_prompt", lambda: True)
    wrong = runner.invoke(main, ["survey", "delete", survey_id, "--url", live_server],
                          input="something else\n")
    assert wrong.exit_code == 1 and "nothing was deleted" in wrong.stderr
    assert "Type its id" in wrong.stderr and wrong.stdout == ""
    assert client.get(f"/api/surveys/{survey_id}/status").status_code == 200
    typed = runner.invoke(main, ["survey", "delete", survey_id, "--url", live_server, "--json"],
                          input=f"{survey_id}\n")
    assert typed.exit_code == 0, typed.output
    assert json.loads(typed.stdout) == {"survey_id": survey_id, "status": "deleted"}
    assert client.get(f"/api/surveys/{survey_id}/status").status_code == 404


def test_delete_an_open_survey_only_with_force(runner, live_server, client, auth):
    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    refused = run(runner, live_server, "survey", "delete", survey_id, "--yes", ok=False)
    assert refused.exit_code == 1 and "--force" in refused.stderr
    assert client.get(f"/api/surveys/{survey_id}/status").status_code == 200
    forced = run(runner, live_server, "survey", "delete", survey_id, "--yes", "--force")
    assert forced.stdout == "" and "deleted" in forced.stderr
    assert client.get(f"/api/surveys/{survey_id}/status").status_code == 404
    draft = client.post("/api/surveys?draft=true", json=SURVEY, headers=auth).json["survey_id"]
    run(runner, live_server, "survey", "delete", draft, "--yes")  # a draft needs no force
    assert draft not in listed(client, auth)
