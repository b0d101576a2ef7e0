"""Respondents' submissions, POST /api/surveys/<id>/responses, served without Flask's
per-request machinery. It is the one endpoint every respondent calls, and Flask's request
context, routing, hooks and Response objects cost it as much again as the intake itself
(bench/HISTORY.md, "What one request costs the CPU").

A WSGI middleware in front of the Flask app answers this path; every other path goes to Flask.
It sits inside ProxyFix, so REMOTE_ADDR is the client's. What it does comes from where the
Flask endpoints get it:
- the submit class's rate limit (limits.hit);
- the body, read strictly under MAX_RESPONSE_BYTES (http.parse_json_body);
- the Idempotency-Key header (http) and the Survey-Token header, a header and never a URL, so
  it cannot reach an access log (intake checks it against the survey);
- the intake service (intake.accept_one);
- errors in the API's shape, from errors.py's table;
- the security headers and Served-By (security.response_headers);
- the 201's body (http.accepted_reply).

A browser's request from a page elsewhere follows the Fetch standard's CORS protocol (cors.py):
a preflight (OPTIONS with Origin and Access-Control-Request-Method), counted in the "other"
class, is allowed for the survey's form_origins (manifest /9) only; a POST names its page's
Origin, which intake checks (403 origin_not_allowed, nothing stored), and intake's answer to a
listed origin, error or not, carries Access-Control-Allow-Origin so the page can read it (an
answer given before the survey is read, a 429 say, does not: deciding would read the database
for a request no limit has counted, and the form takes any unreadable answer as "try again").

Other methods on the path are answered as Flask answers them: 405 with Allow, OPTIONS with
its Allow. Doubled slashes in it are merged, where Flask redirected to the merged path: no
Location to build from a header a proxy forwards (X-Forwarded-Prefix).
"""

import re
from collections.abc import Callable, Iterable
from http import HTTPStatus

from flask import Flask
from werkzeug.http import parse_options_header
from werkzeug.wsgi import get_content_length, get_input_stream

from ldpsurvey.aggregator.services import intake, surveys
from ldpsurvey.aggregator.store.connection import Connection
from ldpsurvey.aggregator.web import cors, errors, limits, security
from ldpsurvey.aggregator.web.parsing import (
    accepted_reply,
    checked_idempotency_key,
    parse_json_body,
)
from ldpsurvey.aggregator.web.serving import MERGED_SLASHES

PATH = re.compile(r"/api/surveys/([^/]+)/responses")
ALLOW = "OPTIONS, POST"
NOT_ALLOWED = "The method is not allowed for the requested URL."  # werkzeug's, as Flask says it

Reply = tuple[int, bytes, list[tuple[str, str]]]  # status, body, headers
STATUS_LINES = {status.value: f"{status.value} {status.phrase.upper()}" for status in HTTPStatus}


