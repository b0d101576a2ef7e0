"""A form hosted elsewhere (issue 42 item 3): `ldp-survey survey form ID --output DIR` writes
a copy of a published survey's form that a static host serves at one of the survey's signed
form_origins (manifest /9); respondents there run code the operator cannot change, and the
aggregator takes their answers cross-origin (CORS for the listed origins only).

Two origins on this machine: the aggregator at http://127.0.0.1:A (the survey's signed origin),
the copy on a plain static server at http://localhost:B (listed), or at http://localhost:C (not
listed). Attacks: the copy at an unlisted origin, a post naming an unlisted Origin, a changed
byte in the copy, a copy whose manifest differs from the signed one."""

import base64
import functools
import html
import json
import os
import random
import shutil
import socket
import subprocess
import time
import urllib.request
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from ldpsurvey.aggregator.web import cors, hosted_form
from ldpsurvey.cli import main
from ldpsurvey.shared import parse_manifest, read_definition
from ldpsurvey.shared.survey.form_integrity import release_digests, sri

from form_page import axe_checker, protection, randomize
from helpers import SURVEY, doc_blocks, released_n, require, serving

# Within the form's default ceilings, as the attack tests' survey.
FORM_SURVEY = {**SURVEY, "questions": [q for q in SURVEY["questions"] if q["id"] != "drove"]}
EXAMPLES = Path(__file__).resolve().parents[2] / "shared" / "examples"


@pytest.fixture(params=["sqlite"])
def database_url(request, tmp_path):
    """These tests are about origins, not the database: SQLite only."""
    return f"sqlite:///{tmp_path / 'test.sqlite3'}"


class Quiet(SimpleHTTPRequestHandler):
    """A static host: the files of one folder, nothing else, no access log."""

    def log_message(self, *args):
        pass


def static_host(folder: Path):
    """A static web server for `folder` on a loopback port (its URL at 127.0.0.1)."""
    folder.mkdir(exist_ok=True)
    return serving(functools.partial(Quiet, directory=str(folder)))


def at_localhost(url: str) -> str:
    """The same server under the name localhost: another origin than 127.0.0.1's."""
    return url.replace("127.0.0.1", "localhost")


def write_copy(live_server: str, survey_id: str, folder: Path, *options: str,
               device: Path | None = None):
    env = {"LDP_SURVEY_CLIENT_DIR": str(device or folder.parent / "device")}
    return CliRunner(env=env).invoke(main, ["survey", "form", survey_id, "--output",
                                            str(folder), "--url", live_server, *options])


@pytest.fixture
def hosted(live_server, client, auth, tmp_path):
    """A survey listing a static host's origin in form_origins, and its copy there, the site's
    root the folder written: (survey id, the copy's URL, the copy's folder in it, s/<id>)."""
    folder = tmp_path / "site"
    with static_host(folder) as url:
        origin = at_localhost(url)
        definition = {**FORM_SURVEY, "form_origins": [origin]}
        survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
        result = write_copy(live_server, survey_id, folder)
        assert result.exit_code == 0, result.output
        yield survey_id, f"{origin}/s/{survey_id}/", folder / "s" / survey_id


def answer(page):
    page.wait_for_selector("#questions:not([hidden])")
    page.click("#q-smoked-1")
    page.click("#q-sleep-1")
    randomize(page)


# --- the copy -----------------------------------------------------------------------------

def test_the_copy_holds_the_signed_manifest_and_the_signed_code(hosted, client):
    survey_id, _, folder = hosted
    raw = (folder / "manifest.json").read_bytes()
    assert raw == client.get(f"/api/surveys/{survey_id}").data
    assert (folder / "manifest.sig").read_bytes() == client.get(
        f"/api/surveys/{survey_id}/manifest.sig").data
    manifest = json.loads(raw)
    assert manifest["format"] == "ldp-survey-manifest/9"
    assert sorted(p.name for p in (folder / "assets").iterdir()) == sorted(manifest["form"])
    for name, digest in manifest["form"].items():
        assert sri((folder / "assets" / name).read_bytes()) == digest
    page = html.unescape((folder / "index.html").read_text())
    assert 'data-manifest-url="manifest.json"' in page
    assert f'connect-src \'self\' {manifest["origin"]}' in page  # the meta CSP
    assert "frame-ancestors" not in page  # a meta element cannot set it: the host's header
    assert json.loads((folder / "key.json").read_text()) == client.get("/api/key").json


