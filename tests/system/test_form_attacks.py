"""A page that leaks, attacked through a proxy in front of a real aggregator
(tests/attack_proxy.py): one byte of one module, an added script, a swapped stylesheet, an
older release's page, a re-signed manifest. `ldp-survey verify URL` (client/form_audit.py,
cli/verify.py) catches each, its exit code says which; Chromium itself refuses a changed
module or stylesheet (integrity) and an added inline script (the Content-Security-Policy)."""

import base64
import json
import re
from dataclasses import replace

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ldpsurvey.aggregator.web.assets import bundle, form_digests
from ldpsurvey.cli import main
from ldpsurvey.shared import parse_manifest
from ldpsurvey.shared.survey.form_integrity import module_imports, release_digests, sri
from ldpsurvey.shared.survey.manifest import key_id

from helpers import doc_blocks, respond

FILES = len(form_digests())  # the form's modules and its stylesheet


@pytest.fixture(params=["sqlite"])
def database_url(request, tmp_path):
    """These tests attack the page, not the database: SQLite only."""
    return f"sqlite:///{tmp_path / 'test.sqlite3'}"


def verify(url: str, *options: str, client_dir=None):
    env = {"LDP_SURVEY_CLIENT_DIR": str(client_dir)} if client_dir else {}
    return CliRunner(env=env).invoke(main, ["verify", url, *options])


def verified(url: str, tmp_path, *options: str) -> dict:
    result = verify(url, "--json", *options, client_dir=tmp_path / "device")
    document = json.loads(result.output)
    assert result.exit_code == (0 if document["matches"] else 1), result.output
    return document


def asset_path(name: str) -> str:
    return f"/web/{bundle().digest}/{name}"


def test_the_release_ships_the_digests_of_its_form():
    """shared/form_digests.json is what tests/form_digests.py generates from this tree."""
    import form_digests as generator

    assert json.loads(generator.PATH.read_text()) == json.loads(generator.generated())
    assert generator.EXTENSION.read_text() == generator.for_extension()
    assert release_digests()["form"] == form_digests()


def test_the_signed_digests_cover_the_whole_module_graph(client, survey_id):
    manifest = json.loads(client.get(f"/api/surveys/{survey_id}").data)
    assert manifest["format"] == "ldp-survey-manifest/8"
    files = bundle().files
    reached, pending = {"form.js"}, ["form.js"]
    while pending:  # the graph again, from the served bodies
        for specifier in module_imports(files[pending.pop()].body):
            if specifier[2:] not in reached:
                reached.add(specifier[2:])
                pending.append(specifier[2:])
    assert set(manifest["form"]) == reached | {"style.css"}
    # the 11 files issue 42 counted, then words.js (the form's words) and square_wave.js
    assert len(manifest["form"]) == FILES == 13
    assert all(manifest["form"][name] == sri(files[name].body) for name in manifest["form"])


def test_the_untouched_page_matches(form_url, tmp_path):
    result = verify(form_url, client_dir=tmp_path)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("MATCHES: ")
    assert f"Checked {FILES} files" in result.output
    document = verified(form_url, tmp_path)
    assert document["matches"] and not document["problems"]
    assert {f["name"] for f in document["files"]} == set(form_digests())
    assert document["key_checked_against"] is None  # nothing pinned, no key given


def test_the_documented_verify_commands_run_as_written(form_url, tmp_path, app):
    """docs/respondents.md's verify-commands, against the proxy's aggregator: both match."""
    import shlex

    (block,) = set(doc_blocks("verify-commands"))
    base, _, survey_id = form_url.rpartition("/s/")
    key = app.extensions["ldp_signing_key"].public_json()["public_key"]
    commands = [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]
    assert [command[:2] for command in commands] == [["ldp-survey", "verify"]] * 2
    for command in commands:
        args = [argument.replace("https://survey.example.org", base).replace("/s/ID", f"/s/{survey_id}")
                .replace("KEY", key) for argument in command[2:]]
        result = verify(*args, client_dir=tmp_path)
        assert result.exit_code == 0, (args, result.output)
    assert json.loads(result.output)["key_checked_against"] == "given"


def one_byte_changed(name: str):
    def tamper(path: str, body: bytes) -> bytes:
        return body[:-2] + bytes([body[-2] ^ 1]) + body[-1:] if path == asset_path(name) else body
    return tamper


@pytest.mark.parametrize("name", ["randomizer.js", "form.js"])
def test_one_changed_byte_of_one_module_is_caught(proxy, form_url, tmp_path, name):
    proxy.tamper = one_byte_changed(name)
    result = verify(form_url, client_dir=tmp_path)
    assert result.exit_code == 1 and result.output.startswith("DOES NOT MATCH: ")
    assert f"{name} as served differs from the digest the survey signs" in result.output
    document = verified(form_url, tmp_path)
    assert [f["name"] for f in document["files"] if not f["matches"]] == [name]


