"""The browser extension (extension/, Manifest V3) in Debian's Chromium, loaded unpacked with
Playwright, on forms served through the attack proxy of test_form_attacks: the untouched form
gets an accessible "checked" verdict and sends; a self-consistent page of an older release
(which the browser's integrity cannot catch), an added script and a swapped stylesheet get a
warning, and sending is blocked. On a copy of the form hosted elsewhere (test_hosted_form), the
same, and the attacks a second review made: a host that serves the first request of a file
other bytes than a second (which a check that fetches again would not see), and a page with
styles of its own under a looser policy."""

import functools
import json
import shutil
from pathlib import Path
from typing import ClassVar

import pytest
from test_form_attacks import (  # noqa: F401 (database_url: their SQLite fixture)
    asset_path,
    bundle,
    database_url,
    older_files,
    older_release,
    page_tamper,
)
from test_hosted_form import (  # noqa: F401 (hosted: a copy of the form)
    FORM_SURVEY,
    Quiet,
    answer,
    at_localhost,
    hosted,
    write_copy,
)

from ldpsurvey.aggregator.web.assets import form_digests
from ldpsurvey.shared.survey.form_integrity import sri

from helpers import require, serving

EXTENSION = Path(__file__).resolve().parents[2] / "extension"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"  # as tests/conftest.py's browser


@pytest.fixture(scope="module")
def extension_context(tmp_path_factory):
    """Chromium (new headless) with the unpacked extension, one profile per module."""
    require(Path(CHROMIUM).exists(), "Chromium is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("profile")), executable_path=CHROMIUM, headless=True,
            ignore_default_args=["--disable-extensions"],
            args=["--no-sandbox", "--disable-gpu", f"--disable-extensions-except={EXTENSION}",
                  f"--load-extension={EXTENSION}"])
        yield context
        context.close()


@pytest.fixture
def page(extension_context):
    page = extension_context.new_page()
    yield page
    page.close()


def verdict(page):
    banner = page.locator("#ldp-form-check")
    banner.wait_for()
    return banner


def answer_and_randomize(page):
    page.wait_for_selector("#questions:not([hidden])")
    page.locator('fieldset[data-question="smoked"] label', has_text="Yes").click()
    page.locator('fieldset[data-question="sleep"] label', has_text="6-8").click()
    page.click("#review")
    page.wait_for_selector("#true-review:not([hidden])")


def test_the_untouched_form_is_checked_and_sends(page, form_url):
    page.goto(form_url)
    banner = verdict(page)
    assert banner.get_attribute("data-verdict") == "match"
    assert banner.get_attribute("role") == "status"
    assert "is the code the survey signs" in banner.inner_text()
    assert f"({len(form_digests())} files)" in banner.inner_text()  # the form's modules and style
    answer_and_randomize(page)
    page.click("#randomize")
    page.wait_for_selector("#confirm:not([hidden])")
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")


@pytest.mark.parametrize("attack", ["older release", "added script", "swapped stylesheet"])
def test_a_form_that_differs_gets_a_warning_and_cannot_send(page, proxy, form_url, attack):
    if attack == "older release":
        proxy.tamper, proxy.extra = older_release, older_files()
    elif attack == "added script":
        extra = (f'<script type="module" src="{asset_path("dashboard.js")}" '
                 f'integrity="{bundle().files["dashboard.js"].integrity}"></script></head>')
        proxy.tamper = page_tamper(lambda text: text.replace("</head>", extra))
    else:
        proxy.tamper = lambda path, body: (b"body { background: url(/leak) }"
                                           if path == asset_path("style.css") else body)
    sent = []
    page.on("request", lambda request: sent.append(request) if request.method == "POST" else None)
    page.goto(form_url)
    banner = verdict(page)
    assert banner.get_attribute("data-verdict") == "differ"
    assert banner.get_attribute("role") == "alert"
    assert "Sending is blocked" in banner.inner_text()
    if attack == "older release":
        assert "form.js differs from the signed digest" in banner.inner_text()
        answer_and_randomize(page)
        page.click("#randomize")  # blocked: the randomized answers are never shown
        assert page.locator("#confirm").is_hidden()
    elif attack == "added script":
        assert "dashboard.js is not part of the signed form" in banner.inner_text()
    else:
        assert "style.css differs from the signed digest" in banner.inner_text()
    assert not sent


# --- the extension on a copy ----------------------------------------------------------------

def test_the_extension_checks_a_copy_and_it_sends(hosted, extension_context):  # noqa: F811
    _, url, folder = hosted
    page = extension_context.new_page()
    page.goto(url)
    banner = verdict(page)
    assert banner.get_attribute("data-verdict") == "match", banner.inner_text()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert (f"Answers go to {manifest['origin']}; the survey is signed with key "
            f"{manifest['key_id']}.") in banner.inner_text()
    answer(page)
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    page.close()


