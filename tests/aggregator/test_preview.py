"""Previews: `survey preview FILE` and a draft's preview on the dashboard serve the real form
(template and in-page randomizer), marked as a preview, storing and sending nothing."""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from importlib import resources

import pytest
from click.testing import CliRunner

from ldpsurvey.aggregator.web.preview import preview_app
from ldpsurvey.cli import main
from ldpsurvey.shared import SurveyError, load_definition, parse_manifest

from helpers import SURVEY, release_due

STARTER = resources.files("ldpsurvey.shared") / "examples" / "starter.toml"


def starter_copy(tmp_path):
    path = tmp_path / "survey.toml"
    path.write_text(STARTER.read_text())
    return path


def file_reader(path):
    def read():
        try:
            return load_definition(path)
        except OSError as exc:
            raise SurveyError(str(exc)) from None

    return read


def test_the_preview_app_serves_the_survey_file_as_respondents_see_it(tmp_path):
    path = starter_copy(tmp_path)
    app = preview_app(file_reader(path))
    assert "ldp_database" not in app.extensions  # no database to store anything in
    client = app.test_client()
    page = client.get("/")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and 'data-preview="true"' in html
    assert 'data-manifest-url="/preview/manifest.json"' in html and "Sleep and exercise" in html
    assert "nothing you enter here is stored or sent" in html
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    survey = parse_manifest(client.get("/preview/manifest.json").data)
    written = load_definition(path)
    assert [q.as_dict() for q in survey.questions] == [q.as_dict() for q in written.questions]
    assert (survey.survey_id, survey.key_id, survey.origin) == ("preview", "preview",
                                                                "http://localhost")
    assert client.get("/web/form.js").status_code == 200
    assert client.get("/static/style.css").status_code == 200
    assert client.post("/api/surveys/preview/responses", json={}).status_code in (404, 405)
    # read again at each load: an edit shows at the next reload
    path.write_text(path.read_text().replace("Sleep and exercise", "Edited title"))
    assert "Edited title" in client.get("/").get_data(as_text=True)
    path.write_text('title = "Broken"\n[[questions]]\nid = "x"\n')
    broken = client.get("/")
    assert broken.status_code == 422 and "missing field" in broken.get_data(as_text=True)
    path.unlink()
    assert client.get("/preview/manifest.json").status_code == 422