def test_a_respondent_at_the_listed_origin_answers_through_the_copy(
        hosted, browser, live_server, client, auth):
    survey_id, url, _ = hosted
    page = browser.new_context(viewport={"width": 420, "height": 900}).new_page()
    requests = []
    page.on("request", lambda request: requests.append(request))
    found, check = axe_checker(page)
    page.goto(url)
    answer(page)
    check("confirm")
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    check("thanks")
    assert found == {state: [] for state in found}
    assert released_n(client, auth, survey_id) == 1
    # Every file came from the copy's host; the aggregator got the status and the post only
    # (and the post's preflight, which the browser sends without showing it to the page).
    aggregator = urlsplit(live_server).netloc
    to_aggregator = sorted((r.method, urlsplit(r.url).path) for r in requests
                           if urlsplit(r.url).netloc == aggregator)
    assert to_aggregator == [("GET", f"/api/surveys/{survey_id}/status"),
                             ("POST", f"/api/surveys/{survey_id}/responses")]
    post = next(r for r in requests if r.method == "POST")
    assert len(post.post_data_buffer) % 256 == 0 and post.post_data_buffer.endswith(b" ")  # padded
    sent = post.all_headers()
    assert not sent.get("referer") and "cookie" not in sent
    assert sent["origin"] == urlsplit(url)._replace(path="").geturl()
    # The browser's ledger lives on the copy's origin: a reload shows it sent, with no Send.
    page.reload()
    page.wait_for_selector("#confirm:not([hidden])")
    assert page.locator("#send").is_hidden()
    total = parse_manifest(client.get(f"/api/surveys/{survey_id}").data).total_epsilon
    assert f"epsilon {total:.3f}" in protection(page).inner_text()
    page.context.close()


def test_the_copy_at_an_unlisted_origin_refuses_and_so_does_the_aggregator(
        hosted, browser, client, auth, live_server):
    survey_id, _, folder = hosted
    with serving(functools.partial(Quiet, directory=str(folder.parents[1]))) as other:
        page = browser.new_context().new_page()
        page.goto(f"{at_localhost(other)}/s/{survey_id}/")
        page.wait_for_selector("#refused:not([hidden])")
        assert "Please answer this survey at" in page.locator("#refused-text").inner_text()
        page.context.close()
        # A post that names the unlisted origin, as a page there would send it: refused.
        body = {"answers": {"smoked": 1, "sleep": 0}}
        sent = client.post(f"/api/surveys/{survey_id}/responses", json=body,
                           headers={"Origin": at_localhost(other)})
        assert sent.status_code == 403 and sent.json["error"] == "origin_not_allowed"
        assert "Access-Control-Allow-Origin" not in sent.headers
    assert released_n(client, auth, survey_id) == 0  # nothing stored


