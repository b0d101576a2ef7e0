"""`ldp-survey serve --public`: gunicorn behind Debian's Caddy with HTTPS, run on loopback with
Caddy's own CA (`--tls internal`), answered by `ldp-survey respond` and by headless Chromium
trusting that CA; and `ldp-survey deploy systemd`, the same setup as a systemd service."""

import contextlib
import csv
import http.client
import json
import os
import re
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from ldpsurvey.cli import main
from ldpsurvey.cli.public_site import Site, caddyfile, checked_site

from helpers import SYSTEMD_SANDBOX, doc_blocks, require, unit_settings
from processes import free_port, response_head

CADDY = shutil.which("caddy") or "/usr/bin/caddy"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CERTUTIL = shutil.which("certutil") or "/usr/bin/certutil"
HEALTH = resources.files("ldpsurvey.shared") / "examples" / "health.toml"
ANSWERS = "smoked=yes,drank_and_drove=no,cannabis=n,sleep=6 to 8"
LDP = [sys.executable, "-m", "ldpsurvey.cli"]


def require_caddy() -> None:
    require(Path(CADDY).exists(), "Caddy is not installed (apt-get install caddy)")


@dataclass
class Public:
    """A running `serve --public localhost --tls internal`."""

    process: subprocess.Popen
    base: str  # https://localhost:PORT
    plain: str  # http://localhost:PORT
    instance: Path
    home: Path  # the $HOME it ran with
    stdout: Path
    stderr: Path

    @property
    def root(self) -> Path:
        return self.instance / "caddy" / "caddy" / "pki" / "authorities" / "local" / "root.crt"

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.root)

    def log(self) -> str:
        return self.stdout.read_text() + self.stderr.read_text()


def environment(home: Path, **extra: str) -> dict[str, str]:
    """This environment without LDP_SURVEY_* settings, with `home` as $HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LDP_SURVEY_", "SSL_CERT"))}
    return {**env, "HOME": str(home), **extra}


def start_public(folder: Path, command: list[str] | None = None,
                 env: dict[str, str] | None = None,
                 ports: tuple[int, int] | None = None) -> Public:
    """`serve --public localhost --tls internal` on two free ports (or `command`, which names
    them as {https} and {http}, or uses `ports`), in a session of its own, as a terminal would
    run it; returns once it printed its addresses."""
    https, http = ports or (free_port(), free_port())
    command = command or [*LDP, "serve", "--public", "localhost", "--tls", "internal",
                          "--https-port", "{https}", "--http-port", "{http}",
                          "--instance", str(folder / "instance")]
    command = [part.format(https=https, http=http) for part in command]
    home = folder / "home"
    home.mkdir(exist_ok=True)
    stdout, stderr = folder / "stdout.txt", folder / "stderr.txt"
    with open(stdout, "w") as out, open(stderr, "w") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, cwd=folder,
                                   env=env or environment(home), start_new_session=True)
    deadline = time.monotonic() + 90
    while "dashboard:" not in stdout.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            stop_public(process)
            pytest.fail(f"serve --public did not start:\n{stderr.read_text()}")
        time.sleep(0.05)
    return Public(process, f"https://localhost:{https}", f"http://localhost:{http}",
                  folder / "instance", home, stdout, stderr)


def stop_public(process: subprocess.Popen, sig: int = signal.SIGTERM) -> int:
    if process.poll() is None:
        os.killpg(process.pid, sig)
    return process.wait(timeout=90)


def descendants(pid: int) -> set[int]:
    """Every living process below `pid` (read from /proc)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    """The pids still running (a zombie has stopped)."""
    left = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            left.add(pid)
    return left


@pytest.fixture(scope="module")
def public(tmp_path_factory):
    """One `serve --public` (SQLite in its instance folder) for the tests below."""
    require_caddy()
    running = start_public(tmp_path_factory.mktemp("public"))
    yield running
    stop_public(running.process)