def page_tamper(change):
    def tamper(path: str, body: bytes) -> bytes:
        return change(body.decode()).encode() if path.startswith("/s/") else body
    return tamper


def test_an_added_script_is_caught(proxy, form_url, tmp_path):
    extra = (f'<script type="module" src="{asset_path("dashboard.js")}" '
             f'integrity="{bundle().files["dashboard.js"].integrity}"></script></head>')
    proxy.tamper = page_tamper(lambda page: page.replace("</head>", extra))
    document = verified(form_url, tmp_path)
    assert "the page loads dashboard.js" in " ".join(document["problems"])
    proxy.tamper = page_tamper(lambda page: page.replace("</head>", "<script>1</script></head>"))
    assert verified(form_url, tmp_path)["problems"] == ["the page runs an inline script"]
    proxy.tamper = page_tamper(lambda page: page.replace(
        "</head>", '<script src="http://127.0.0.2:9/x.js"></script></head>'))
    assert "from another origin" in " ".join(verified(form_url, tmp_path)["problems"])


def test_a_swapped_stylesheet_is_caught(proxy, form_url, tmp_path):
    proxy.tamper = lambda path, body: (b"body { background: url(/leak) }"
                                       if path == asset_path("style.css") else body)
    problems = verified(form_url, tmp_path)["problems"]
    assert "style.css as served differs from the digest the survey signs" in problems


OLDER = "0123456789abcdef"  # the older release's bundle digest


def older_release(path: str, body: bytes) -> bytes:
    """A self-consistent page of another release: its own URLs, integrity and import map
    (a browser would load it), the form's code not the signed one (older_files)."""
    if not path.startswith("/s/"):
        return body
    page = body.decode().replace(f"/web/{bundle().digest}/", f"/web/{OLDER}/")
    for asset in bundle().files.values():
        page = page.replace(asset.integrity, sri(b"/* ldp-survey 0.0.9 */\n" + asset.body))
    return page.encode()


def older_files() -> dict[str, tuple[str, bytes]]:
    return {f"/web/{OLDER}/{name}": (asset.mimetype, b"/* ldp-survey 0.0.9 */\n" + asset.body)
            for name, asset in bundle().files.items()}


def test_an_older_releases_page_is_caught(proxy, form_url, tmp_path):
    proxy.tamper, proxy.extra = older_release, older_files()
    document = verified(form_url, tmp_path)
    assert not document["matches"]
    assert all(f["declared"] == f["served"] != f["signed"] for f in document["files"])
    assert len(document["files"]) == FILES


def test_a_page_without_integrity_is_caught(proxy, form_url, tmp_path):
    proxy.tamper = page_tamper(lambda page: re.sub(r' integrity="[^"]+"', "", page))
    problems = verified(form_url, tmp_path)["problems"]
    assert "the page loads style.css without the signed integrity, so a browser would not " \
           "refuse other bytes" in problems
    proxy.tamper = page_tamper(lambda page: page.replace('{"integrity"', '{"imports": {}, '
                                                         '"integrity"'))
    assert "the page's import map remaps modules (it has more than integrity)" in \
        verified(form_url, tmp_path)["problems"]


def re_signed(tamper_form: bool):
    """Another key's manifest for the same survey (its key id, signature and key served in
    place of the aggregator's), with the form's digests re-signed for a changed form.js when
    tamper_form."""
    other = Ed25519PrivateKey.generate()
    public = other.public_key().public_bytes(serialization.Encoding.Raw,
                                             serialization.PublicFormat.Raw)
    signed: dict[str, bytes] = {}
    changed = one_byte_changed("form.js")

    def manifest(body: bytes) -> bytes:
        document = json.loads(body)
        document["key_id"] = key_id(public)
        if tamper_form:
            document["form"]["form.js"] = sri(changed(asset_path("form.js"),
                                                      bundle().files["form.js"].body))
        signed["manifest"] = json.dumps(document, separators=(",", ":")).encode()
        return signed["manifest"]

    def tamper(path: str, body: bytes) -> bytes:
        if path == "/api/key":
            return json.dumps({"algorithm": "Ed25519", "key_id": key_id(public),
                               "public_key": base64.b64encode(public).decode()}).encode()
        if path.startswith("/api/surveys/") and path.endswith("/manifest.sig"):
            return other.sign(signed["manifest"])
        if path.startswith("/api/surveys/"):
            return manifest(body)
        return changed(path, body) if tamper_form else body
    return tamper


