"""Security headers, cookies, the reverse proxy and the production gunicorn configuration."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from helpers import SURVEY, SYSTEMD_SANDBOX, unit_settings

ROOT = Path(__file__).resolve().parents[2]


def assert_hardened(response):
    csp = response.headers["Content-Security-Policy"]
    for directive in ("default-src 'self'", "form-action 'self'", "frame-ancestors 'none'"):
        assert directive in csp
    assert "http" not in csp  # no third-party origin
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    # No results or pages in any cache (static files may be kept, but revalidated)
    expected = "no-cache" if response.request.path.startswith("/static/") else "no-store"
    assert response.headers["Cache-Control"] == expected


def test_headers_on_every_kind_of_response(client, auth, survey_id):
    for response in (client.get("/healthz"), client.get("/api/key"),
                     client.get(f"/api/surveys/{survey_id}"),
                     client.get(f"/api/surveys/{survey_id}/manifest.sig"),
                     client.get("/api/surveys/nope"), client.delete("/api/key"),
                     client.post("/api/surveys", json=SURVEY),
                     client.post(f"/api/surveys/{survey_id}/responses", data="x",
                                 content_type="application/json"),
                     client.get("/static/style.css")):
        assert_hardened(response)
        assert "Set-Cookie" not in response.headers


def test_a_security_header_the_view_set_is_kept_and_not_doubled(app):
    """add_headers adds each of HEADERS only where the response lacks it, in any case."""
    from flask import Response

    from ldpsurvey.aggregator.web.security import HEADERS, add_headers

    response = add_headers(Response("x", headers={"cache-control": "no-cache"}))
    assert response.headers.getlist("Cache-Control") == ["no-cache"]
    for name, value in HEADERS.items():
        if name != "Cache-Control":
            assert response.headers.getlist(name) == [value]


def test_the_session_is_read_from_its_cookie_and_only_then_signed(app, monkeypatch):
    """A request without the session cookie gets an empty session without the signer being
    built, and without a Cookie header its cookies are not even parsed; one with a cookie the
    app signed gets its contents; a forged one, an empty one."""
    from flask import Request, request
    from flask.sessions import SecureCookieSessionInterface

    interface = app.session_interface
    signed = interface.get_signing_serializer(app).dumps({"csrf": "t"})
    name = app.config["SESSION_COOKIE_NAME"]
    for cookie, expected in ((signed, {"csrf": "t"}), (signed[:-2] + "xx", {})):
        with app.test_request_context(headers={"Cookie": f"{name}={cookie}"}):
            assert dict(interface.open_session(app, request)) == expected

    def refuse(*_args):
        raise AssertionError("the signer was built for a request without a cookie")

    monkeypatch.setattr(SecureCookieSessionInterface, "get_signing_serializer", refuse)
    with app.test_request_context(headers={"Cookie": "other=1"}):
        session = interface.open_session(app, request)
    assert dict(session) == {} and not session.modified

    def unparsed(_request):
        raise AssertionError("the cookies of a request without a Cookie header were parsed")

    monkeypatch.setattr(Request, "cookies", property(unparsed))
    with app.test_request_context():
        session = interface.open_session(app, request)
    assert dict(session) == {} and not session.modified


def test_without_a_secret_key_the_session_is_flasks_null_session():
    """CookieSessions defers to Flask where there is no key to sign with: None, which Flask
    turns into a session that refuses writes, rather than one that fails after the view."""
    from flask import Flask, request

    from ldpsurvey.aggregator.web.security import CookieSessions

    app = Flask(__name__)
    with app.test_request_context():
        assert CookieSessions().open_session(app, request) is None


def test_session_cookie_settings(app):
    assert app.config["SESSION_COOKIE_HTTPONLY"] is True
    assert app.config["SESSION_COOKIE_SAMESITE"] == "Strict"
    assert app.config["SESSION_COOKIE_SECURE"] is False  # development; production: True


def production_app(tmp_path, database_url, **extra):
    from ldpsurvey.aggregator import create_app
    from ldpsurvey.aggregator.config.signing import write_key_file

    key_file = tmp_path / "key.pem"
    write_key_file(key_file)
    return create_app({"DEPLOYMENT": "production", "KEY_FILE": str(key_file),
                       "SECRET_KEY": "s" * 64, "STORAGE_KEY": "k" * 64,
                       "DATABASE_URL": database_url, "PUBLIC_URL": "https://survey.example.org",
                       **extra},
                      instance_path=tmp_path / "i")


def test_production_cookie_is_secure_and_one_proxy_is_trusted(tmp_path, database_url):
    from ldpsurvey.aggregator import close_app, create_api_key

    app = production_app(tmp_path, database_url)
    assert app.config["SESSION_COOKIE_SECURE"] is True
    key = create_api_key(app).key
    client = app.test_client()
    headers = {"Authorization": f"Bearer {key}"}
    survey_id = client.post("/api/surveys", json={**SURVEY, "invitation_only": True},
                            headers=headers).json["survey_id"]
    response = client.post(f"/api/surveys/{survey_id}/tokens", json={"count": 1},
                           headers={**headers, "X-Forwarded-Proto": "https",
                                    "X-Forwarded-Host": "survey.example.org"})
    assert response.json["links"][0].startswith(f"https://survey.example.org/s/{survey_id}#t=")
    close_app(app)


def test_body_limit(app, client, auth, survey_id):
    app.config["MAX_CONTENT_LENGTH"] = 1000
    response = client.post(f"/api/surveys/{survey_id}/responses/batch", data="x" * 2000,
                           content_type="application/json", headers=auth)
    assert response.status_code == 413 and response.json["error"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_gunicorn_production_config_logs_no_address_or_query(tmp_path):
    from ldpsurvey.aggregator.config.signing import write_key_file

    gunicorn = shutil.which("gunicorn", path=os.path.dirname(sys.executable))
    assert gunicorn, "gunicorn comes with the server extra"
    key_file = tmp_path / "key.pem"
    write_key_file(key_file)
    port = free_port()
    env = {**os.environ, "LDP_SURVEY_KEY_FILE": str(key_file), "LDP_SURVEY_SECRET_KEY": "x" * 64,
           "LDP_SURVEY_STORAGE_KEY": "k" * 64,
           "LDP_SURVEY_DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
           "LDP_SURVEY_PUBLIC_URL": "https://survey.example.org",
           "LDP_SURVEY_BIND": f"127.0.0.1:{port}", "LDP_SURVEY_WORKERS": "1"}
    log = tmp_path / "gunicorn.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([gunicorn, "-c", str(ROOT / "deploy" / "gunicorn.conf.py")],
                                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        url = f"http://127.0.0.1:{port}/healthz?secret-query=42"
        for _ in range(100):
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    assert response.status == 200
                    assert response.headers["Referrer-Policy"] == "no-referrer"
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail(f"gunicorn did not start: {log.read_text()}")
        for path in ("/api/surveys/nope/responses", "/api/surveys/nope/responses/batch"):
            post = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=b"{}",
                                          headers={"Content-Type": "application/json"})
            with pytest.raises(urllib.error.HTTPError):
                urllib.request.urlopen(post, timeout=5)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    text = log.read_text()
    assert '"GET /healthz" 200' in text
    assert "secret-query" not in text and "127.0.0.1 " not in text.replace(
        f"127.0.0.1:{port}", "")
    assert "/responses" not in text  # no line where responses arrive


def test_gunicorn_logs_no_client_address_and_opens_no_control_socket(tmp_path):
    """gunicorn logs an invalid request at warning level as 'Invalid request from ip=...':
    the shipped logger drops the address; and no control socket (gunicorn >= 25.1) is
    opened where $XDG_RUNTIME_DIR or $HOME would put it."""
    from ldpsurvey.aggregator.config.signing import write_key_file

    gunicorn = shutil.which("gunicorn", path=os.path.dirname(sys.executable))
    key_file = tmp_path / "key.pem"
    write_key_file(key_file)
    (tmp_path / "run").mkdir()
    (tmp_path / "home").mkdir()
    port = free_port()
    env = {**os.environ, "LDP_SURVEY_KEY_FILE": str(key_file), "LDP_SURVEY_SECRET_KEY": "x" * 64,
           "LDP_SURVEY_STORAGE_KEY": "k" * 64,
           "LDP_SURVEY_DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
           "LDP_SURVEY_PUBLIC_URL": "https://survey.example.org",
           "LDP_SURVEY_BIND": f"127.0.0.1:{port}", "LDP_SURVEY_WORKERS": "1",
           "XDG_RUNTIME_DIR": str(tmp_path / "run"), "HOME": str(tmp_path / "home")}
    log = tmp_path / "gunicorn.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([gunicorn, "-c", str(ROOT / "deploy" / "gunicorn.conf.py")],
                                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail(f"gunicorn did not start: {log.read_text()}")
        for malformed in (b"GET /x HTTP/1.1 and more\r\n\r\n", b"\x16\x03\x01\x02\x00 x\r\n\r\n"):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(malformed)
                assert sock.recv(4096).startswith(b"HTTP/1.1 400")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    text = log.read_text()
    assert text.count("Invalid request") == 2  # still logged, without the address
    assert "127.0.0.1" not in text.replace(f"Listening at: http://127.0.0.1:{port}", ""), text
    assert "Control socket" not in text  # "Control socket listening at $XDG_RUNTIME_DIR/..."


def test_gunicorn_log_filter_removes_any_address():
    import logging
    import runpy

    config = runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    for message in ("Invalid request from ip=203.0.113.9: Invalid HTTP Version",
                    "Invalid request from ip=2001:db8::7: Invalid HTTP Version",
                    "Invalid request from ip=::ffff:203.0.113.9: bad",
                    "peer [2001:db8:0:0:1::7]:443 and 203.0.113.9:80 and fe80::1%eth0 left"):
        record = logging.LogRecord("gunicorn.error", logging.WARNING, __file__, 1, message,
                                   None, None)
        assert config["without_addresses"](record)
        scrubbed = record.getMessage()
        for address in ("203", "113", "2001:db8", "::7", "fe80", "ip="):
            assert address not in scrubbed, scrubbed
        assert "Invalid HTTP Version" in scrubbed or "bad" in scrubbed or "left" in scrubbed
    record = logging.LogRecord("gunicorn.error", logging.INFO, __file__, 1, "%s at %s", (
        "Error handling request", "12:30:45"), None)
    assert config["without_addresses"](record) and record.getMessage() == \
        "Error handling request at 12:30:45"  # a time is no address


def test_the_development_server_logs_no_line_for_responses(app, client, survey_id, caplog):
    """`ldp-survey serve` and the mock's embedded server: other requests get a line."""
    import http.client
    import logging
    import threading

    from ldpsurvey.aggregator.web.serving import make_server

    server = make_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01})
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        with caplog.at_level(logging.INFO, logger="ldpsurvey.aggregator.requests"):
            body = json.dumps({"answers": {"smoked": 1, "drove": 0, "sleep": 2}}).encode()
            post = urllib.request.Request(f"{base}/api/surveys/{survey_id}/responses", data=body,
                                          headers={"Content-Type": "application/json"})
            assert urllib.request.urlopen(post, timeout=5).status == 201
            # spelled as werkzeug still routes it there: absolute form, a fragment
            for target in (f"http://x/api/surveys/{survey_id}/responses",
                           f"/api/surveys/{survey_id}/responses#fragment"):
                connection = http.client.HTTPConnection("127.0.0.1", server.server_port,
                                                        timeout=5)
                connection.request("POST", target, body,
                                   {"Content-Type": "application/json"})
                assert connection.getresponse().status == 201
                connection.close()
            urllib.request.urlopen(f"{base}/api/surveys/{survey_id}/status?x=1", timeout=5)
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
    lines = [record.getMessage() for record in caplog.records]
    assert lines == [f'"GET /api/surveys/{survey_id}/status" 200']