def fetch(public: Public, method: str, path: str, body=None, headers=None,
          context: ssl.SSLContext | None = None):
    """(status, headers, body bytes) of an HTTPS request checked against Caddy's CA."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(public.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30,
                                    context=context or public.context()) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def cli(public: Public, *args: str, trust: bool = True, key: str | None = None,
        stdin: str | None = None) -> subprocess.CompletedProcess:
    """An `ldp-survey` command (in a folder and $HOME of its own), trusting Caddy's CA through
    SSL_CERT_FILE when `trust`."""
    home = public.instance.parent / "cli"
    home.mkdir(exist_ok=True)
    extra = {"LDP_SURVEY_CLIENT_DIR": str(home / "respondent")}
    if trust:
        extra["SSL_CERT_FILE"] = str(public.root)
    if key:
        extra["LDP_SURVEY_KEY"] = key
    return subprocess.run([*LDP, *args], capture_output=True, text=True, timeout=120,
                          input=stdin, env=environment(home, **extra), cwd=home)


@pytest.fixture(scope="module")
def researcher_key(public) -> str:
    made = cli(public, "admin", "create-key", "--instance", str(public.instance))
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


@pytest.fixture(scope="module")
def survey_id(public, researcher_key, tmp_path_factory) -> str:
    """The example survey, releasing every response at once, created over HTTPS by the CLI."""
    path = tmp_path_factory.mktemp("survey") / "health.toml"
    path.write_text("release_batch = 1\n" + HEALTH.read_text())
    created = cli(public, "survey", "create", str(path), "--url", public.base, key=researcher_key)
    assert created.returncode == 0, created.stderr
    return created.stdout.strip()


def test_it_prints_the_respondent_and_dashboard_addresses_and_answers_over_https(public):
    assert public.stdout.read_text().splitlines() == [
        f"respondents: {public.base}/s/SURVEY_ID", f"dashboard:   {public.base}/researcher"]
    assert f"SSL_CERT_FILE={public.root}" in public.stderr.read_text()
    status, headers, body = fetch(public, "GET", "/healthz")
    assert status == 200 and json.loads(body) == {"status": "ok"}
    assert headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
    assert headers["X-Frame-Options"] == "DENY" and "default-src 'self'" in \
        headers["Content-Security-Policy"]  # the app's own headers pass through
    assert headers.get_all("Server") == ["Caddy"]  # one, naming no version
    # The certificate is from Caddy's own CA, which nothing trusts by default.
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        fetch(public, "GET", "/healthz", context=ssl.create_default_context())
    status, _, page = fetch(public, "GET", "/researcher")
    assert status == 200 and b"<form" in page


def raw_response_head(url: str, raw_request: bytes) -> dict[str, str]:
    """response_head as one mapping, the status line as "status"."""
    status, fields = response_head(url, raw_request)
    return {"status": status, **dict(fields)}


def test_plain_http_is_redirected_with_the_path_as_sent_and_no_query(public):
    head = raw_response_head(public.plain, b"GET /%0d%0aSet-Cookie:%20x=1?who=secret HTTP/1.1\r\n"
                                           b"Host: localhost\r\nConnection: close\r\n\r\n")
    assert head["status"].startswith("HTTP/1.1 301"), head
    assert "set-cookie" not in head  # no header injected by a decoded CR LF
    assert head["location"] == f"{public.base}/%0d%0aSet-Cookie:%20x=1"  # the port kept
    # Only the served name is redirected; a request line in absolute form keeps its path.
    head = raw_response_head(public.plain, b"GET /s/abc HTTP/1.1\r\nHost: evil.example\r\n"
                                           b"Connection: close\r\n\r\n")
    assert head.get("location") is None  # no site by that name
    head = raw_response_head(public.plain, b"GET http://localhost/x?y HTTP/1.1\r\n"
                                           b"Host: localhost\r\nConnection: close\r\n\r\n")
    assert head["location"] == f"{public.base}/x"


def test_caddy_keeps_its_certificates_and_ca_in_the_instance_folder(public):
    caddy = public.instance / "caddy"
    assert public.root.exists()
    assert list((caddy / "caddy" / "certificates").rglob("localhost.crt"))
    assert oct(caddy.stat().st_mode & 0o777) == "0o700"
    assert list(public.home.iterdir()) == []  # nothing in $HOME (no ~/.local/share/caddy)
    # Its root CA was installed nowhere: not in the system's bundle, not in an NSS database.
    assert "trust store installation disabled" in public.stderr.read_text()
    pem = public.root.read_text().strip()
    for bundle in ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"):
        if Path(bundle).exists():
            assert pem not in Path(bundle).read_text()
    assert "skip_install_trust" in (caddy / "Caddyfile").read_text()


def test_a_survey_created_answered_and_read_over_https_by_the_cli(public, researcher_key,
                                                                   survey_id):
    status, _, manifest = fetch(public, "GET", f"/api/surveys/{survey_id}")
    assert status == 200 and public.base in manifest.decode()  # the origin signed into it
    # Without Caddy's CA the respondent's client refuses the server, and sends nothing.
    refused = cli(public, "respond", "--url", public.base, "--survey", survey_id, "--answers",
                  ANSWERS, "--yes", trust=False)
    assert refused.returncode != 0
    assert "CERTIFICATE_VERIFY_FAILED" in refused.stderr and "Traceback" not in refused.stderr
    answered = cli(public, "respond", "--url", public.base, "--survey", survey_id, "--answers",
                   ANSWERS, "--yes")
    assert answered.returncode == 0, answered.stderr
    assert "Sent." in answered.stdout
    closed = cli(public, "survey", "close", survey_id, "--yes", "--url", public.base,
                 key=researcher_key)
    assert closed.returncode == 0, closed.stderr
    results = cli(public, "results", "--url", public.base, "--survey", survey_id, "--json",
                  key=researcher_key)
    assert results.returncode == 0, results.stderr
    assert json.loads(results.stdout)["questions"][0]["n"] == 1
    # SQLite, the default: the instance folder's file holds the survey.
    assert (public.instance / "ldp-survey.sqlite3").stat().st_size > 0


def test_a_client_sent_forwarded_prefix_never_reaches_the_app(public, researcher_key):
    # gunicorn would take SCRIPT_NAME and PATH_INFO headers from Caddy (nginx drops header
    # names with underscores).
    headers = {"Authorization": f"Bearer {researcher_key}", "X-Forwarded-Prefix": "/evil",
               "SCRIPT_NAME": "/evil", "PATH_INFO": "/api/key"}
    definition = {"title": "Prefix", "invitation_only": True, "release_batch": 1, "questions": [
        {"id": "q", "text": "Q?", "type": "yes_no", "alpha": 0.5, "beta": 0.5}]}
    status, received, body = fetch(public, "POST", "/api/surveys", definition, headers)
    assert status == 201, body
    created = json.loads(body)
    assert created["manifest_url"] == received["Location"]
    assert created["manifest_url"].startswith(f"/api/surveys/{created['survey_id']}")


def tls_handshake(public: Public, version: ssl.TLSVersion, ciphers: str | None = None) -> str:
    """The suite a handshake at exactly `version` agrees on (ssl.SSLError if none)."""
    context = public.context()
    context.minimum_version = context.maximum_version = version
    if ciphers:
        context.set_ciphers(ciphers)
    address = urlsplit(public.base)
    with socket.create_connection(("127.0.0.1", address.port), timeout=10) as sock, \
            context.wrap_socket(sock, server_hostname="localhost") as tls:
        return tls.cipher()[0]


def test_tls_1_2_only_with_forward_secret_aead_suites(public):
    assert tls_handshake(public, ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-AES128-GCM-SHA256") == \
        "ECDHE-ECDSA-AES128-GCM-SHA256"
    assert tls_handshake(public, ssl.TLSVersion.TLSv1_3)
    with pytest.raises(ssl.SSLError):  # ECDHE with CBC: no forward-secret AEAD
        tls_handshake(public, ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA")


def test_a_body_above_the_apps_limit_is_cut_off_by_caddy(public, researcher_key):
    """Caddy reads at most the app's MAX_CONTENT_LENGTH (16 MiB) of a body, then cuts it off
    and closes the connection: the app never answers (no app header). The client gets Caddy's
    413; twice, in full runs of the suite (the machine loaded), it got 400 instead, from what
    was not recorded: a 400 passes only without the app's headers (gunicorn's own answer to
    the cut chunked body Caddy streamed it would be that), and a failure names what came."""
    address = urlsplit(public.base)
    connection = http.client.HTTPSConnection("localhost", address.port, timeout=30,
                                             context=public.context())
    connection.putrequest("POST", "/api/surveys")
    connection.putheader("Authorization", f"Bearer {researcher_key}")
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Transfer-Encoding", "chunked")
    connection.endheaders()
    chunk = b"x" * 2**20
    with contextlib.suppress(OSError):  # the connection is closed once the limit is passed
        for _ in range(20):
            connection.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    response = connection.getresponse()
    came = (response.status, response.getheaders(), response.read()[:200])
    assert response.status in (413, 400), came
    assert response.getheader("Content-Security-Policy") is None, came
    connection.close()


def test_a_stalled_body_is_cut_off_and_frees_the_apps_threads(public):
    """The attack: four connections each sending one byte of a 1,000-byte body held all four
    of the app's threads (Caddy streamed the body on and gunicorn waited for the rest without
    a limit): /healthz answered nothing until the attacker let go. Caddy now closes a body
    unread after READ_BODY_SECONDS, and the app answers /healthz then (this waits for that,
    with a client timeout far above it; it measures no speed)."""
    from ldpsurvey.cli.public_site import READ_BODY_SECONDS

    address = urlsplit(public.base)
    stalled = []
    for _ in range(5):  # more than the app's threads (serve --public: 4)
        sock = public.context().wrap_socket(
            socket.create_connection(("127.0.0.1", address.port), timeout=4 * READ_BODY_SECONDS),
            server_hostname="localhost")
        sock.sendall(b"POST /api/surveys/nope/responses HTTP/1.1\r\nHost: localhost\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
        stalled.append(sock)
    try:
        for sock in stalled:  # each is answered or closed; a timeout here fails the test
            sock.recv(1024)
        status, _, _ = fetch(public, "GET", "/healthz")
        assert status == 200
    finally:
        for sock in stalled:
            sock.close()


def test_an_over_long_request_line_is_refused_in_json_through_caddy(public):
    """A request line over gunicorn's bound (limit_request_line) reaches gunicorn through
    Caddy and is refused in the app's JSON with its headers (serving.refusal), not gunicorn's
    HTML page; one just under the bound reaches the app."""
    from ldpsurvey.aggregator.web.gunicorn import limit_request_line
    from ldpsurvey.aggregator.web.security import HEADERS

    for length, status, error in ((limit_request_line + 50, 414, "request_line_too_long"),
                                  (limit_request_line - 50, 404, "unknown_survey")):
        pad = "x" * (length - len("GET /api/surveys/nope?pad= HTTP/1.1"))
        got, headers, body = fetch(public, "GET", f"/api/surveys/nope?pad={pad}")
        assert (got, json.loads(body)["error"]) == (status, error)
        assert headers["Content-Type"] == "application/json"
        for name, value in HEADERS.items():
            assert headers[name] == value, name


def test_no_log_line_for_responses_nor_any_client_address(public, survey_id):
    """Responses (single and batch) and failures (a broken TLS handshake, a malformed request,
    a refused upload) leave no line for the responses endpoints, no client address and no
    query string in what gunicorn and Caddy write."""
    before = len(public.log())
    for path in (f"/api/surveys/{survey_id}/responses?q=secret-query",
                 f"/api/surveys/{survey_id}/responses/batch"):
        fetch(public, "POST", path, {"answers": {"smoked": 1}}, {"Idempotency-Key": "k" * 20})
    fetch(public, "GET", "/healthz?who=secret-query")
    fetch(public, "GET", "/nope?who=secret-query")
    with socket.create_connection(("127.0.0.1", urlsplit(public.base).port), timeout=10) as sock:
        sock.sendall(b"\x16\x03\x01\x00\x05hello, not TLS\r\n\r\n")
        sock.recv(100)
    with socket.create_connection(("127.0.0.1", urlsplit(public.plain).port), timeout=10) as sock:
        sock.sendall(b"GET /x HTTP/1.1 and more\r\n\r\n")
        sock.recv(100)
    time.sleep(1.0)  # lines are written as requests finish
    written = public.log()[before:]
    assert '"GET /healthz" 200' in written  # other requests are logged, by gunicorn
    assert "/responses" not in written and "secret-query" not in written
    assert not re.search(r"127\.0\.0\.1|\[::1\]|::1|remote_ip|client_ip", written), written


def test_the_browser_answers_over_https_with_caddys_ca_trusted(public, researcher_key,
                                                                tmp_path):
    """Headless Chromium (Debian's) trusting Caddy's root CA (imported into the NSS database
    of a $HOME of its own, as a user would) answers the form at the printed address."""
    require(Path(CHROMIUM).exists(), "Chromium is not installed (apt-get install chromium)")
    require(Path(CERTUTIL).exists(), "certutil is not installed (apt-get install libnss3-tools)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "playwright is not installed (pip install 'ldp-survey[test]')")
    database = f"sql:{tmp_path / '.pki' / 'nssdb'}"
    (tmp_path / ".pki" / "nssdb").mkdir(parents=True)
    subprocess.run([CERTUTIL, "-d", database, "-N", "--empty-password"], check=True)
    subprocess.run([CERTUTIL, "-d", database, "-A", "-t", "C,,", "-n", "caddy-local",
                    "-i", str(public.root)], check=True)
    definition = {"title": "In the browser", "release_batch": 1, "questions": [
        {"id": "smoked", "text": "Smoked?", "type": "yes_no", "alpha": 0.5, "beta": 0.5}]}
    status, _, body = fetch(public, "POST", "/api/surveys", definition,
                            {"Authorization": f"Bearer {researcher_key}"})
    assert status == 201, body
    survey_id = json.loads(body)["survey_id"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, env={**os.environ, "HOME": str(tmp_path)},
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update"])
        try:
            page = browser.new_page()
            failures = []
            page.on("requestfailed", lambda request: failures.append(request.url))
            address = public.stdout.read_text().split()[1].replace("SURVEY_ID", survey_id)
            page.goto(address)
            page.wait_for_selector("#questions:not([hidden])")
            page.locator('fieldset[data-question="smoked"] label', has_text="Yes").click()
            page.click("#review")
            page.wait_for_selector("#true-review:not([hidden])")
            page.click("#randomize")
            page.wait_for_selector("#confirm:not([hidden])")
            page.click("#send")
            page.wait_for_selector("#thanks:not([hidden])")
            assert page.evaluate("location.protocol") == "https:" and failures == []
        finally:
            browser.close()
    auth = {"Authorization": f"Bearer {researcher_key}"}
    assert fetch(public, "POST", f"/api/surveys/{survey_id}/close", headers=auth)[0] == 200
    status, _, body = fetch(public, "GET", f"/api/surveys/{survey_id}/estimates", headers=auth)
    assert status == 200 and json.loads(body)["questions"][0]["n"] == 1  # released at close


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_and_sigterm_stop_gunicorn_and_caddy_leaving_nothing_running(tmp_path, sig):
    """Ctrl-C (SIGINT to the terminal's whole process group) or SIGTERM: both servers stop,
    serve exits 0, and no process of theirs and no socket folder is left."""
    require_caddy()
    running = start_public(tmp_path)
    children = descendants(running.process.pid)
    names = {Path(f"/proc/{pid}/comm").read_text().strip() for pid in children}
    assert "caddy" in names and len(children) >= 3, names  # Caddy, gunicorn and its worker
    socket_folder = re.search(r"unix:(\S+)/gunicorn\.sock", running.stderr.read_text()).group(1)
    assert Path(socket_folder).is_dir()
    assert stop_public(running.process, sig) == 0
    assert alive(children) == set()
    assert not Path(socket_folder).exists()
    log = running.stderr.read_text()
    assert "stopping Caddy and gunicorn" in log and "Traceback" not in log
    assert log.index("shutdown complete") < log.index("Shutting down: Master")  # Caddy first


def test_a_killed_serve_leaves_no_server_behind(tmp_path):
    """Even SIGKILL, which serve cannot handle: its children get SIGTERM from the kernel."""
    require_caddy()
    running = start_public(tmp_path)
    children = descendants(running.process.pid)
    running.process.kill()
    running.process.wait()
    deadline = time.monotonic() + 40
    while alive(children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive(children) == set()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_serve_public_on_postgresql(tmp_path, database_url):
    require_caddy()
    import psycopg

    running = start_public(tmp_path, [
        *LDP, "serve", "--public", "localhost", "--tls", "internal", "--https-port", "{https}",
        "--http-port", "{http}", "--instance", str(tmp_path / "instance"),
        "--database", database_url])
    try:
        assert "(database: 127.0.0.1:5432/test?" in running.stderr.read_text()  # no user
        made = cli(running, "admin", "create-key", "--database", database_url, "--instance",
                   str(running.instance))
        assert made.returncode == 0, made.stderr
        status, _, body = fetch(running, "POST", "/api/surveys", {
            "title": "On PostgreSQL", "questions": [
                {"id": "q", "text": "Q?", "type": "yes_no", "alpha": 0.5, "beta": 0.5}]},
            {"Authorization": f"Bearer {made.stdout.strip()}"})
        assert status == 201, body
        # as the hint on stderr says: the instance folder knows its database (database-url)
        hinted = cli(running, "admin", "create-key", "--instance", str(running.instance))
        assert hinted.returncode == 0 and "database: 127.0.0.1:5432/test?" in hinted.stderr
        assert fetch(running, "GET", "/api/surveys", headers={
            "Authorization": f"Bearer {hinted.stdout.strip()}"})[0] == 200
    finally:
        stop_public(running.process)
    schema = re.search(r"search_path%3D(\w+)", database_url).group(1)
    with psycopg.connect(database_url.split("?")[0]) as connection:
        manifests = [m for (m,) in connection.execute(f"SELECT manifest FROM {schema}.surveys")]
    assert len(manifests) == 1 and "On PostgreSQL" in manifests[0]
    assert not (tmp_path / "instance" / "ldp-survey.sqlite3").exists()


# The options, without starting anything.

@pytest.mark.parametrize("args, message", [
    (["--https-port", "8443"], "--https-port need --public HOSTNAME"),
    (["--http-port", "8080", "--tls", "internal"], "--http-port and --tls need --public"),
    (["--public", "localhost", "--tls", "internal", "--port", "9000"],
     "--port set the development server's address"),
    (["--public", "localhost", "--tls", "internal", "--host", "0.0.0.0"], "--host set"),
    (["--public", "https://survey.example.org"], "is not a host name"),
    (["--public", "survey.example.org:8443"], "is not a host name"),
    (["--public", "localhost"], "--tls internal for Caddy's own CA"),
    (["--public", "127.0.0.1"], "no public certificate authority certifies 127.0.0.1"),
    (["--public", "intranet"], "no public certificate authority certifies intranet"),
    (["--public", "survey.home.arpa"], "no public certificate authority certifies survey.home"),
    (["--public", "survey.example.org", "--https-port", "8000", "--http-port", "8000"],
     "are both 8000"),
])
def test_options_that_do_not_fit_are_refused_in_one_line(args, message, tmp_path):
    result = CliRunner().invoke(main, ["serve", "--instance", str(tmp_path / "i"), *args])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "i").exists()  # nothing started, nothing created


def test_without_caddy_serve_public_names_the_package(tmp_path):
    result = CliRunner(env={"PATH": str(tmp_path)}).invoke(
        main, ["serve", "--public", "localhost", "--tls", "internal",
               "--instance", str(tmp_path / "i")])
    assert result.exit_code == 1
    assert "Caddy is not installed (apt-get install caddy)" in result.stderr


def test_a_production_refusal_is_one_line_before_anything_starts(tmp_path):
    """serve --public runs in production mode: a signing key others can read is refused (the
    development server only warns), before gunicorn or Caddy start."""
    require_caddy()
    from ldpsurvey.aggregator.config.signing import write_key_file

    (tmp_path / "i").mkdir(mode=0o700)
    write_key_file(tmp_path / "i" / "signing-key.pem")
    (tmp_path / "i" / "signing-key.pem").chmod(0o644)
    result = CliRunner().invoke(main, ["serve", "--public", "localhost", "--tls", "internal",
                                       "--instance", str(tmp_path / "i")])
    assert result.exit_code == 1
    assert "signing-key.pem" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "i" / "caddy").exists()


def adapted(site: Site, tmp_path) -> dict:
    """The Caddyfile written for `site`, as Caddy itself reads it (caddy adapt)."""
    require_caddy()
    path = tmp_path / "Caddyfile"
    path.write_text(caddyfile(site, tmp_path / "g.sock", tmp_path / "data", 16 * 2**20))
    proc = subprocess.run([CADDY, "adapt", "--config", str(path), "--validate"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ["PATH"], "HOME": str(tmp_path),
                               "XDG_DATA_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_tls_acme_by_default_and_caddys_own_ca_with_tls_internal(tmp_path):
    public = adapted(checked_site("survey.example.org", 443, 80, "acme"), tmp_path)
    assert "automation" not in json.dumps(public.get("apps", {}).get("tls", {}))  # ACME
    internal = adapted(checked_site("survey.example.org", 443, 80, "internal"), tmp_path)
    policies = internal["apps"]["tls"]["automation"]["policies"]
    assert [issuer["module"] for p in policies for issuer in p["issuers"]] == ["internal"]
    for config in (public, internal):
        assert config["apps"]["pki"]["certificate_authorities"]["local"]["install_trust"] is False
        assert config["storage"] == {"module": "file_system", "root": str(tmp_path / "data")}
        assert config["admin"] == {"disabled": True}


def test_a_loopback_name_listens_on_loopback_only_and_a_public_one_everywhere(tmp_path):
    servers = adapted(checked_site("localhost", 8443, 8080, "internal"), tmp_path)["apps"][
        "http"]["servers"]
    assert {tuple(s["listen"]) for s in servers.values()} == {
        ("127.0.0.1:8443", "[::1]:8443"), ("127.0.0.1:8080", "[::1]:8080")}
    servers = adapted(checked_site("survey.example.org", 443, 80, "acme"), tmp_path)["apps"][
        "http"]["servers"]
    assert {tuple(s["listen"]) for s in servers.values()} == {(":443",), (":80",)}


def test_the_origin_names_the_https_port_unless_it_is_443():
    assert checked_site("Survey.Example.org.", 443, 80, "acme").origin == \
        "https://survey.example.org"
    assert checked_site("survey.example.org", 8443, 80, "acme").origin == \
        "https://survey.example.org:8443"


# deploy systemd

def assert_systemd_accepts(path: Path) -> None:
    """systemd-analyze verify, where it exists, finds nothing, not even a warning (an unknown
    key is only a warning); else the parse of unit_settings is all."""
    analyze = shutil.which("systemd-analyze")
    if analyze:
        proc = subprocess.run([analyze, "verify", str(path)], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def unit(tmp_path, *args: str) -> Path:
    result = CliRunner().invoke(main, ["deploy", "systemd", *args])
    assert result.exit_code == 0, result.output
    path = tmp_path / "ldp-survey-public.service"
    path.write_text(result.stdout)
    return path


@pytest.mark.parametrize("args, capabilities", [
    (["survey.example.org"], "CAP_NET_BIND_SERVICE"),
    (["localhost", "--https-port", "8443", "--http-port", "8080", "--tls", "internal"], ""),
])
def test_deploy_systemd_writes_a_sandboxed_unit_systemd_accepts(tmp_path, args, capabilities):
    """Checked by systemd-analyze verify where it exists (no warning at all), else parsed;
    the capability to listen below port 1024 only where a port needs it."""
    require_caddy()
    path = unit(tmp_path, *args)
    service = unit_settings(path)["Service"]
    for key, value in {"User": "ldp-survey", "StateDirectory": "ldp-survey", "KillMode": "mixed",
                       "CapabilityBoundingSet": capabilities,
                       "AmbientCapabilities": capabilities, **SYSTEMD_SANDBOX}.items():
        assert service.get(key) == [value], (key, service.get(key))
    command = shlex.split(service["ExecStart"][0])
    assert command[:5] == [sys.executable, "-m", "ldpsurvey.cli", "serve", "--public"]
    assert command[5:] == args
    assert_systemd_accepts(path)


def test_the_units_command_runs_the_same_setup(tmp_path):
    """The unit's ExecStart with its Environment= lines (the instance folder moved to a test
    folder) serves over HTTPS and stops on the unit's KillSignal."""
    require_caddy()
    ports = free_port(), free_port()
    path = unit(tmp_path, "localhost", "--tls", "internal", "--https-port", str(ports[0]),
                "--http-port", str(ports[1]))
    service = unit_settings(path)["Service"]
    env = dict(line.split("=", 1) for line in service["Environment"])
    env["LDP_SURVEY_INSTANCE"] = str(tmp_path / "instance")
    home = tmp_path / "home"
    home.mkdir()
    running = start_public(tmp_path, shlex.split(service["ExecStart"][0]),
                           env=environment(home, **env), ports=ports)
    try:
        assert fetch(running, "GET", "/healthz")[0] == 200
        assert (tmp_path / "instance" / "ldp-survey.sqlite3").exists()
    finally:
        assert stop_public(running.process, getattr(signal, service["KillSignal"][0])) == 0


@pytest.mark.parametrize("python, setting", [
    ("/home/alice/venv/bin/python", "ProtectHome"), ("/root/venv/bin/python", "ProtectHome"),
    ("/tmp/venv/bin/python", "PrivateTmp"), ("/var/tmp/venv/bin/python", "PrivateTmp")])
def test_deploy_systemd_refuses_an_installation_the_sandbox_hides(monkeypatch, python, setting):
    monkeypatch.setattr(sys, "executable", python)
    result = CliRunner().invoke(main, ["deploy", "systemd", "survey.example.org"])
    assert result.exit_code == 1 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert setting in result.stderr and "/opt/ldp-survey/venv" in result.stderr


def test_deploy_systemd_refuses_a_caddy_the_sandbox_hides(monkeypatch, tmp_path):
    caddy = Path("/tmp") / tmp_path.name / "caddy"
    monkeypatch.setattr(shutil, "which", lambda name: str(caddy))
    result = CliRunner().invoke(main, ["deploy", "systemd", "survey.example.org"])
    assert result.exit_code == 1 and "PrivateTmp" in result.stderr and str(caddy) in result.stderr


@pytest.mark.parametrize("args, expected", [
    ([], {"MemoryMax": "1G", "TasksMax": "512", "CPUQuota": "200%"}),
    (["--memory-max", "512M", "--tasks-max", "64", "--cpu-quota", "50%"],
     {"MemoryMax": "512M", "TasksMax": "64", "CPUQuota": "50%"}),
    (["--memory-max", "infinity", "--cpu-quota", "400%"],
     {"MemoryMax": "infinity", "TasksMax": "512", "CPUQuota": "400%"}),
])
def test_deploy_systemd_bounds_memory_tasks_and_cpu(tmp_path, args, expected):
    require_caddy()
    path = unit(tmp_path, "survey.example.org", *args)
    service = unit_settings(path)["Service"]
    assert {key: service[key] for key in expected} == {k: [v] for k, v in expected.items()}
    assert_systemd_accepts(path)


@pytest.mark.parametrize("args, option", [
    (["--memory-max", "lots"], "--memory-max"), (["--memory-max", "0"], "--memory-max"),
    (["--cpu-quota", "2"], "--cpu-quota"), (["--cpu-quota", "0%"], "--cpu-quota"),
    (["--tasks-max", "3"], "--tasks-max")])
def test_deploy_systemd_refuses_resources_it_cannot_write(args, option):
    result = CliRunner().invoke(main, ["deploy", "systemd", "survey.example.org", *args])
    assert result.exit_code == 2 and result.stdout == "" and option in result.stderr


def test_the_unit_says_to_back_up_the_database_and_its_storage_key_apart(tmp_path):
    require_caddy()
    text = unit(tmp_path, "survey.example.org").read_text()
    assert "never /var/lib/ldp-survey as a whole" in text
    assert "/var/lib/ldp-survey/ldp-survey.sqlite3 \".backup FILE\"" in text
    assert "/var/lib/ldp-survey/storage-key" in text


def test_a_caddy_that_does_not_answer_with_its_own_ca_is_restarted_twice(tmp_path, monkeypatch):
    """start_caddy's way around Caddy 2.6 deleting its first certificate while writing it:
    shown with a real Caddy whose answers are checked against a CA that does not exist, so
    that it never answers: two quick restarts, then the full wait, then one clear error and
    nothing left running."""
    require_caddy()
    from ldpsurvey.cli import public_site as public

    monkeypatch.setattr(public, "FIRST_CERTIFICATE_SECONDS", 0.5)
    monkeypatch.setattr(public, "START_SECONDS", 1.0)
    site = checked_site("localhost", free_port(), free_port(), "internal")
    storage, env = public.caddy_folders(tmp_path)
    config = tmp_path / "caddy" / "Caddyfile"
    config.write_text(caddyfile(site, tmp_path / "g.sock", storage, 2**20))
    running: list[subprocess.Popen] = []
    starts = []
    real_popen = subprocess.Popen

    def counted(*args, **kwargs):
        starts.append(args[0])
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(public.subprocess, "Popen", counted)
    with pytest.raises(public.NotReady, match="Caddy did not start within 1 s"):
        public.start_caddy([CADDY, "run", "--config", str(config), "--adapter", "caddyfile"],
                           site, tmp_path / "no-such-ca", running, env={**os.environ, **env},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert len(starts) == 3 and len(running) == 1
    assert running[0].poll() is None  # the last one is the caller's to stop
    public.stop(running[0])
    # With ACME there is no quick restart: one start, the full wait (the same Caddy, checked
    # at a port where nothing listens).
    starts.clear()
    running.clear()
    acme = Site("survey.example.org", free_port(), free_port(), "acme")
    with pytest.raises(public.NotReady, match="within 1 s"):
        public.start_caddy([CADDY, "run", "--config", str(config), "--adapter", "caddyfile"],
                           acme, storage, running, env={**os.environ, **env},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert len(starts) == 1
    public.stop(running[0])


def test_the_readmes_serve_public_commands_run(tmp_path):
    """The block README and docs/deployment.md show: its local command serves over HTTPS (on
    free ports instead of 8443 and 8080), its unit command writes a unit systemd accepts, for
    the public command's name."""
    require_caddy()
    (block,) = set(doc_blocks("serve-public-example"))  # README's and the deployment page's
    public_command, local, unit_command = block.splitlines()
    hostname = shlex.split(public_command)[3]
    assert shlex.split(public_command) == ["ldp-survey", "serve", "--public", hostname]
    assert f"deploy systemd {hostname} >" in unit_command
    ports = free_port(), free_port()
    command = shlex.split(local.replace("8443", str(ports[0])).replace("8080", str(ports[1])))
    assert command[0] == "ldp-survey"
    running = start_public(tmp_path, [*LDP, *command[1:]], ports=ports)
    try:
        assert running.instance == tmp_path / "instance"  # the default, ./instance
        assert fetch(running, "GET", "/healthz")[0] == 200
    finally:
        assert stop_public(running.process) == 0
    bin_folder = Path(sys.executable).parent
    subprocess.run(["bash", "-c", unit_command], cwd=tmp_path, check=True, timeout=60,
                   env={**os.environ, "PATH": f"{bin_folder}:{os.environ['PATH']}"})
    written = tmp_path / unit_command.rsplit(">", 1)[1].strip()
    assert f"--public {hostname}" in unit_settings(written)["Service"]["ExecStart"][0]
    assert_systemd_accepts(written)


def test_the_readmes_first_survey_runs_over_https(tmp_path):
    """README's "Your first real survey" on loopback, as written, in one folder: the starter
    (`survey init`), the local `serve --public` command (on free ports instead of 8443 and
    8080), then its commands block run by bash: a key, a draft, publish, the QR code, an answer
    by `ldp-survey respond` over HTTPS (typed at its prompts), list, close, the results, the
    cross-tab and the export with its codebook."""
    require_caddy()
    (serve_block,) = set(doc_blocks("serve-public-example"))
    (block,) = doc_blocks("first-survey-commands")
    assert "https://localhost:8443" in block
    ports = free_port(), free_port()
    local = serve_block.splitlines()[1].replace("8443", str(ports[0])).replace("8080",
                                                                              str(ports[1]))
    bin_folder = Path(sys.executable).parent
    subprocess.run([bin_folder / "ldp-survey", "survey", "init", "survey.toml"], cwd=tmp_path,
                   check=True, timeout=60, capture_output=True)
    running = start_public(tmp_path, [*LDP, *shlex.split(local)[1:]], ports=ports)
    try:
        script = block.replace("https://localhost:8443", running.base)
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path,
                              input="yes\n6 to 8\n\n\n", capture_output=True, text=True,
                              timeout=600, env=environment(
                                  running.home, PATH=f"{bin_folder}:{os.environ['PATH']}"))
    finally:
        assert stop_public(running.process) == 0
    assert done.returncode == 0, done.stdout + done.stderr
    survey_id = json.loads((tmp_path / "survey-codebook.json").read_text())["survey_id"]
    assert f"respondents answer at {running.base}/s/{survey_id}" in done.stderr
    assert (tmp_path / "flyer.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    assert "Send it? [Y/n]: Sent. Thank you." in done.stdout  # respond, over https
    assert re.search(rf"{survey_id} +Sleep and exercise +open +\S+ +0 ", done.stdout)  # pending
    rows = list(csv.reader((tmp_path / "survey.csv").open(newline="")))
    assert rows[0] == ["exercised", "sleep"] and len(rows) == 2  # the one answer, released
    assert "Sleep and exercise (closed)" in done.stdout  # the results' heading
    assert "exercised (rows) by sleep (columns), n = 1" in done.stdout


def test_a_taken_port_stops_everything_with_caddys_reason(tmp_path):
    require_caddy()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    home = tmp_path / "home"
    home.mkdir()
    try:
        proc = subprocess.run([*LDP, "serve", "--public", "localhost", "--tls", "internal",
                               "--https-port", str(port), "--http-port", str(free_port()),
                               "--instance", str(tmp_path / "instance")],
                              capture_output=True, text=True, timeout=120,
                              env=environment(home))
    finally:
        taken.close()
    assert proc.returncode == 1
    assert "address already in use" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == \
        "ldp-survey: error: Caddy stopped (exit 1); its log is above"
    assert "Shutting down: Master" in proc.stderr  # gunicorn stopped too
    assert proc.stdout == ""  # no address printed for a service that is not there


def test_a_forged_forwarded_address_escapes_no_rate_limit(tmp_path):
    """Caddy sets X-Forwarded-For itself, and the app (one proxy hop in production) counts by
    the address Caddy saw: a client naming other addresses is still one client."""
    require_caddy()
    home = tmp_path / "home"
    home.mkdir()
    running = start_public(tmp_path, env=environment(
        home, LDP_SURVEY_RATE_LIMIT_OTHER="3 per minute"))
    try:
        statuses = [fetch(running, "GET", "/api/key",
                          headers={"X-Forwarded-For": f"203.0.113.{n}",
                                   "X-Real-IP": f"203.0.113.{n}", "Forwarded": f"for=203.0.113.{n}"}
                          )[0] for n in range(6)]
    finally:
        stop_public(running.process)
    assert statuses == [200] * 3 + [429] * 3
