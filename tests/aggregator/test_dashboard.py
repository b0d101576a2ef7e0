"""The researcher dashboard (issues 25.4 and 26.2): upload a survey file (checked as `survey
check` checks it, errors next to the field), preview, publish, copy the link, a QR code (SVG,
PNG), share, close, archive, download CSV, counts that refresh on their own; the same QR code
from the API and the CLI."""

import xml.etree.ElementTree as ElementTree
from importlib import resources
from urllib.parse import urlparse

import pytest
from click.testing import CliRunner
from test_browser import (  # noqa: F401 (database_url: the browser tests' SQLite fixture)
    HEALTH,
    axe_violations,
    database_url,
    log_in,
    screenshot,
)

from ldpsurvey.aggregator import create_api_key
from ldpsurvey.aggregator.web.qr import qr_code
from ldpsurvey.cli import main
from ldpsurvey.shared import parse_manifest

from helpers import SURVEY, release_due

# The starter file `survey init` writes, released a response at a time for this test.
STARTER = (resources.files("ldpsurvey.shared") / "examples" / "starter.toml").read_text().replace(
    "release_batch = 100", "release_batch = 1", 1)
TEN_AT_ONE = "title = \"Ten\"\n" + "".join(
    f'[[questions]]\nid = "q{i}"\ntext = "Question {i}?"\ntype = "yes_no"\nepsilon = 1.0\n'
    for i in range(10))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def upload(page, name: str, text: str, above: bool = False):
    """Choose a file of `name` holding `text` and upload it; the page after the POST."""
    page.set_input_files("#survey-file", files=[{"name": name, "mimeType": "text/plain",
                                                 "buffer": text.encode()}])
    if above:
        page.check("input[name=above_default_ceilings]")
    with page.expect_navigation():
        page.get_by_role("button", name="Upload as a draft").click()


def card(page, title: str):
    return page.locator("section.survey-card", has=page.get_by_role("heading", name=title))


def in_view(page, selector: str) -> bool:
    return page.evaluate("""(selector) => {
        const box = document.querySelector(selector).getBoundingClientRect();
        return box.height > 0 && box.top >= 0 && box.bottom <= innerHeight;
    }""", selector)