def test_a_changed_byte_in_the_copy_is_refused_by_the_browser_and_by_verify(
        hosted, browser, tmp_path):
    _, url, folder = hosted
    result = CliRunner(env={"LDP_SURVEY_CLIENT_DIR": str(tmp_path / "device")}).invoke(
        main, ["verify", url, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["matches"] is True
    module = folder / "assets" / "randomizer.js"
    module.write_bytes(module.read_bytes().replace(b"const", b"let", 1))
    page = browser.new_context().new_page()
    failed = []
    page.on("console", lambda m: failed.append(m.text) if m.type == "error" else None)
    page.goto(url)
    page.wait_for_timeout(500)
    assert page.locator("#questions").is_hidden()  # the module never ran
    assert any("integrity" in text for text in failed), failed
    page.context.close()
    result = CliRunner(env={"LDP_SURVEY_CLIENT_DIR": str(tmp_path / "device")}).invoke(
        main, ["verify", url, "--json"])
    assert result.exit_code == 1
    assert "randomizer.js as served differs from the digest the survey signs" in \
        json.loads(result.output)["problems"]


def test_the_form_refuses_a_page_that_names_another_survey_than_its_manifest(
        hosted, browser, client, auth):
    """The page's data-survey-id is where the answers go: the form answers only the survey
    its manifest is."""
    survey_id, url, folder = hosted
    other = client.post("/api/surveys", json=FORM_SURVEY, headers=auth).json["survey_id"]
    index = folder / "index.html"
    index.write_text(index.read_text().replace(f'data-survey-id="{survey_id}"',
                                               f'data-survey-id="{other}"'))
    page = browser.new_context().new_page()
    page.goto(url)
    page.wait_for_selector("#refused:not([hidden])")
    assert "could not be loaded" in page.locator("#refused-text").inner_text()
    page.context.close()


def test_verify_refuses_a_copy_whose_manifest_is_not_the_signed_one(hosted, tmp_path):
    _, url, folder = hosted
    manifest = folder / "manifest.json"
    manifest.write_bytes(manifest.read_bytes().replace(b'"title":"Habits"', b'"title":"Hobbies"'))
    result = CliRunner(env={"LDP_SURVEY_CLIENT_DIR": str(tmp_path / "device")}).invoke(
        main, ["verify", url, "--json"])
    assert result.exit_code == 1
    problems = json.loads(result.output)["problems"]
    assert any("the copy's manifest differs from the one" in p for p in problems), problems


def test_the_copy_in_each_language_links_the_others(live_server, client, auth, tmp_path,
                                                     browser):
    folder = tmp_path / "site"
    with static_host(folder) as url:
        origin = at_localhost(url)
        definition = {**read_definition(EXAMPLES / "languages.toml"), "form_origins": [origin]}
        survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
        assert write_copy(live_server, survey_id, folder).exit_code == 0
        assert {p.name for p in (folder / "s" / survey_id).glob("index*.html")} == {
            "index.html", "index.fr.html", "index.es.html"}
        page = browser.new_context().new_page()
        page.goto(f"{origin}/s/{survey_id}/")
        page.wait_for_selector("#questions:not([hidden])")
        page.click('#languages a[hreflang="fr"]')
        page.wait_for_selector("#questions:not([hidden])")
        assert page.url.endswith("/index.fr.html")
        assert page.locator("html").get_attribute("lang") == "fr"
        assert page.locator("h1").inner_text() == definition["translations"]["fr"]["title"]
        page.context.close()


def test_the_docs_caddyfile_serves_a_copy_that_respondents_answer(
        live_server, client, auth, browser, tmp_path):
    """docs/hosted-form.md's Caddyfile, with its site address and folder replaced by a
    loopback port and a copy: Debian's Caddy serves the copy with the headers, and a
    respondent answers through it."""
    caddy = shutil.which("caddy") or "/usr/bin/caddy"
    require(Path(caddy).exists(), "Caddy is not installed (apt-get install caddy)")
    port = free_port_below_ephemeral()
    origin = f"http://localhost:{port}"
    definition = {**FORM_SURVEY, "form_origins": [origin]}
    survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
    assert write_copy(live_server, survey_id, tmp_path / "copy").exit_code == 0
    (block,) = doc_blocks("hosted-caddyfile")
    config = tmp_path / "Caddyfile"
    config.write_text("{\n    admin off\n}\n" + block.replace(
        "ethics.example.edu", origin).replace("/srv/survey-copy", str(tmp_path / "copy")))
    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    caddy_run = subprocess.Popen([caddy, "run", "--config", str(config), "--adapter",
                                  "caddyfile"], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
    try:
        for _ in range(300):  # Caddy starts in well under a second; allow a loaded machine
            try:
                with urllib.request.urlopen(f"{origin}/s/{survey_id}/", timeout=5) as response:
                    headers = response.headers
                break
            except OSError:
                assert caddy_run.poll() is None, caddy_run.stderr.read().decode()
                time.sleep(0.1)
        assert headers["X-Frame-Options"] == "DENY"
        assert headers["Content-Security-Policy"] == "frame-ancestors 'none'"
        page = browser.new_context().new_page()
        page.goto(f"{origin}/s/{survey_id}/")
        answer(page)
        page.click("#send")
        page.wait_for_selector("#thanks:not([hidden])")
        page.context.close()
    finally:
        caddy_run.terminate()
        caddy_run.wait(timeout=30)
    assert released_n(client, auth, survey_id) == 1


def free_port_below_ephemeral() -> int:
    """A free port under Linux's ephemeral range (32768 on): polling a port in that range
    before its server listens can connect the client to itself and take the port."""
    for port in random.Random().sample(range(20000, 32000), 200):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port")


def test_an_invitation_answers_once_through_the_copy(
        live_server, client, auth, browser, tmp_path, database_url):
    folder = tmp_path / "site"
    with static_host(folder) as url:
        origin = at_localhost(url)
        definition = {**FORM_SURVEY, "invitation_only": True, "form_origins": [origin]}
        survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
        assert write_copy(live_server, survey_id, folder).exit_code == 0
        minted = client.post(f"/api/surveys/{survey_id}/tokens", json={"count": 1},
                             headers=auth)
        before = stored_bytes(database_url).count(urlsplit(origin).netloc.encode())
        token = urlsplit(minted.json["links"][0]).fragment.removeprefix("t=")
        page = browser.new_context().new_page()
        page.goto(f"{origin}/s/{survey_id}/#t={token}")
        answer(page)
        page.click("#send")
        page.wait_for_selector("#thanks:not([hidden])")
        page.context.close()
        again = browser.new_context().new_page()  # another browser, the same link
        again.goto(f"{origin}/s/{survey_id}/#t={token}")
        answer(again)
        again.click("#send")
        again.wait_for_selector("#send-error:not(:empty)")
        assert "this invitation link is unknown or was already used" in \
            again.locator("#send-error").inner_text()
        again.context.close()
    assert released_n(client, auth, survey_id) == 1
    # The copy's origin, which every post from it named, is kept nowhere: the database's
    # files, read as a copy of them would be, hold it exactly as often as before the posts
    # (in the survey's manifest), and no export line has it.
    after = stored_bytes(database_url).count(urlsplit(origin).netloc.encode())
    assert after == before
    lines = client.get(f"/api/surveys/{survey_id}/export.jsonl", headers=auth).data.splitlines()
    assert len(lines) == 2 and urlsplit(origin).netloc.encode() not in lines[1]


def stored_bytes(database_url: str) -> bytes:
    """The SQLite database's files (main, write-ahead log, index), as bytes."""
    main = Path(database_url.removeprefix("sqlite:///"))
    return b"".join(path.read_bytes() for path in (main, Path(f"{main}-wal"), Path(f"{main}-shm"))
                    if path.exists())


# --- the command's refusals ---------------------------------------------------------------

def test_a_survey_without_form_origins_gets_no_copy(live_server, client, auth, tmp_path):
    survey_id = client.post("/api/surveys", json=FORM_SURVEY, headers=auth).json["survey_id"]
    result = write_copy(live_server, survey_id, tmp_path / "site")
    assert result.exit_code == 1
    assert "lists no form_origins" in result.output
    assert not (tmp_path / "site").exists()


def test_the_copy_is_written_only_with_the_expected_key_into_an_empty_folder(
        live_server, client, auth, tmp_path):
    definition = {**FORM_SURVEY, "form_origins": ["https://ethics.example.edu"]}
    survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
    other = base64.b64encode(bytes(32)).decode()
    result = write_copy(live_server, survey_id, tmp_path / "site", "--public-key", other)
    assert result.exit_code == 1 and "not the given key" in result.output
    assert not (tmp_path / "site").exists()
    served = client.get("/api/key").json["public_key"]
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "index.html").write_text("someone else's")
    result = write_copy(live_server, survey_id, tmp_path / "full", "--public-key", served)
    assert result.exit_code == 1 and "is not empty" in result.output
    result = write_copy(live_server, survey_id, tmp_path / "site", "--public-key", served,
                        "--json")
    assert result.exit_code == 0, result.output
    written = json.loads(result.output)
    folder = tmp_path / "site"  # as any folder made here: a web server's user reads it
    assert oct(folder.stat().st_mode & 0o777) == oct(0o777 & ~hosted_form.current_umask())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".site-")]  # no staging left
    assert written["form_origins"] == ["https://ethics.example.edu"]
    assert written["addresses"] == [f"https://ethics.example.edu/s/{survey_id}/"]
    assert written["aggregator"] == live_server
    assert {f"s/{survey_id}/{name}" for name in ("index.html", "manifest.json", "manifest.sig",
                                                 "key.json", "assets/form.js")} <= set(
        written["files"])


