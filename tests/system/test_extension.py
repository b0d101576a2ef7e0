"""The browser extension (extension/, Manifest V3) in Debian's Chromium, loaded unpacked with
Playwright, on forms served through the attack proxy of test_form_attacks: the untouched form
gets an accessible "checked" verdict and sends; a self-consistent page of an older release
(which the browser's integrity cannot catch), an added script and a swapped stylesheet get a
warning, and sending is blocked."""

import json
import shutil
from pathlib import Path

import pytest
from test_form_attacks import (  # noqa: F401 (database_url: their SQLite fixture)
    asset_path,
    bundle,
    database_url,
    older_files,
    older_release,
    page_tamper,
)
from test_hosted_form import answer, hosted  # noqa: F401 (hosted: a copy of the form)

from ldpsurvey.aggregator.web.assets import form_digests
from ldpsurvey.shared.survey.form_integrity import sri

from helpers import require

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
