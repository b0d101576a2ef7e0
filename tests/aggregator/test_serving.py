"""What a server refuses before the app sees a request (serving.refusal): an over-long request
line or a malformed one, sent for real to `ldp-survey serve` (werkzeug) and to gunicorn with
the shipped config, is answered in JSON with the app's headers, and neither writes the
client's address or port anywhere."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ldpsurvey.aggregator.web.gunicorn import limit_request_line
from ldpsurvey.aggregator.web.security import HEADERS
from ldpsurvey.aggregator.web.serving import REQUEST_LINE_LIMIT

from processes import free_port, kill, production, start_gunicorn, wait_until_up

LDP = [sys.executable, "-m", "ldpsurvey.cli"]


def exchange(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes, int]:
    """(status, header fields, body, the client's own port) of a request sent byte for byte
    from a socket of its own."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        own_port = sock.getsockname()[1]
        sock.sendall(raw)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    fields = {name.strip().lower(): value.strip()
              for name, _, value in (line.partition(":") for line in lines)}
    return int(status.split()[1]), fields, body, own_port


def line_of(length: int) -> bytes:
    """A GET whose request line is `length` bytes, most of them its query string."""
    start, end = b"GET /api/surveys/nope?pad=", b" HTTP/1.1"
    return start + b"x" * (length - len(start) - len(end)) + end + \
        b"\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


def assert_refused(answer, status: int, error: str) -> None:
    got, fields, body, _ = answer
    assert got == status, (got, body[:200])
    assert fields["content-type"] == "application/json"
    assert json.loads(body)["error"] == error
    for name, value in HEADERS.items():
        assert fields[name.lower()] == value, name


def requests_and_ports(port: int, limit: int) -> list[int]:
    """Over-long, malformed, with too many header fields (over gunicorn's 50 and
    http.server's 100) and just-long-enough requests; returns the client ports used."""
    fields = b"".join(b"X-Field-%d: 1\r\n" % n for n in range(120))
    answers = [exchange(port, line_of(limit + 100)), exchange(port, line_of(limit + 1)),
               exchange(port, b"GET /x HTTP/1.1 and more\r\n\r\n"),
               exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + fields + b"\r\n"),
               exchange(port, line_of(limit - 2))]
    for answer in answers[:2]:
        assert_refused(answer, 414, "request_line_too_long")
        assert f"({limit} bytes)" in json.loads(answer[2])["detail"]
    assert_refused(answers[2], 400, "malformed_request")
    assert_refused(answers[3], 431, "header_fields_too_large")
    assert_refused(answers[4], 404, "unknown_survey")  # the app's own answer: it fits
    return [answer[3] for answer in answers]


def assert_private(log: str, ports: list[int], own: str) -> None:
    text = log.replace(own, "")
    assert "127.0.0.1" not in text, text
    for port in ports:
        assert str(port) not in text, (port, text)


def test_the_development_server_answers_in_json_and_logs_no_client(tmp_path):
    port = free_port()
    stderr = tmp_path / "stderr.txt"
    with open(stderr, "w") as err:
        server = subprocess.Popen([*LDP, "serve", "--port", str(port), "--instance",
                                   str(tmp_path / "instance")], stdout=err, stderr=err,
                                  start_new_session=True)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/healthz")
        ports = requests_and_ports(port, REQUEST_LINE_LIMIT)
    finally:
        kill(server)
    log = stderr.read_text()
    assert '"- -" 414' in log and '"GET /api/surveys/nope" 404' in log
    assert_private(log, ports, f"http://127.0.0.1:{port}")


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_gunicorn_answers_in_json_and_logs_no_client(tmp_path, database_url):
    env, _, app = production(tmp_path, database_url)
    port = free_port()
    log = tmp_path / "gunicorn.log"
    server = start_gunicorn(env, port, log, workers=1)
    chunked = (b"POST /api/surveys/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\nabc\r\n0\r\n\r\n")
    try:
        ports = requests_and_ports(port, limit_request_line)
        # A body gunicorn cannot read as sent (bad chunking) was a 500 with a traceback; a
        # malformed line's text (a token in its query, say) reached the log.
        for path in (b"nope/responses",):
            assert_refused(exchange(port, chunked.replace(b"%s", path)),
                           400, "invalid_json")
        assert_refused(exchange(port, b"GET /s/x?t=SECRET-TOKEN HTTP/1.1 and more\r\n\r\n"),
                       400, "malformed_request")
    finally:
        kill(server)
        from ldpsurvey.aggregator import close_app

        close_app(app)
    text = log.read_text()
    assert text.count("Invalid request") == 5, text
    assert "SECRET-TOKEN" not in text and "Traceback" not in text, text
    assert_private(text, ports, f"Listening at: http://127.0.0.1:{port}")


def test_the_limits_are_the_ones_documented():
    deployment = (Path(__file__).resolve().parents[2] / "docs" / "deployment.md").read_text()
    assert f"{limit_request_line:,} bytes" in deployment
    assert f"{REQUEST_LINE_LIMIT:,} bytes" in deployment