def test_gunicorn_refuses_production_without_key(tmp_path):
    gunicorn = shutil.which("gunicorn", path=os.path.dirname(sys.executable))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_SURVEY_")}
    env["LDP_SURVEY_BIND"] = f"127.0.0.1:{free_port()}"
    env["LDP_SURVEY_WORKERS"] = "1"
    proc = subprocess.run([gunicorn, "-c", str(ROOT / "deploy" / "gunicorn.conf.py")], env=env,
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode != 0
    assert "LDP_SURVEY_KEY_FILE" in proc.stdout + proc.stderr


def test_respondent_pages_set_no_cookies(client, survey_id):
    for path in (f"/s/{survey_id}", "/web/form.js", "/web/randomizer.js", "/s/unknown",
                 "/static/style.css"):
        response = client.get(path)
        assert response.status_code in (200, 404)
        assert "Set-Cookie" not in response.headers, path
        assert_hardened(response)


def test_systemd_unit_keeps_its_sandbox():
    service = unit_settings(ROOT / "deploy" / "ldp-survey.service")["Service"]
    expected = {"User": "ldp-survey", "CapabilityBoundingSet": "", **SYSTEMD_SANDBOX}
    for key, value in expected.items():
        assert service.get(key) == [value], (key, service.get(key))


@pytest.mark.parametrize("name", ["ldp-survey.service", "docker-compose.yml", "gunicorn.conf.py"])
def test_each_deploy_file_names_every_setting_production_requires(name, tmp_path):
    """Production refuses to start without these (settings.validate); a deploy file that left
    one out would ship a service that cannot start. Checked against the real refusal: each
    setting left out of an otherwise complete production configuration stops the app."""
    from ldpsurvey.aggregator import ConfigurationError, create_app
    from ldpsurvey.aggregator.config.signing import write_key_file

    write_key_file(tmp_path / "key.pem")
    required = {"KEY_FILE": str(tmp_path / "key.pem"), "SECRET_KEY": "s" * 64,
                "STORAGE_KEY": "k" * 64, "PUBLIC_URL": "https://survey.example.org"}
    for setting in required:
        with pytest.raises(ConfigurationError, match=setting):
            create_app({"DEPLOYMENT": "production",
                        "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
                        **{k: v for k, v in required.items() if k != setting}},
                       instance_path=tmp_path / "i")
    text = (ROOT / "deploy" / name).read_text()
    assert [s for s in required if f"LDP_SURVEY_{s}" not in text] == []