def test_survey_preview_prints_its_address_and_serves_until_stopped(tmp_path):
    path = starter_copy(tmp_path)
    command = shutil.which("ldp-survey", path=os.path.dirname(sys.executable))
    process = subprocess.Popen([command, "survey", "preview", str(path), "--port", "0",
                                "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        lines = []
        while not lines or lines[-1] != "}\n":
            lines.append(process.stdout.readline())
        document = json.loads("".join(lines))
        assert document["file"] == str(path)
        url = document["url"]
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url)
        import urllib.request

        with urllib.request.urlopen(url, timeout=10) as reply:
            assert 'data-preview="true"' in reply.read().decode()
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert "nothing is stored or sent" in process.stderr.read()


def test_survey_preview_of_a_file_that_does_not_read_is_one_line(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('title = "x"\n')
    result = CliRunner().invoke(main, ["survey", "preview", str(path), "--port", "0"])
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "missing field 'questions'" in result.stderr and result.stdout == ""


def dashboard_session(client, key) -> None:
    from test_owner_fill import dashboard_session as log_in

    log_in(client, key)


def test_a_drafts_preview_on_the_dashboard(app, client, auth, researcher_key):
    draft = client.post("/api/surveys?draft=true", json=SURVEY, headers=auth).json["survey_id"]
    published = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    page_url = f"/researcher/surveys/{draft}/preview"
    manifest_url = f"{page_url}/manifest.json"
    browser = app.test_client()
    assert browser.get(page_url).headers["Location"] == "/researcher"  # log in first
    assert browser.get(manifest_url).status_code == 401
    dashboard_session(browser, researcher_key)
    dashboard = browser.get("/researcher").get_data(as_text=True)
    assert f'href="{page_url}"' in dashboard
    assert f"/researcher/surveys/{published}/preview" not in dashboard  # drafts only
    assert f'href="/s/{draft}/results"' not in dashboard
    html = browser.get(page_url).get_data(as_text=True)
    assert 'data-preview="true"' in html and f'data-manifest-url="{manifest_url}"' in html
    survey = parse_manifest(browser.get(manifest_url).data)
    assert survey.survey_id == draft and survey.origin == "http://localhost"
    assert survey.key_id == app.extensions["ldp_signing_key"].key_id
    assert browser.get(f"/researcher/surveys/{published}/preview").status_code == 409
    from ldpsurvey.aggregator import create_api_key

    stranger = app.test_client()
    dashboard_session(stranger, create_api_key(app, name="erin").key)
    assert stranger.get(page_url).status_code == 404
    assert stranger.get(manifest_url).status_code == 404
    app.config["EPSILON_CAP"] = 0.5  # lowered since: the preview says publishing would fail
    refused = browser.get(page_url)
    assert refused.status_code == 422 and "cap" in refused.get_data(as_text=True)


# --- in Chromium: the randomizer runs, nothing is stored or sent ------------------------------

@pytest.fixture
def database_url(tmp_path):
    """Browser tests need one engine; test_lifecycle.py covers both."""
    return f"sqlite:///{tmp_path / 'preview.sqlite3'}"


@pytest.fixture
def preview_server(tmp_path):
    """`survey preview`'s app for the starter survey, served over HTTP in a thread."""
    from ldpsurvey.aggregator.web.serving import make_server

    server = make_server(preview_app(file_reader(starter_copy(tmp_path))), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01},
                              daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()
    server.server_close()


def answer_and_send(page, answers: dict) -> dict:
    """Answer, review, randomize and press Send in the preview; the body it showed."""
    from test_browser import answer_all, randomize

    page.wait_for_selector("#questions:not([hidden])")
    answer_all(page, answers)
    randomize(page)
    payload = json.loads(page.locator("#payload").text_content())
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    return payload


@pytest.mark.parametrize("width", [390, 1280])
def test_the_file_preview_randomizes_in_the_page_and_sends_nothing(browser,
                                                                    preview_server, width):
    from test_browser import axe_violations, record

    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    requests = record(page)
    page.goto(f"{preview_server}/")
    page.wait_for_selector("#questions:not([hidden])")
    assert page.locator("#preview-note").is_visible()
    found = {"questions": axe_violations(page)}
    payload = answer_and_send(page, {"exercised": "Yes", "sleep": "6 to 8"})
    found["thanks"] = axe_violations(page)
    assert found == {state: [] for state in found}
    assert set(payload["answers"]) == {"exercised", "sleep"}
    assert payload["answers"]["exercised"] in (0, 1) and payload["answers"]["sleep"] in (0, 1, 2)
    assert "Preview" in page.locator("#thanks").inner_text()
    assert {r.method for r in requests} == {"GET"}
    assert not [r.url for r in requests if "/api/" in r.url]
    assert page.evaluate("localStorage.length") == 0  # nothing kept on this site
    page.reload()  # nothing remembered: the questions again, not the answers sent
    page.wait_for_selector("#questions:not([hidden])")
    context.close()


def test_the_file_preview_refuses_what_respondents_would(browser,
                                                          preview_server, tmp_path):
    """A survey above the default ceilings is refused in the preview, as in the real form."""
    from test_browser import protection

    path = tmp_path / "survey.toml"
    path.write_text(path.read_text().replace("epsilon = 1.0", "epsilon = 1.5", 1))
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{preview_server}/")
    page.wait_for_selector("#refused:not([hidden])")
    assert "could reveal too much about you" in page.locator("#refused-text").inner_text()
    assert "above this page's limit" in protection(page).locator("#refused-detail").inner_text()
    context.close()


def test_a_drafts_preview_from_the_dashboard_sends_and_keeps_nothing(browser,
                                                                      live_server,
                                                                      client, auth,
                                                                      researcher_key):
    from test_browser import HEALTH, TRUE_ANSWERS, axe_violations, log_in, record

    draft = client.post("/api/surveys?draft=true", json={**HEALTH, "invitation_only": True},
                        headers=auth).json["survey_id"]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    log_in(page, live_server, researcher_key)
    page.wait_for_selector("section.survey-card")
    assert axe_violations(page) == []
    requests = record(page)
    page.get_by_role("link", name="Preview the form").click()
    payload = answer_and_send(page, TRUE_ANSWERS)  # invitation only: the invited form
    assert set(payload["answers"]) == set(TRUE_ANSWERS)
    assert axe_violations(page) == []
    assert {r.method for r in requests} == {"GET"}
    assert page.evaluate("localStorage.length") == 0  # the real forms' ledger is untouched
    assert release_due(client.application) == 0
    assert client.get(f"/api/surveys/{draft}/status").status_code == 404  # still a draft
    context.close()
