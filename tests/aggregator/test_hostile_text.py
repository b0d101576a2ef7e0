"""Hostile text and input: terminal escape sequences, OSC 8 hyperlinks and bidi overrides
from a malicious server (in titles, option labels and error details) never reach the CLI's
output, whose visible text stays readable; and the size of a response on the wire tells no
answer apart."""

import base64
import dataclasses
import itertools
import json
import os
import secrets
import subprocess
import sys
import tty
import unicodedata
from http.server import BaseHTTPRequestHandler

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ldpsurvey.cli import main
from ldpsurvey.cli.terminal import clean
from ldpsurvey.client import Ceilings, LocalState, fetch_survey, submit
from ldpsurvey.client.respondent import Submission
from ldpsurvey.shared import parse_definition
from ldpsurvey.shared.survey.manifest import key_id

from helpers import SURVEY, release_due, serving

# Clears the screen, paints in red, a hyperlink whose text hides its target, a right-to-left
# override, an 8-bit CSI, a zero-width space, a line separator, an invisible tag character,
# DEL, a window title, a bell.
HOSTILE = ("\x1b[2J\x1b[31mRed\x1b[0m \x1b]8;;https://evil.example/\x1b\\Click\x1b]8;;\x1b\\ "
           "\u202egnp.exe\u202c \x9b2Jok\u200b\u2028end\U000e0041\x7f \x1b]0;pwned\x07title\a")
VISIBLE = "Red Click gnp.exe ok end title"
# What a manifest may hold (publishing and parse_manifest refuse controls and bidi overrides),
# yet a terminal does not show: a zero-width space, a word joiner, a line separator, tag
# characters (invisible ASCII), a byte order mark.
SNEAKY = "Sneaky\u200b \u2060title\u2028now\U000e0041\U000e0042\ufeff"
SNEAKY_VISIBLE = "Sneaky title now"


def assert_clean(text: str) -> None:
    """No control but newline, no format character but ZWJ/ZWNJ, no line separator."""
    bad = [c for c in text if c != "\n" and c not in "\u200c\u200d"
           and unicodedata.category(c) in {"Cc", "Cf", "Cs", "Zl", "Zp"}]
    assert not bad, f"{bad!r} in {text!r}"


def test_clean_strips_sequences_and_keeps_the_visible_text():
    assert clean(HOSTILE) == VISIBLE
    assert clean("a\nb\x1b[2J\nc", keep_newlines=True) == "a\nb\nc"
    assert clean("a\nb") == "a b"
    assert clean("\u0645\u06cc\u200c\u062e\u0648\u0627\u0645 \U0001f468\u200d\U0001f469") == (
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0645 \U0001f468\u200d\U0001f469")  # ZWNJ, ZWJ kept
    assert clean("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069x") == "x"
    assert clean("unterminated \x1b]8;;https://evil") == "unterminated 8;;https://evil"


class EvilServer:
    """A server that answers each (method, path) with what `pages` says, 404 otherwise, and
    records what is posted to it; it holds its own signing key for manifests."""

    def __init__(self):
        self.pages: dict[tuple[str, str], tuple[int, bytes]] = {}
        self.posts: list[tuple[str, str, bytes]] = []  # request line, headers, body
        self.key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
        self.public = self.key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    def serve_json(self, method: str, path: str, document, status: int = 200) -> None:
        self.pages[(method, path)] = (status, json.dumps(document).encode())

    def serve_survey(self, definition: dict) -> None:
        """Survey S, signed with this server's key, open."""
        survey = dataclasses.replace(parse_definition(definition), survey_id="S",
                                     key_id=key_id(self.public))
        manifest = survey.manifest_bytes()
        self.serve_json("GET", "/api/key", {"public_key": base64.b64encode(self.public).decode()})
        self.pages[("GET", "/api/surveys/S")] = (200, manifest)
        self.pages[("GET", "/api/surveys/S/manifest.sig")] = (200, self.key.sign(manifest))
        self.serve_json("GET", "/api/surveys/S/status", {"status": "open"})

    def handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, method):
                if method != "GET":
                    body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                    server.posts.append((self.requestline, str(self.headers), body))
                status, body = server.pages.get((method, self.path.split("?")[0]),
                                                (404, b'{"error": "not_found", "detail": ""}'))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self.answer("GET")

            def do_POST(self):
                self.answer("POST")

        return Handler


@pytest.fixture
def evil(monkeypatch, tmp_path):
    monkeypatch.setenv("LDP_SURVEY_KEY", "any-key")
    monkeypatch.setenv("LDP_SURVEY_CLIENT_DIR", str(tmp_path / "respondent"))
    server = EvilServer()
    with serving(server.handler()) as server.url:
        yield server


