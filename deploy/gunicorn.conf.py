"""gunicorn settings for running the aggregator in production.

    LDP_SURVEY_KEY_FILE=/etc/ldp-survey/signing-key.pem LDP_SURVEY_SECRET_KEY=... \
    LDP_SURVEY_DATABASE_URL=postgresql://... gunicorn -c deploy/gunicorn.conf.py

The app refuses to start without the key file and secret (every replica must serve the same
signing key). The access log holds method, path without query string, status, size and
duration: no client address, no query string, no user agent, no referrer; and no line at all
for the responses endpoints (journald would time-stamp each, in arrival order).
"""

import multiprocessing
import os

from gunicorn.glogging import Logger

from ldpsurvey.aggregator.serving import logged

wsgi_app = "ldpsurvey.aggregator:create_app()"
raw_env = ["LDP_SURVEY_DEPLOYMENT=production"]

bind = os.environ.get("LDP_SURVEY_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("LDP_SURVEY_WORKERS", 2 * multiprocessing.cpu_count() + 1))
worker_class = "gthread"
threads = int(os.environ.get("LDP_SURVEY_THREADS", 4))
timeout = 30
graceful_timeout = 30
keepalive = 5

# Behind exactly one reverse proxy on this host (the app's ProxyFix trusts one hop).
forwarded_allow_ips = os.environ.get("LDP_SURVEY_PROXY_IPS", "127.0.0.1")

limit_request_line = 4094
limit_request_fields = 50
limit_request_field_size = 8190

accesslog = "-"
access_log_format = '"%(m)s %(U)s" %(s)s %(B)s %(M)sms'


class PrivateLogger(Logger):
    """gunicorn's logger without access-log lines for the responses endpoints."""

    def access(self, resp, req, environ, request_time):
        if logged(req.path):
            super().access(resp, req, environ, request_time)


logger_class = PrivateLogger
errorlog = "-"
loglevel = "info"  # gunicorn names client addresses only at debug level
