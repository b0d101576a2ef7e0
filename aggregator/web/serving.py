"""A development/embedded HTTP server whose request log holds no client address, no query
string and no line for an accepted response (production uses gunicorn with deploy/'s config,
which skips the same requests); and the answer both servers give a request they refuse to
parse, JSON with the app's headers as the app's own errors."""

import json
import logging
import re
from http import HTTPStatus
from urllib.parse import unquote, urlsplit

from werkzeug.serving import BaseWSGIServer, ThreadedWSGIServer, WSGIRequestHandler

from ldpsurvey.aggregator.web.security import response_headers

logger = logging.getLogger("ldpsurvey.aggregator.requests")

# Where responses arrive. A log line per request there would time-stamp every response and,
# line by line, give the order in which they arrived: no shipped component writes one.
RESPONSES_PATH = re.compile(r"/api/surveys/[^/]+/responses(/batch)?/?")
MERGED_SLASHES = re.compile(r"/{2,}")  # doubled slashes reach the same endpoint (merged)


def logged(path: str) -> bool:
    """Whether a request for `path` (without query string, as sent: percent-encoded, maybe
    with doubled slashes, which reach the same endpoint) may have an access-log line."""
    return not RESPONSES_PATH.fullmatch(MERGED_SLASHES.sub("/", unquote(path)))


# What a server refuses before the app sees the request: {status: (error code, detail)}.
REFUSALS = {
    400: ("malformed_request", "the request is not well-formed HTTP/1.1"),
    414: ("request_line_too_long", "the request line (method, path and query string) is "
                                   "longer than this server takes ({limit} bytes)"),
    431: ("header_fields_too_large", "the request's header fields are too many or too long"),
}


def refusal(status: int, config, limit: int) -> bytes:
    """The whole HTTP/1.1 response refusing a request the server could not parse (REFUSALS;
    another status in 400's words, `limit` the request line's bound): {"error", "detail"}
    with the app's security headers, and the connection closed."""
    code, detail = REFUSALS.get(status, REFUSALS[400])
    body = json.dumps({"error": code, "detail": detail.format(limit=limit)}).encode()
    fields = [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
              ("Connection", "close"), *response_headers(config)]
    head = "".join(f"{name}: {value}\r\n" for name, value in fields)
    return (f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n{head}\r\n".encode("latin-1")
            + body)


REQUEST_LINE_LIMIT = 65536  # http.server's bound, over which it answers 414


class PrivateRequestHandler(WSGIRequestHandler):
    """Logs '"METHOD /path" status' only: no address, no query string, no precise time, and
    nothing for requests to the responses endpoints; refuses what it cannot parse with
    `refusal`, never http.server's HTML page."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if not getattr(self, "path", None):  # refused before a path was read
            self.log("info", '"%s -" %s', self.command or "-", code)
            return
        path = urlsplit(self.path).path  # as werkzeug routes it: no query, fragment or host
        if logged(path):
            self.log("info", '"%s %s" %s', self.command, path, code)

    def log(self, type: str, message: str, *args) -> None:
        getattr(logger, type)(message, *args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None
                   ) -> None:
        """http.server's refusals (a request line over REQUEST_LINE_LIMIT: 414; a malformed
        one: 400; too many header fields: 431), as the app's JSON errors are."""
        self.close_connection = True
        self.log_request(code)
        self.wfile.write(refusal(code, self.server.app.config, REQUEST_LINE_LIMIT))


class PrivateServer(ThreadedWSGIServer):
    """werkzeug's threaded server, logging an exception while handling a connection without
    the client's address (socketserver would print it to stderr)."""

    def handle_error(self, request, client_address) -> None:
        logger.exception("error handling a request")


def make_server(app, host: str, port: int) -> BaseWSGIServer:
    """A threaded server for `app`; port 0 picks a free one (see .server_port)."""
    return PrivateServer(host, port, app, handler=PrivateRequestHandler)