def test_a_manifest_re_signed_with_another_key_is_caught(proxy, form_url, tmp_path, app):
    aggregator_key = app.extensions["ldp_signing_key"].public_json()["public_key"]
    proxy.tamper = re_signed(tamper_form=False)
    given = verified(form_url, tmp_path, "--public-key", aggregator_key)
    assert not given["matches"] and "not the given key" in given["problems"][0]
    unchecked = verify(form_url, client_dir=tmp_path / "new")
    assert unchecked.exit_code == 0  # the same form, signed by a key nobody checked: it says so
    assert "checked against nothing: this device has not pinned a key" in unchecked.output
    # A device that answered before pinned the aggregator's key: the other key is refused.
    proxy.tamper = lambda path, body: body
    survey_id = form_url.rpartition("/")[2]
    answered = respond(proxy.url, survey_id, "smoked=yes,sleep=2", tmp_path / "device")
    assert answered.exit_code == 0, answered.output
    proxy.tamper = re_signed(tamper_form=False)
    pinned = verified(form_url, tmp_path)
    assert not pinned["matches"] and "not the pinned key" in pinned["problems"][0]
    # Re-signed for a changed form, with no key to check: the release's digests catch it.
    proxy.tamper = re_signed(tamper_form=True)
    changed = verified(form_url, tmp_path / "other-device")
    assert "form.js as served differs from ldp-survey" in " ".join(changed["problems"])


def test_a_survey_signed_before_format_8_has_nothing_to_check(proxy, form_url, tmp_path, app):
    """What a survey published by an earlier release gets: the verdict says why it cannot
    match (nothing signed), never that it matches."""
    survey_id = form_url.rpartition("/")[2]
    key = app.extensions["ldp_signing_key"]

    manifest_path = f"/api/surveys/{survey_id}"
    published = parse_manifest(app.test_client().get(manifest_path).data)
    raw = replace(published, form=None).manifest_bytes()  # as format /7 writes it

    def earlier(path: str, body: bytes) -> bytes:
        return {manifest_path: raw, f"{manifest_path}/manifest.sig": key.sign(raw)}.get(path, body)

    proxy.tamper = earlier
    document = verified(form_url, tmp_path)
    assert not document["matches"]
    assert "published before format /8" in document["problems"][0]


@pytest.mark.parametrize("url, message", [
    ("ftp://example.org/s/x", "not an http(s) survey link"),
    ("http://192.0.2.1/s/x", "plain http to another machine"),
])
def test_a_url_that_is_no_survey_page_is_one_line_and_exit_2(url, message):
    result = verify(url)
    assert result.exit_code == 2 and message in result.output


def test_a_page_that_is_neither_a_form_nor_a_copy_of_one_is_one_line(live_server):
    """Any other URL is read as a copy of a form hosted elsewhere (test_hosted_form.py): a
    page without the form's element is neither."""
    result = verify(f"{live_server}/")
    assert result.exit_code == 1
    assert result.output.strip().endswith("is neither a survey page "
                                          "(https://HOST/s/SURVEY_ID) nor a copy of a survey's form")


def form_errors(page) -> list[str]:
    messages: list[str] = []
    page.on("console", lambda message: messages.append(message.text)
            if message.type == "error" else None)
    return messages


def test_chromium_runs_the_untouched_form_with_every_integrity_checked(page, form_url):
    errors = form_errors(page)
    page.goto(form_url)
    page.wait_for_selector("#questions:not([hidden])")
    assert page.evaluate("document.querySelector('link[rel=stylesheet]').sheet !== null")
    assert page.locator("script[type=importmap]").count() == 1
    assert not errors  # the import map ran: its hash is in script-src


@pytest.mark.parametrize("name", ["randomizer.js", "form.js", "piecewise.js"])
def test_chromium_refuses_a_module_changed_by_one_byte(page, proxy, form_url, name):
    """An imported module (randomizer.js, piecewise.js: the import map's and modulepreload's
    integrity) or the entry (its attribute): the form never runs, nothing is asked."""
    proxy.tamper = one_byte_changed(name)
    with page.expect_console_message(lambda message: "integrity" in message.text) as refused:
        page.goto(form_url)
    assert name in refused.value.text and refused.value.type == "error"
    assert page.locator("#check").inner_text() == "Checking this survey…"
    assert page.locator("#questions").is_hidden()


def test_chromium_refuses_a_swapped_stylesheet(page, proxy, form_url):
    proxy.tamper = lambda path, body: (b"body { background: url(/leak) }"
                                       if path == asset_path("style.css") else body)
    page.goto(form_url)
    page.wait_for_selector("#questions:not([hidden])")
    assert page.evaluate("document.querySelector('link[rel=stylesheet]').sheet") is None


def test_chromium_refuses_an_added_inline_script(page, proxy, form_url):
    proxy.tamper = page_tamper(lambda page: page.replace(
        "</head>", "<script>window.leaked = true</script></head>"))
    errors = form_errors(page)
    page.goto(form_url)
    page.wait_for_selector("#questions:not([hidden])")
    assert page.evaluate("window.leaked") is None
    assert any("Content Security Policy" in error for error in errors), errors