def run(*args):
    result = CliRunner().invoke(main, list(args))
    assert_clean(result.stdout)
    assert_clean(result.stderr)
    return result


def test_survey_list_prints_no_terminal_control(evil):
    evil.serve_json("GET", "/api/surveys", {"surveys": [{
        "survey_id": "S", "title": HOSTILE, "status": "open\x1b[8m", "created": "2026-01-01",
        "n": 3, "pending": 0, "invitation_only": False}]})
    result = run("survey", "list", "--url", evil.url)
    assert result.exit_code == 0, result.output
    assert VISIBLE in result.stdout and "open" in result.stdout
    as_json = run("survey", "list", "--url", evil.url, "--json")
    assert json.loads(as_json.stdout)["surveys"][0]["title"] == VISIBLE


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_results_print_no_terminal_control(evil, client, auth):
    """A real estimates document with hostile title, option labels and warnings."""
    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    document = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    document["title"] = HOSTILE
    for question in document["questions"]:
        question["id"] += "\u202e"
        for option in question["options"]:
            option["option"] = HOSTILE
            option["warning"] = "\x1b]8;;https://evil.example/\x07read me\x1b]8;;\x07"
    evil.serve_json("GET", "/api/surveys/S/estimates", document)
    result = run("results", "--url", evil.url, "--survey", "S")
    assert result.exit_code == 0, result.output
    assert VISIBLE in result.stdout and "read me" in result.stdout


@pytest.mark.parametrize("command", [
    ("survey", "list"), ("survey", "close", "S", "--yes"), ("survey", "tokens", "S", "--count", "1"),
    ("results", "--survey", "S"), ("results", "--survey", "S", "--csv")])
def test_error_details_print_no_terminal_control(evil, command):
    error = {"error": "bad\x1b[2J", "detail": HOSTILE}
    for method, path in [("GET", "/api/surveys"), ("POST", "/api/surveys/S/close"),
                         ("POST", "/api/surveys/S/tokens"), ("GET", "/api/surveys/S/estimates"),
                         ("GET", "/api/surveys/S/export.csv")]:
        evil.serve_json(method, path, error, status=422)
    result = run(*command, "--url", evil.url)
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"ldp-survey: error: the server refused the content of the "
                                     f"request: {VISIBLE}")


EXPORT = (f"# manifest: {{\"title\": \"{HOSTILE}\"}}\nsmoked,sleep\n1,\u202e2\n0,1\n"
          ).encode()


def test_an_export_to_a_terminal_prints_no_terminal_control(evil):
    """On a terminal (a pseudo-terminal here) the export is cleaned, its lines kept."""
    evil.pages[("GET", "/api/surveys/S/export.csv")] = (200, EXPORT)
    controller, terminal = os.openpty()
    tty.setraw(terminal)  # no "\r\n" for "\n": the bytes as the program wrote them
    with subprocess.Popen([sys.executable, "-m", "ldpsurvey.cli", "results", "--url", evil.url,
                           "--survey", "S", "--csv"], stdout=terminal,
                          stderr=subprocess.PIPE) as process:
        os.close(terminal)
        shown = b""
        while True:
            try:
                piece = os.read(controller, 65536)
            except OSError:  # EIO: the program closed the terminal
                break
            if not piece:
                break
            shown += piece
        assert process.wait() == 0, process.stderr.read()
    os.close(controller)
    assert shown.decode() == f"# manifest: {{\"title\": \"{VISIBLE}\"}}\nsmoked,sleep\n1,2\n0,1\n"


def test_an_export_into_a_pipe_is_the_exact_bytes(evil):
    evil.pages[("GET", "/api/surveys/S/export.csv")] = (200, EXPORT)
    result = CliRunner().invoke(main, ["results", "--url", evil.url, "--survey", "S", "--csv"])
    assert result.exit_code == 0 and result.stdout_bytes == EXPORT


def sneaky_survey():
    return {"title": SNEAKY, "description": f"First line {SNEAKY}\nsecond line",
            "release_batch": 1, "questions": [
                {"id": "q", "text": f"Question {SNEAKY}?", "type": "choice",
                 "options": [f"a {SNEAKY}", "b"], "alpha": 0.3}]}


def respond(evil, *extra):
    return run("respond", "--url", evil.url, "--survey", "S", "--answers", "q=1",
               "--max-lifetime-epsilon", "100", *extra)


