"""A development/embedded HTTP server whose request log holds no client address, no query
string and no line for an accepted response (production uses gunicorn with deploy/'s config,
which skips the same requests)."""

import logging
import re
from urllib.parse import unquote, urlsplit

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler
from werkzeug.serving import make_server as werkzeug_make_server

logger = logging.getLogger("ldpsurvey.aggregator.requests")

# Where responses arrive. A log line per request there would time-stamp every response and,
# line by line, give the order in which they arrived: no shipped component writes one.
RESPONSES_PATH = re.compile(r"/api/surveys/[^/]+/responses(/batch)?/?")
MERGED_SLASHES = re.compile(r"/{2,}")  # doubled slashes reach the same endpoint (merged)


def logged(path: str) -> bool:
    """Whether a request for `path` (without query string, as sent: percent-encoded, maybe
    with doubled slashes, which reach the same endpoint) may have an access-log line."""
    return not RESPONSES_PATH.fullmatch(MERGED_SLASHES.sub("/", unquote(path)))


class PrivateRequestHandler(WSGIRequestHandler):
    """Logs '"METHOD /path" status' only: no address, no query string, no precise time, and
    nothing for requests to the responses endpoints."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        path = urlsplit(self.path).path  # as werkzeug routes it: no query, fragment or host
        if logged(path):
            self.log("info", '"%s %s" %s', self.command, path, code)

    def log(self, type: str, message: str, *args) -> None:
        getattr(logger, type)(message, *args)


def make_server(app, host: str, port: int) -> BaseWSGIServer:
    """A threaded server for `app`; port 0 picks a free one (see .server_port)."""
    return werkzeug_make_server(host, port, app, threaded=True,
                                request_handler=PrivateRequestHandler)
