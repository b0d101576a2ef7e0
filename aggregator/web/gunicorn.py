"""gunicorn settings for running the aggregator in production, installed with the package:
`gunicorn -c python:ldpsurvey.aggregator.web.gunicorn` (deploy/gunicorn.conf.py is this
module; `ldp-survey serve --public` runs gunicorn with it behind Caddy).

The app refuses to start without LDP_SURVEY_KEY_FILE, LDP_SURVEY_SECRET_KEY,
LDP_SURVEY_STORAGE_KEY and LDP_SURVEY_PUBLIC_URL (every replica must serve the same signing
key). The access log holds method, path without query string, status, size and duration: no
client address, no query string, no user agent, no referrer; and no line at all for the
responses endpoints (journald would time-stamp each, in arrival order). The error log holds no
client address either (gunicorn names one when it refuses a malformed request).
"""

import ipaddress
import logging
import multiprocessing
import os
import re

from gunicorn import util
from gunicorn.errors import AppImportError
from gunicorn.glogging import Logger
from gunicorn.http import errors
from gunicorn.workers.gthread import ThreadWorker

from ldpsurvey.aggregator.web.serving import logged, refusal

wsgi_app = "ldpsurvey.aggregator.web.gunicorn:checked_app()"
raw_env = ["LDP_SURVEY_DEPLOYMENT=production"]

bind = os.environ.get("LDP_SURVEY_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("LDP_SURVEY_WORKERS", 2 * multiprocessing.cpu_count() + 1))
threads = int(os.environ.get("LDP_SURVEY_THREADS", 4))
timeout = 30
graceful_timeout = 30
keepalive = 5

# Behind exactly one reverse proxy on this host (the app's ProxyFix trusts one hop).
forwarded_allow_ips = os.environ.get("LDP_SURVEY_PROXY_IPS", "127.0.0.1")

# gunicorn's largest bound (0 would be none at all): twice its default, for long estimates
# queries (weights); a longer line is answered 414 in JSON (Worker, below).
limit_request_line = 8190
limit_request_fields = 50
limit_request_field_size = 8190

accesslog = "-"
access_log_format = '"%(m)s %(U)s" %(s)s %(B)s %(M)sms'


# The control socket (gunicorn >= 25.1: gunicornc, under $XDG_RUNTIME_DIR or $HOME) would let
# anyone running as this user change the worker count or stop the server: systemd does that.
control_socket_disable = True

# gunicorn's own line for a malformed request, at warning level: "Invalid request from
# ip=ADDRESS: error".
_FROM_IP = re.compile(r" from ip=\S*?(?=: )")
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.])")
_IPV6_LIKE = re.compile(r"[0-9A-Fa-f]*(?::[0-9A-Fa-f]*){2,}(?:\.\d{1,3}){0,3}(?:%[\w.-]+)?")
_BIND = "Listening at: "  # the arbiter's own addresses, from `bind`, not a client's


def _ipv6(match: re.Match) -> str:
    text = match.group()
    trimmed = text.rstrip(":")  # "::1:" in "ip=::1: error"
    try:
        ipaddress.IPv6Address(trimmed)
    except ValueError:
        return text  # e.g. a time, 12:30:45
    return "[address]" + text[len(trimmed):]


def without_addresses(record: logging.LogRecord) -> bool:
    """A filter on gunicorn's error log: every IP address in the message and in a traceback
    replaced by [address], the "from ip=..." of a malformed request's line removed."""
    message = record.getMessage()
    if not message.startswith(_BIND):
        message = _IPV4.sub("[address]", _IPV6_LIKE.sub(_ipv6, _FROM_IP.sub("", message)))
    record.msg, record.args = message, ()
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = _IPV4.sub("[address]", _IPV6_LIKE.sub(_ipv6, record.exc_text))
    return True


class PrivateLogger(Logger):
    """gunicorn's logger without access-log lines for the responses endpoints, and without any
    client address in the error log (at any level)."""

    def setup(self, cfg):
        super().setup(cfg)
        self.error_log.addFilter(without_addresses)  # once: the same filter is not added twice

    def access(self, resp, req, environ, request_time):
        if logged(req.path):
            super().access(resp, req, environ, request_time)


logger_class = PrivateLogger
errorlog = "-"
loglevel = "info"  # start, workers, stops and refused requests; no addresses (above)


# gunicorn's refusals of a request it cannot parse, by exact type (InvalidResponseHeader, a
# subclass of InvalidHeader, is the app's fault: gunicorn's own 500).
REFUSED = {errors.LimitRequestLine: 414, errors.LimitRequestHeaders: 431,
           **dict.fromkeys((errors.InvalidRequestLine, errors.InvalidRequestMethod,
                            errors.InvalidHTTPVersion, errors.InvalidHeader,
                            errors.InvalidHeaderName, errors.ObsoleteFolding), 400)}


class Worker(ThreadWorker):
    """gunicorn's threaded worker, answering a request it refuses to parse (REFUSED) with the
    app's JSON error and headers (serving.refusal), not gunicorn's HTML page; the warning it
    logs names no client."""

    def handle_error(self, req, client, addr, exc):
        status = REFUSED.get(type(exc))
        if status is None:
            super().handle_error(req, client, addr, exc)
            return
        self.log.warning("Invalid request: %s", type(exc).__name__)  # its text may quote the line
        try:
            util.write_nonblock(client, refusal(status, self.wsgi.config,
                                                self.cfg.limit_request_line))
        except OSError:
            self.log.debug("Failed to send error message.")


worker_class = Worker
def checked_app():
    """The app, or, when it refuses to start (a setting, the database), gunicorn's
    AppImportError carrying the reason: gunicorn prints that one line and stops, where any
    other exception printed a traceback of 70 to 100 lines per worker before it."""
    from ldpsurvey.aggregator import create_app
    from ldpsurvey.aggregator.exceptions import ConfigurationError

    try:
        return create_app()
    except (ConfigurationError, ValueError, OSError) as exc:
        raise AppImportError(str(exc)) from None