def test_a_survey_signing_another_releases_form_gets_no_copy(client, auth, tmp_path):
    definition = {**FORM_SURVEY, "form_origins": ["https://ethics.example.edu"]}
    survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
    raw = client.get(f"/api/surveys/{survey_id}").data
    survey = parse_manifest(raw)
    older = {**survey.form, "form.js": sri(b"another release's form")}
    from dataclasses import replace
    with pytest.raises(ValueError, match="signs the form of another ldp-survey release"):
        hosted_form.write(replace(survey, form=older), raw, b"", b"", 3600, tmp_path / "site")
    assert not (tmp_path / "site").exists()


# --- the aggregator's CORS ----------------------------------------------------------------

LISTED = "https://ethics.example.edu"


@pytest.fixture
def listed(client, auth) -> str:
    definition = {**FORM_SURVEY, "form_origins": [LISTED]}
    return client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]


def preflight(client, survey_id, origin):
    return client.options(f"/api/surveys/{survey_id}/responses", headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,idempotency-key"})


def test_a_preflight_is_allowed_for_the_listed_origins_only(client, listed, survey_id):
    allowed = preflight(client, listed, LISTED)
    assert allowed.status_code == 204
    assert allowed.headers["Access-Control-Allow-Origin"] == LISTED
    assert allowed.headers["Access-Control-Allow-Methods"] == "POST"
    assert allowed.headers["Access-Control-Allow-Headers"] == cors.ALLOWED_HEADERS
    assert allowed.headers["Vary"] == "Origin"
    assert "Access-Control-Allow-Credentials" not in allowed.headers
    for origin, survey in (("https://elsewhere.example", listed), ("null", listed),
                           (LISTED, survey_id), (LISTED, "no-such-survey")):
        refused = preflight(client, survey, origin)
        assert refused.status_code == 200, (origin, survey)
        assert "Access-Control-Allow-Origin" not in refused.headers
        assert refused.headers["Allow"] == "OPTIONS, POST"


def test_posts_from_a_listed_origin_are_readable_there_and_others_refused(
        client, auth, listed, app):
    body = {"answers": {"smoked": 1, "sleep": 0}}
    path = f"/api/surveys/{listed}/responses"
    sent = client.post(path, json=body, headers={"Origin": LISTED})
    assert sent.status_code == 201
    assert sent.headers["Access-Control-Allow-Origin"] == LISTED
    assert sent.headers["Access-Control-Expose-Headers"] == "Retry-After"
    bad = client.post(path, json={"answers": {"smoked": 7}}, headers={"Origin": LISTED})
    assert bad.status_code == 422 and bad.headers["Access-Control-Allow-Origin"] == LISTED
    own = client.post(path, json=body, headers={"Origin": app.config["PUBLIC_URL"] or
                                                parse_manifest(client.get(
                                                    f"/api/surveys/{listed}").data).origin})
    assert own.status_code == 201 and "Access-Control-Allow-Origin" not in own.headers
    plain = client.post(path, json=body)  # no Origin: not a browser (the Python client)
    assert plain.status_code == 201
    for origin in ("https://elsewhere.example", "null", LISTED + ":8443"):
        refused = client.post(path, json=body, headers={"Origin": origin})
        assert refused.status_code == 403 and refused.json["error"] == "origin_not_allowed"
        assert "Access-Control-Allow-Origin" not in refused.headers
    assert released_n(client, auth, listed) == 3


def test_the_status_is_readable_from_the_listed_origins_only(client, listed):
    shown = client.get(f"/api/surveys/{listed}/status", headers={"Origin": LISTED})
    assert shown.headers["Access-Control-Allow-Origin"] == LISTED
    assert shown.json["status"] == "open" and shown.json["release_every"] > 0
    other = client.get(f"/api/surveys/{listed}/status",
                       headers={"Origin": "https://elsewhere.example"})
    assert "Access-Control-Allow-Origin" not in other.headers
    assert other.headers["Vary"] == "Origin"


def test_preflights_count_in_the_other_class(app, client, listed):
    app.config["RATE_LIMIT_OTHER"] = "2 per minute"
    statuses = [preflight(client, listed, LISTED).status_code for _ in range(3)]
    assert statuses == [204, 204, 429]


# --- the manifest ---------------------------------------------------------------------------

def test_a_survey_lists_its_form_origins_in_format_9_and_none_keeps_format_8(client, auth):
    plain = client.post("/api/surveys", json=FORM_SURVEY, headers=auth).json["survey_id"]
    assert json.loads(client.get(f"/api/surveys/{plain}").data)["format"] == (
        "ldp-survey-manifest/8")
    definition = {**FORM_SURVEY, "form_origins": [LISTED, "http://localhost:8080"]}
    hosted_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
    raw = client.get(f"/api/surveys/{hosted_id}").data
    manifest = json.loads(raw)
    assert manifest["format"] == "ldp-survey-manifest/9"
    assert manifest["form_origins"] == [LISTED, "http://localhost:8080"] and "form" in manifest
    assert parse_manifest(raw).form_origins == (LISTED, "http://localhost:8080")
    # A copy of the survey (`survey copy`) keeps them: they are the definition's.
    copied = client.post(f"/api/surveys/{hosted_id}/copy", headers=auth)
    assert copied.status_code == 201, copied.json
    again = client.post(f"/api/surveys/{copied.json['survey_id']}/publish", headers=auth)
    assert again.status_code == 200, again.json
    assert json.loads(client.get(f"/api/surveys/{copied.json['survey_id']}").data)[
        "form_origins"] == [LISTED, "http://localhost:8080"]


def test_survey_check_names_the_hosts(tmp_path):
    path = tmp_path / "hosted.json"
    path.write_text(json.dumps({**FORM_SURVEY, "form_origins": [LISTED]}))
    checked = CliRunner().invoke(main, ["survey", "check", str(path)])
    assert checked.exit_code == 0, checked.output
    assert f"its form may also be hosted at {LISTED} (`ldp-survey survey form` writes the copy)" \
        in checked.stdout
    as_json = CliRunner().invoke(main, ["survey", "check", str(path), "--json"])
    assert json.loads(as_json.stdout)["form_origins"] == [LISTED]
    path.write_text(json.dumps(FORM_SURVEY))
    assert "hosted at" not in CliRunner().invoke(main, ["survey", "check", str(path)]).stdout


@pytest.mark.parametrize(("origins", "problem"), [
    (["http://ethics.example.edu"], "must be https"),
    (["https://ethics.example.edu/survey"], "must be a web origin"),
    (["https://Ethics.example.edu"], "must be a web origin"),
    ([LISTED, LISTED], "lists an origin twice"),
    (["https://*.example.edu"], "must be a web origin"),  # it would reach the copy's policy
    (["https://ethics.example.edu;script-src"], "must be a web origin"),
    (["https://ethics.example.edu:0"], "must be a web origin"),
    ([f"https://{n}.example.edu" for n in range(9)], "at most 8 web origins"),
    ("https://ethics.example.edu", "must be a list"),
])
def test_form_origins_are_refused_unless_distinct_https_origins(client, auth, origins, problem):
    sent = client.post("/api/surveys", json={**FORM_SURVEY, "form_origins": origins},
                       headers=auth)
    assert sent.status_code == 422 and "form_origins" in sent.json["detail"]
    assert problem in sent.json["detail"]


def test_answers_no_limit_counted_read_nothing(app, client, listed, monkeypatch):
    """A 405, or a post over the rate limit, from a listed origin: answered without the
    database (deciding whether the page may read it would be work no limit counts), and so
    without Access-Control-Allow-Origin."""
    database = app.extensions["ldp_database"]
    connects = []
    real = database.connect
    monkeypatch.setattr(database, "connect", lambda: connects.append(1) or real())
    path = f"/api/surveys/{listed}/responses"
    for _ in range(5):
        refused = client.delete(path, headers={"Origin": LISTED})
        assert refused.status_code == 405 and "Access-Control-Allow-Origin" not in refused.headers
    app.config["RATE_LIMIT_SUBMIT"] = "1 per minute"
    body = {"answers": {"smoked": 1, "sleep": 0}}
    assert client.post(path, json=body, headers={"Origin": LISTED}).status_code == 201
    assert len(connects) == 1
    for _ in range(5):
        limited = client.post(path, json=body, headers={"Origin": LISTED})
        assert limited.status_code == 429 and "Access-Control-Allow-Origin" not in limited.headers
    assert len(connects) == 1


# --- verify against a host that changes the page, not a file -------------------------------

PAGE_ATTACKS = {
    # the form would read another manifest: one of the host's own, beside another copy
    "base": lambda page, sid: page.replace("<head>", '<head>\n<base href="/x/">', 1),
    # a decoy only a parser without scripting sees first (a browser shows it as text)
    "decoy": lambda page, sid: page.replace("<main>", '<main><noscript><article id="survey" '
                                            f'data-survey-id="{sid}" data-manifest-url='
                                            '"manifest.json"></article></noscript>', 1),
    "policy": lambda page, sid: page.replace("connect-src 'self'", "connect-src *", 1),
    "form": lambda page, sid: page.replace(
        "</main>", '<form action="https://collector.example/true">'
        '<input name="smoked"><button>Send</button></form></main>', 1),
}


@pytest.mark.parametrize("attack", PAGE_ATTACKS)
def test_verify_refuses_a_copy_whose_page_changed_but_no_file(hosted, tmp_path, attack):
    """The attacks an attacker's review found `verify` passed when it checked files only:
    every page of the copy must be, byte for byte, what this release writes."""
    survey_id, url, folder = hosted
    index = folder / "index.html"
    index.write_text(PAGE_ATTACKS[attack](html.unescape(index.read_text()) if attack == "policy"
                                          else index.read_text(), survey_id))
    result = CliRunner(env={"LDP_SURVEY_CLIENT_DIR": str(tmp_path / "device")}).invoke(
        main, ["verify", url, "--json"])
    assert result.exit_code == 1
    problems = json.loads(result.output)["problems"]
    assert any(p.startswith("the copy's pages are not those ldp-survey") for p in problems)


class OnlyAtTheFolder(SimpleHTTPRequestHandler):
    """A host that serves the changed page at the address it shares (the folder, or any
    address with a query) and the page as written at .../index.html."""

    changed = b""

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.endswith("/") or "?" in self.path:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(self.changed)
            return
        super().do_GET()


@pytest.mark.parametrize("address", ["{copy}", "{copy}index.html?utm=1"])
def test_verify_compares_the_page_at_the_address_it_was_given(live_server, client, auth,
                                                              tmp_path, address):
    """The second review's attack: a listed host serves a changed page only where people are
    sent, and the page as written where a check might fetch it by name."""
    folder = tmp_path / "site"
    folder.mkdir()
    host = type("Host", (OnlyAtTheFolder,), {})
    with serving(functools.partial(host, directory=str(folder))) as url:
        origin = at_localhost(url)
        definition = {**FORM_SURVEY, "form_origins": [origin]}
        survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
        assert write_copy(live_server, survey_id, folder).exit_code == 0
        written = (folder / "s" / survey_id / "index.html").read_text()
        host.changed = PAGE_ATTACKS["base"](written, survey_id).encode()
        copy = f"{origin}/s/{survey_id}/"
        result = CliRunner(env={"LDP_SURVEY_CLIENT_DIR": str(tmp_path / "device")}).invoke(
            main, ["verify", address.format(copy=copy), "--json"])
    assert result.exit_code == 1, result.output
    assert json.loads(result.output)["problems"] == [
        f"the copy's pages are not those ldp-survey {release_digests()['release']} writes for "
        "this survey: a page can change what the form reads or where it sends without "
        "changing any file (a <base> element, another form element, its policy)"]


def test_verify_refuses_a_copy_served_with_a_refresh_header(live_server, client, auth,
                                                           tmp_path):
    """The page's bytes as written, but a header that sends browsers elsewhere."""
    folder = tmp_path / "site"
    folder.mkdir()

    class Refreshing(Quiet):
        def end_headers(self):
            self.send_header("Refresh", "0;url=https://collector.example/")
            super().end_headers()

    with serving(functools.partial(Refreshing, directory=str(folder))) as url:
        origin = at_localhost(url)
        definition = {**FORM_SURVEY, "form_origins": [origin]}
        survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
        assert write_copy(live_server, survey_id, folder).exit_code == 0
        result = CliRunner(env={"LDP_SURVEY_CLIENT_DIR": str(tmp_path / "device")}).invoke(
            main, ["verify", f"{origin}/s/{survey_id}/", "--json"])
    assert result.exit_code == 1
    assert any("Refresh header" in p for p in json.loads(result.output)["problems"])


def test_verify_says_what_it_checked_of_a_copy(hosted, tmp_path, live_server):
    _, url, _ = hosted
    result = CliRunner(env={"LDP_SURVEY_CLIENT_DIR": str(tmp_path / "device")}).invoke(
        main, ["verify", url])
    assert result.exit_code == 0, result.output
    assert f"A copy of the form: answers go to {live_server}." in result.output
    assert f"its manifest is, byte for byte, the one {live_server} signs" in result.output
    assert "its pages (index.html) are, byte for byte, those ldp-survey" in result.output
    # Without the final slash, the static host redirects, and the copy is checked where the
    # browser ends up.
    again = CliRunner(env={"LDP_SURVEY_CLIENT_DIR": str(tmp_path / "device")}).invoke(
        main, ["verify", url.rstrip("/")])
    assert again.exit_code == 0, again.output


def test_verify_checks_where_a_redirect_ends(hosted, tmp_path):
    """A listed host that sends browsers on to another origin: what runs there is checked,
    at that origin, which the survey does not list."""
    survey_id, _, folder = hosted
    with serving(functools.partial(Quiet, directory=str(folder.parents[1]))) as elsewhere:
        target = f"{at_localhost(elsewhere)}/s/{survey_id}/"

        class Redirect(Quiet):
            def do_GET(self):
                self.send_response(302)
                self.send_header("Location", target)
                self.end_headers()

        with serving(Redirect) as redirecting:
            result = CliRunner(env={"LDP_SURVEY_CLIENT_DIR": str(tmp_path / "device")}).invoke(
                main, ["verify", f"{redirecting}/s/{survey_id}/", "--json"])
    found = json.loads(result.output)
    assert result.exit_code == 1 and found["url"] == target
    assert any(f"does not list {at_localhost(elsewhere)} in form_origins" in p
               for p in found["problems"])


def test_what_a_page_or_server_says_reaches_the_terminal_cleaned(hosted, tmp_path):
    _, url, folder = hosted
    index = folder / "index.html"
    index.write_text(index.read_text().replace(
        "</head>", '<link rel="stylesheet" href="./assets/style.css#\x1b[2J\x1b[HMATCHES">'
        "</head>", 1))
    result = CliRunner(env={"LDP_SURVEY_CLIENT_DIR": str(tmp_path / "device")}).invoke(
        main, ["verify", url])
    assert result.exit_code == 1
    assert "\x1b" not in result.output and "DOES NOT MATCH" in result.output


def test_a_servers_error_reaches_the_terminal_cleaned(tmp_path):
    class Hostile(Quiet):
        def do_GET(self):
            body = json.dumps({"error": "gone", "detail": "gone\x1b]0;pwned\x07\u202eevil"})
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

    with serving(Hostile) as url:
        result = write_copy(url, "someid", tmp_path / "site")
    assert result.exit_code == 1 and "no copy written" in result.output
    assert "\x1b" not in result.output and "\u202e" not in result.output


def test_the_command_says_what_it_checked_the_key_against(live_server, client, auth,
                                                          tmp_path, researcher_key):
    definition = {**FORM_SURVEY, "form_origins": [LISTED]}
    survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
    unpinned = write_copy(live_server, survey_id, tmp_path / "one", "--json")
    assert unpinned.exit_code == 0, unpinned.output
    key_id = client.get("/api/key").json["key_id"]
    assert f"key id {key_id}, which this device never pinned" in unpinned.stderr
    assert json.loads(unpinned.stdout)["key_checked_against"] is None
    given = write_copy(live_server, survey_id, tmp_path / "two", "--json", "--public-key",
                       client.get("/api/key").json["public_key"])
    assert "never pinned" not in given.stderr
    assert json.loads(given.stdout)["key_checked_against"] == "given"
    # A draft has no manifest yet: the refusal says what to do.
    draft = client.post("/api/surveys?draft=true", json=definition, headers=auth)
    refused = write_copy(live_server, draft.json["survey_id"], tmp_path / "three")
    assert refused.exit_code == 1 and "a draft is published first" in refused.output
    # Publishing one says how to write its copy.
    (tmp_path / "hosted.json").write_text(json.dumps(definition))
    created = CliRunner(env={"LDP_SURVEY_KEY": researcher_key}).invoke(
        main, ["survey", "create", str(tmp_path / "hosted.json"), "--url", live_server])
    assert created.exit_code == 0, created.output
    assert (f"its form may also be hosted at {LISTED}: `ldp-survey survey form "
            f"{created.stdout.strip()} --output DIR` writes the copy they serve") in created.stderr