def test_respond_shows_a_signed_survey_without_invisible_text(evil):
    evil.serve_survey(sneaky_survey())
    result = respond(evil, "--yes")
    assert result.exit_code == 1  # the evil server posts 404
    out = result.stdout
    assert f"\n{SNEAKY_VISIBLE}\nFirst line {SNEAKY_VISIBLE}\nsecond line\n" in out
    assert f"[q] Question {SNEAKY_VISIBLE}?" in out and f"0) a {SNEAKY_VISIBLE}  1) b" in out
    privacy = run("privacy")
    assert privacy.exit_code == 0 and SNEAKY_VISIBLE in privacy.stdout


def test_respond_error_details_print_no_terminal_control(evil):
    evil.serve_survey(sneaky_survey())
    evil.serve_json("POST", "/api/surveys/S/responses", {"error": "x", "detail": HOSTILE}, 422)
    result = respond(evil, "--yes")
    assert result.exit_code == 1
    assert result.stderr.strip() == ("ldp-survey: error: not sent: the server refused the "
                                     f"content of the request: {VISIBLE}")


# --- the size of a response on the wire ---------------------------------------------------

# Option indices from 0 to 11 (one digit or two), a yes/no question, three options.
WIDE = {"title": "Sizes", "release_batch": 1, "questions": [
    {"id": "many", "text": "Which month?", "type": "choice",
     "options": [f"month {i}" for i in range(12)], "alpha": 0.3},
    {"id": "yn", "text": "Yes?", "type": "yes_no", "alpha": 0.5},
    {"id": "three", "text": "Which?", "type": "choice", "options": ["a", "b", "c"], "alpha": 0.5}]}


def test_every_response_the_client_sends_has_one_size(evil, tmp_path):
    """Every possible randomized response, each with its own idempotency key and invitation
    token: the whole request (line, headers, body) has one length, the body one padded size."""
    evil.serve_survey(WIDE)
    evil.serve_json("POST", "/api/surveys/S/responses", {"survey_id": "S", "accepted": 1}, 201)
    state = LocalState(tmp_path / "state.json")
    verified = fetch_survey(evil.url, "S", state, Ceilings(10.0, 100.0, 1000.0))
    ids = [q.id for q in verified.survey.questions]
    every = list(itertools.product(range(12), range(2), range(3)))
    for answers in every:
        submit(verified, Submission("S", dict(zip(ids, answers, strict=True)),
                                    secrets.token_urlsafe(24), False), state,
               token=secrets.token_urlsafe(16))
    assert len(evil.posts) == len(every) == 72
    assert len({len(line) + len(headers) + len(body) for line, headers, body in evil.posts}) == 1
    assert {len(body) for _, _, body in evil.posts} == {256}
    for answers, (_, _, body) in zip(every, evil.posts, strict=True):
        document = body.rstrip(b" ")
        assert json.loads(document) == {"answers": dict(zip(ids, answers, strict=True))}
        assert b"\n" not in body and len(document) < 256


def test_the_aggregator_takes_padding_of_whitespace_only(client, auth, survey_id):
    """The padded body is the same document; anything but whitespace after it is refused."""
    body = json.dumps({"answers": {"smoked": 1, "drove": 0, "sleep": 2}})
    url = f"/api/surveys/{survey_id}/responses"
    for padding, status in [(" " * 1000, 201), (" " * 100 + "x", 400), (" " * 100 + "{}", 400),
                            (" " * 100 + "\x00", 400)]:
        response = client.post(url, data=body + padding,
                               headers={"Content-Type": "application/json"})
        assert response.status_code == status, response.json
    assert release_due(client.application) == 1
    estimates = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    assert estimates["questions"][0]["n"] == 1  # the padded one, stored once


def test_a_body_longer_than_its_padded_size_is_refused_and_no_size_pads_nothing():
    from ldpsurvey.client import http

    with pytest.raises(ValueError, match="does not fit the padded size 256"):
        http.padded(b"x" * 257, 256)
    assert http.padded(b"{}", 0) == b"{}"
    assert http.padded(b"{}", 256) == b"{}" + b" " * 254


def test_the_largest_survey_pads_below_the_servers_limit_for_one_response():
    """100 questions of 64 options with 40-character ids: padded, still far below 64 KiB."""
    from ldpsurvey.aggregator.config.settings import DEFAULTS
    from ldpsurvey.client.respondent import body_size
    from ldpsurvey.shared.survey.manifest import MAX_OPTIONS, MAX_QUESTIONS

    largest = parse_definition({"title": "t", "questions": [
        {"id": f"q{i:039d}", "text": "?", "type": "choice",
         "options": [str(j) for j in range(MAX_OPTIONS)], "epsilon": 1.0}
        for i in range(MAX_QUESTIONS)]})
    assert body_size(largest) % 256 == 0
    assert body_size(largest) <= DEFAULTS["MAX_RESPONSE_BYTES"] // 8