class Submissions:
    """The middleware: this path's requests to `submit`, the rest to the Flask app's own
    WSGI callable (`flask_wsgi`)."""

    def __init__(self, app: Flask, flask_wsgi: Callable):
        self.app, self.flask_wsgi = app, flask_wsgi
        self.headers = security.response_headers(app.config)  # as security.init_app reads it

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        found = PATH.fullmatch(MERGED_SLASHES.sub("/", environ.get("PATH_INFO", "")))
        if found is None:
            return self.flask_wsgi(environ, start_response)
        method = environ.get("REQUEST_METHOD", "GET").upper()  # as werkzeug has it
        status, body, headers = self.answer(environ, method, found.group(1))
        if method == "HEAD":
            body = b""
        start_response(STATUS_LINES[status],
                       [*headers, *self.headers, ("Content-Length", str(len(body)))])
        return [body]

    def answer(self, environ: dict, method: str, survey_id: str) -> Reply:
        """This path's answer to the request's method, with the CORS headers of a page at one
        of the survey's form_origins."""
        survey_id = survey_id.encode("latin-1").decode("utf-8", "replace")
        origin = environ.get("HTTP_ORIGIN")
        if method == "OPTIONS" and origin and "HTTP_ACCESS_CONTROL_REQUEST_METHOD" in environ:
            return self.preflight(environ, survey_id, origin)
        if method == "POST":
            (status, body, headers), readable = self.submit(environ, survey_id, origin)
            if readable:
                headers = [*headers, *cors.response_headers(origin)]
            return status, body, [*headers, *cors.VARY]
        if method == "OPTIONS":
            return 200, b"", [("Allow", ALLOW)]
        status, body, headers = self.error(405, "method_not_allowed", NOT_ALLOWED)
        return status, body, [*headers, ("Allow", ALLOW)]

    def preflight(self, environ: dict, survey_id: str, origin: str) -> Reply:
        """A browser asking whether a page at `origin` may post here: yes (204, cors.py) for
        one of the survey's form_origins, else the plain OPTIONS answer, which the browser
        takes as no. Counted in the "other" class (a preflight reads the survey)."""
        try:
            limits.hit(self.app, "other", environ.get("REMOTE_ADDR") or "")
        except Exception as exc:
            status, code, detail = errors.api_error(exc, self.app.logger)
            status, body, headers = self.error(status, code, detail)
            return status, body, [*headers, *errors.error_headers(exc), *cors.VARY]
        if self.hosts_form(survey_id, origin):
            return 204, b"", [("Allow", ALLOW), *cors.preflight_headers(origin), *cors.VARY]
        return 200, b"", [("Allow", ALLOW), *cors.VARY]

    def hosts_form(self, survey_id: str, origin: str) -> bool:
        """listed, on a connection of its own (a preflight's)."""
        database = self.app.extensions["ldp_database"]
        try:
            db = database.connect()
        except Exception:
            return False  # no database: the request's own answer says so
        try:
            return listed(db, survey_id, origin)
        finally:
            database.release(db)

    def submit(self, environ: dict, survey_id: str, origin: str | None) -> tuple[Reply, bool]:
        """One respondent's randomized answers, as the API documents them, from a page at
        `origin` (a browser's Origin header; none from other clients); and whether that page
        may read the answer: intake's answer (after this request was counted; the survey it
        read is kept in memory, so asking costs no second query) to a page at one of the
        survey's form_origins."""
        database, limit = self.app.extensions["ldp_database"], self.app.config["MAX_RESPONSE_BYTES"]
        readable = False
        try:
            limits.hit(self.app, "submit", environ.get("REMOTE_ADDR") or "")
            length = get_content_length(environ)
            body = parse_json_body(
                parse_options_header(environ.get("CONTENT_TYPE", ""))[0].lower(), length,
                lambda: read_body(environ, length, limit, self.app.config["MAX_CONTENT_LENGTH"]),
                limit)
            key = checked_idempotency_key(environ.get("HTTP_IDEMPOTENCY_KEY"))
            db = database.connect()
            try:
                result = intake.accept_one(db, survey_id, body, key,
                                           environ.get("HTTP_SURVEY_TOKEN"), origin)
            finally:
                readable = origin is not None and listed(db, survey_id, origin)
                database.release(db)
        except Exception as exc:
            status, code, detail = errors.api_error(exc, self.app.logger)
            status, body, headers = self.error(status, code, detail)
            return (status, body, [*headers, *errors.error_headers(exc)]), readable
        reply, headers = accepted_reply(result)
        return (201, reply, [("Content-Type", "application/json"), *headers]), readable

    @staticmethod
    def error(status: int, code: str, detail: str) -> Reply:
        return status, errors.error_json(code, detail), [("Content-Type", "application/json")]


def listed(db: Connection, survey_id: str, origin: str) -> bool:
    """surveys.hosts_form, False if it fails: whether a page may read an answer never decides
    the answer itself (nor keeps a connection from going back)."""
    try:
        return surveys.hosts_form(db, survey_id, origin)
    except Exception:
        return False


def read_body(environ: dict, length: int | None, limit: int,
              max_content_length: int | None) -> bytes:
    """The body, as Flask reads it (werkzeug's get_input_stream): all of its Content-Length
    `length` (already checked against `limit`; a client that sends less gets 400, as one that
    disconnects), or a chunked body the server has ended, to at most `limit` + 1 bytes (one
    more tells it is too large); over MAX_CONTENT_LENGTH 413; a body with neither reads
    empty."""
    stream = get_input_stream(environ, safe_fallback=True,
                              max_content_length=max_content_length)
    return stream.read(limit + 1) if length is None else stream.read()


def init_app(app: Flask) -> None:
    """Serve submissions ahead of the Flask app (before ProxyFix wraps both)."""
    app.wsgi_app = Submissions(app, app.wsgi_app)