@pytest.mark.parametrize("problem, text, said", [
    ("unreadable", "title = \n", "survey.toml:"),
    ("invalid", 'title = "T"\n[[questions]]\nid = "q"\ntext = "Q?"\ntype = "yes_no"\n'
                "alpha = 1.5\n", "question 'q'.alpha"),
    ("refused by default ceilings", TEN_AT_ONE, "at most 0.439"),
])
def test_an_upload_error_is_shown_at_the_field_on_a_phone(browser, live_server, client, auth,
                                                         researcher_key, problem, text, said):
    """At 390 px: the problem is next to the file field, tied to it (aria-describedby,
    aria-invalid), the field has focus and the message is in view; nothing is kept."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    log_in(page, live_server, researcher_key)
    page.wait_for_selector("#survey-file")
    assert page.locator("#survey-file").get_attribute("aria-invalid") is None
    upload(page, "survey.toml", text)
    error = page.locator("#survey-file-error")
    assert said in error.inner_text()
    field = page.locator("#survey-file")
    assert field.get_attribute("aria-invalid") == "true"
    assert "survey-file-error" in field.get_attribute("aria-describedby").split()
    assert page.evaluate("document.activeElement.id") == "survey-file"
    assert in_view(page, "#survey-file-error")
    assert axe_violations(page) == []
    screenshot(page, f"dashboard-upload-{problem.replace(' ', '-')}")
    assert client.get("/api/surveys", headers=auth).json["surveys"] == []
    context.close()


def test_a_survey_above_the_default_ceilings_is_kept_only_when_asked(browser, live_server,
                                                                    client, auth,
                                                                    researcher_key):
    page = browser.new_page()
    log_in(page, live_server, researcher_key)
    upload(page, "ten.toml", TEN_AT_ONE, above=True)
    assert page.locator("#survey-file-error").count() == 0
    [listed] = client.get("/api/surveys", headers=auth).json["surveys"]
    assert listed["status"] == "draft" and listed["title"] == "Ten"
    page.close()


@pytest.mark.parametrize("width", [390, 1280])
def test_a_survey_from_upload_to_archive_on_the_dashboard(browser, live_server, client, auth,
                                                         researcher_key, app, width):
    from playwright.sync_api import expect

    """Upload the starter file, preview, publish, copy the link, its QR code, a response
    counted without a reload, share, close, archive: every step from the dashboard, at 0
    axe-core violations."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = context.new_page()
    page.clock.install()
    log_in(page, live_server, researcher_key)
    upload(page, "starter.json" if width == 390 else "starter.toml",
           STARTER if width == 1280 else _starter_json())
    found = {"draft": axe_violations(page)}
    assert "as a draft" in page.locator("#dashboard-status").inner_text()
    [listed] = client.get("/api/surveys", headers=auth).json["surveys"]
    survey_id, title = listed["survey_id"], listed["title"]
    draft = card(page, title)
    assert draft.locator(".status").inner_text() == "Draft"
    assert draft.get_by_role("link", name=f"Preview the form of {title}").is_visible()

    with page.expect_navigation():
        draft.get_by_role("button", name=f"Publish {title}").click()
    found["published"] = axe_violations(page)
    published = card(page, title)
    assert published.locator(".status").inner_text() == "Open"
    link = f"{live_server}/s/{survey_id}"
    assert parse_manifest(client.get(f"/api/surveys/{survey_id}").data).origin == live_server
    assert published.locator(".respondent-link").inner_text() == link
    published.get_by_role("button", name=f"Copy the link of {title}").click()
    assert page.evaluate("navigator.clipboard.readText()") == link
    assert page.locator("#dashboard-status").inner_text() == "Link copied."
    image = published.locator("figure.qr img")
    assert page.evaluate("(img) => img.complete && img.naturalWidth > 0",
                         image.element_handle())
    svg = page.request.get(f"{live_server}/researcher/surveys/{survey_id}/qr.svg")
    assert svg.body() == qr_code(link, "svg")

    answered = client.post(f"/api/surveys/{survey_id}/responses",
                           json={"answers": {"exercised": 1, "sleep": 0}})
    assert answered.status_code == 201, answered.json
    assert release_due(app) == 1
    count = published.locator(f'[data-count="{survey_id}"]')
    assert count.inner_text() == "0"
    page.clock.run_for(15_000)  # the dashboard's refresh interval; no reload
    expect(count).to_have_text("1")

    create_api_key(app, name="bob")
    published.get_by_label("Share with researcher").fill("bob")
    with page.expect_navigation():
        published.get_by_role("button", name=f"Share {title}").click()
    assert "shared with bob" in page.locator("#dashboard-status").inner_text()
    assert client.get(f"/api/surveys/{survey_id}/shares", headers=auth).json[
        "shared_with"] == ["bob"]

    card(page, title).locator("summary", has_text="Close for good").click()  # asks, only
    assert card(page, title).locator(".status").inner_text() == "Open"
    found["asked to close"] = axe_violations(page)
    with page.expect_navigation():
        card(page, title).get_by_role("button", name=f"Yes, close {title} for good").click()
    found["closed"] = axe_violations(page)
    assert card(page, title).locator(".status").inner_text() == "Closed"
    csv = page.request.get(f"{live_server}/api/surveys/{survey_id}/export.csv",
                           headers=auth)
    assert csv.ok and csv.text().startswith("exercised,sleep")
    with page.expect_navigation():
        card(page, title).get_by_role("button", name=f"Archive {title}").click()
    assert card(page, title).count() == 0
    [listed] = client.get("/api/surveys?archived=true", headers=auth).json["surveys"]
    assert listed["archived"] is True
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    assert found == {state: [] for state in found}
    context.close()


def _starter_json() -> str:
    import json
    import tomllib

    return json.dumps(tomllib.loads(STARTER))


def test_dashboard_actions_need_the_form_token_and_a_session(client, auth, researcher_key):
    """Without the session's CSRF token a dashboard action is refused (400) and changes
    nothing; without a session it goes back to the login form; an unknown action is 404."""
    draft = client.post("/api/surveys?draft=true", json=SURVEY, headers=auth).json["survey_id"]
    anonymous = client.post(f"/researcher/surveys/{draft}/publish", data={"csrf": "x"})
    assert anonymous.status_code == 400  # no session, so no token to match
    client.get("/researcher")
    with client.session_transaction() as session:
        token = session["csrf"]
    assert client.post("/researcher/login", data={"csrf": token, "key": researcher_key}
                       ).status_code == 302
    client.get("/researcher")  # a new session, a new token
    with client.session_transaction() as session:
        token = session["csrf"]
    refused = client.post(f"/researcher/surveys/{draft}/publish", data={"csrf": "wrong"})
    assert refused.status_code == 400
    assert client.get(f"/api/surveys/{draft}/status").status_code == 404  # still a draft
    assert client.post(f"/researcher/surveys/{draft}/explode",
                       data={"csrf": token}).status_code == 404
    done = client.post(f"/researcher/surveys/{draft}/publish", data={"csrf": token})
    assert done.status_code == 303 and urlparse(done.location).path == "/researcher"
    assert client.get(f"/api/surveys/{draft}/status").json["status"] == "open"
    twice = client.post(f"/researcher/surveys/{draft}/publish", data={"csrf": token})
    assert twice.status_code == 409 and b"published" in twice.data
    counts = client.get("/researcher/counts").json
    assert counts == {draft: {"status": "open", "n": 0}}  # never a pending count