def test_the_extension_warns_on_a_copy_whose_stylesheet_changed(
        hosted, extension_context):  # noqa: F811
    """A self-consistent change (the stylesheet and its integrity in the page), which the
    browser's integrity cannot catch: the extension does, and blocks sending."""
    _, url, folder = hosted
    style = folder / "assets" / "style.css"
    before = sri(style.read_bytes())
    style.write_bytes(style.read_bytes() + b"\nbody { background: url(/leak) }\n")
    for page_file in folder.glob("index*.html"):
        page_file.write_text(page_file.read_text().replace(before, sri(style.read_bytes())))
    page = extension_context.new_page()
    sent = []
    page.on("request", lambda request: sent.append(request) if request.method == "POST" else None)
    page.goto(url)
    banner = verdict(page)
    assert banner.get_attribute("data-verdict") == "differ"
    assert "style.css differs from the signed digest" in banner.inner_text()
    page.wait_for_selector("#questions:not([hidden])")
    page.click("#q-smoked-1")
    page.click("#q-sleep-1")
    page.click("#review")
    page.wait_for_selector("#true-review:not([hidden])")
    page.click("#randomize")  # blocked: the randomized answers are never shown
    assert page.locator("#confirm").is_hidden()
    assert not sent
    page.close()


def test_the_extension_refuses_a_copy_whose_base_address_points_elsewhere(
        hosted, extension_context):  # noqa: F811
    """A copy's host adds <base href> to a folder with a manifest of its own: the form would
    read it, so the extension refuses the page before checking anything else."""
    _, url, folder = hosted
    (folder.parent / "x").mkdir()
    shutil.copytree(folder, folder.parent / "x" / "copy")
    index = folder / "index.html"
    index.write_text(index.read_text().replace("<head>", '<head>\n<base href="../x/copy/">', 1))
    page = extension_context.new_page()
    page.goto(url)
    banner = verdict(page)
    assert banner.get_attribute("data-verdict") == "differ"
    assert "(<base>)" in banner.inner_text()
    page.close()


class FirstRequestDiffers(Quiet):
    """A host that serves, once, other bytes for some files (`first`, by path suffix), with
    no-store so that a second request is served again: the browser gets those, a check that
    fetches again gets the files as written."""

    first: ClassVar[dict] = {}

    def do_GET(self):
        for suffix, body in list(self.first.items()):
            if self.path.endswith(suffix):
                del self.first[suffix]
                self.send_response(200)
                self.send_header("Cache-Control", "no-store")
                self.send_header("Content-Type", "text/css" if suffix.endswith(".css")
                                 else "application/json")
                self.end_headers()
                self.wfile.write(body)
                return
        super().do_GET()


def differing_copy(live_server, client, auth, tmp_path):
    """A copy at a host whose files' first requests can differ: (host class, survey id,
    address, the copy's folder); the caller sets host.first before the page is opened."""
    folder = tmp_path / "site"
    folder.mkdir()
    host = type("Host", (FirstRequestDiffers,), {"first": {}})
    server = serving(functools.partial(host, directory=str(folder)))
    url = server.__enter__()
    origin = at_localhost(url)
    definition = {**FORM_SURVEY, "form_origins": [origin]}
    survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
    assert write_copy(live_server, survey_id, folder).exit_code == 0
    return host, server, f"{origin}/s/{survey_id}/", folder / "s" / survey_id


@pytest.mark.parametrize("attack", ["stylesheet", "manifest", "own styles"])
def test_the_extension_sees_what_the_browser_ran_not_a_second_fetch(
        extension_context, live_server, client, auth, tmp_path, attack):
    host, server, url, folder = differing_copy(live_server, client, auth, tmp_path)
    index = folder / "index.html"
    try:
        if attack == "stylesheet":  # the page declares the other bytes' integrity
            other = (folder / "assets" / "style.css").read_bytes() + b"\nbody{color:red}\n"
            host.first = {"/assets/style.css": other}
            index.write_text(index.read_text().replace(
                sri((folder / "assets" / "style.css").read_bytes()), sri(other)))
        elif attack == "manifest":  # another manifest for the form, the signed one for a check
            host.first = {"/manifest.json": (folder / "manifest.json").read_bytes().replace(
                b'"title":"Habits"', b'"title":"The host\'s own"')}
        else:  # a looser policy and a style that reports a tick as it happens
            page = index.read_text().replace("style-src &#39;self&#39;",
                                             "style-src &#39;self&#39; &#39;unsafe-inline&#39;")
            index.write_text(page.replace("</head>", "<style>#q-smoked-1:checked{background:"
                                          "url(/leak?smoked=1)}</style></head>", 1))
        page = extension_context.new_page()
        page.goto(url)
        banner = verdict(page)
        assert banner.get_attribute("data-verdict") == "differ", banner.inner_text()
        expected = {"stylesheet": "style.css is loaded without the integrity the survey signs",
                    "manifest": "the form read another manifest than the one the survey signs",
                    "own styles": "the page has styles of its own"}[attack]
        assert expected in banner.inner_text()
        page.close()
    finally:
        server.__exit__(None, None, None)
