"""A development/embedded HTTP server whose request log holds no client address and no query
string (production uses gunicorn with the access-log format in deploy/)."""

import logging

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler
from werkzeug.serving import make_server as werkzeug_make_server

logger = logging.getLogger("ldpsurvey.aggregator.requests")


class PrivateRequestHandler(WSGIRequestHandler):
    """Logs '"METHOD /path" status' only: no address, no query string, no precise time."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        self.log("info", '"%s %s" %s', self.command, self.path.split("?", 1)[0], code)

    def log(self, type: str, message: str, *args) -> None:
        getattr(logger, type)(message, *args)


def make_server(app, host: str, port: int) -> BaseWSGIServer:
    """A threaded server for `app`; port 0 picks a free one (see .server_port)."""
    return werkzeug_make_server(host, port, app, threaded=True,
                                request_handler=PrivateRequestHandler)