def test_close_for_good_asks_first_without_a_script(browser, live_server, client, auth,
                                                   researcher_key):
    """As the CLI asks before closing (--yes skips it): one click on "Close for good" only
    opens the question, in HTML alone (scripts off), and closes nothing; the confirmed button
    closes it. The server closes only a request carrying the confirmation."""
    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    title = SURVEY["title"]
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    log_in(page, live_server, researcher_key)
    ask = card(page, title).locator("summary", has_text="Close for good")
    confirm = card(page, title).get_by_role("button", name=f"Yes, close {title} for good")
    assert ask.is_visible() and not confirm.is_visible()
    ask.click()
    assert confirm.is_visible()
    assert client.get(f"/api/surveys/{survey_id}/status").json["status"] == "open"
    with page.expect_navigation():
        confirm.click()
    assert client.get(f"/api/surveys/{survey_id}/status").json["status"] == "closed"
    assert "Closed: it takes no more answers." in page.locator("#dashboard-status").inner_text()
    context.close()

    other = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    client.get("/researcher")
    with client.session_transaction() as session:
        token = session["csrf"]
    client.post("/researcher/login", data={"csrf": token, "key": researcher_key})
    client.get("/researcher")
    with client.session_transaction() as session:
        token = session["csrf"]
    for confirmation in ({}, {"confirm": "no"}):
        unasked = client.post(f"/researcher/surveys/{other}/close",
                              data={"csrf": token, **confirmation})
        assert unasked.status_code == 303
        assert client.get(f"/api/surveys/{other}/status").json["status"] == "open"
    assert b"not closed" in client.get("/researcher").data
    asked = client.post(f"/researcher/surveys/{other}/close",
                        data={"csrf": token, "confirm": "yes"})
    assert asked.status_code == 303
    assert client.get(f"/api/surveys/{other}/status").json["status"] == "closed"


def test_the_qr_code_from_the_api_holds_the_signed_respondent_link(client, auth, app,
                                                                   researcher_key):
    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    origin = parse_manifest(client.get(f"/api/surveys/{survey_id}").data).origin
    link = f"{origin}/s/{survey_id}"
    svg = client.get(f"/api/surveys/{survey_id}/qr.svg", headers=auth)
    assert svg.status_code == 200 and svg.mimetype == "image/svg+xml"
    assert svg.data == qr_code(link, "svg")
    root = ElementTree.fromstring(svg.data)
    assert root.tag.endswith("svg") and root.get("class") == "qr"
    png = client.get(f"/api/surveys/{survey_id}/qr.png", headers=auth)
    assert png.mimetype == "image/png" and png.data.startswith(PNG_SIGNATURE)
    assert png.data == qr_code(link, "png")
    assert qr_code(link + "x", "png") != png.data  # the image depends on the link

    assert client.get(f"/api/surveys/{survey_id}/qr.svg").status_code == 401
    other = create_api_key(app, name="carol").key
    assert client.get(f"/api/surveys/{survey_id}/qr.svg",
                      headers={"Authorization": f"Bearer {other}"}).status_code == 404
    invited = client.post("/api/surveys", json={**SURVEY, "invitation_only": True},
                          headers=auth).json["survey_id"]
    refused = client.get(f"/api/surveys/{invited}/qr.svg", headers=auth)
    assert refused.status_code == 400 and "invitation only" in refused.json["detail"]
    draft = client.post("/api/surveys?draft=true", json=SURVEY, headers=auth).json["survey_id"]
    assert client.get(f"/api/surveys/{draft}/qr.png", headers=auth).status_code == 409
    assert client.get(f"/api/surveys/{survey_id}/qr.gif", headers=auth).status_code == 404


def test_survey_qr_writes_the_file_the_api_serves(live_server, client, auth, researcher_key,
                                                  tmp_path, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    survey_id = client.post("/api/surveys", json={**HEALTH, "title": "Flyer"},
                            headers=auth).json["survey_id"]
    runner = CliRunner()
    for kind in ("svg", "png"):
        out = tmp_path / f"flyer.{kind}"
        made = runner.invoke(main, ["survey", "qr", survey_id, "-o", str(out),
                                    "--url", live_server])
        assert made.exit_code == 0, made.output
        assert out.read_bytes() == client.get(f"/api/surveys/{survey_id}/qr.{kind}",
                                              headers=auth).data
    wrong = runner.invoke(main, ["survey", "qr", survey_id, "-o", str(tmp_path / "flyer.gif"),
                                 "--url", live_server])
    assert wrong.exit_code == 2 and "name a .svg or .png file" in wrong.output
    assert not (tmp_path / "flyer.gif").exists()
