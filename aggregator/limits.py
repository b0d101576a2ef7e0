"""Per-client rate limits (Flask-Limiter): each class of endpoint has its own limit per client,
counted in storage the replicas share (RATE_LIMIT_STORAGE: memory:// for one process,
memcached://host:port for several; memcached keeps its counters in memory only). The client is
an HMAC of its address as Flask sees it (after ProxyFix), keyed with SECRET_KEY: no address is
stored, logged or sent to the storage. Over a limit: 429 with Retry-After (errors.py)."""

import hashlib
import hmac
import math
import time

from flask import Flask, current_app, request
from flask_limiter import ApplicationLimit, Limiter

from .exceptions import DomainError

# The setting holding each class's limit ("N per minute; M per hour", Flask-Limiter's notation).
SETTINGS = {
    "submit": "RATE_LIMIT_SUBMIT",          # a respondent's submission
    "results": "RATE_LIMIT_RESULTS",        # estimates, cross-tabs, results pages and downloads
    "researcher": "RATE_LIMIT_RESEARCHER",  # the rest of the researcher API and dashboard actions
    "login": "RATE_LIMIT_LOGIN",            # a login attempt with a key
    "other": "RATE_LIMIT_OTHER",            # manifests, forms, the key, static pages
}
CLASSES = {
    "respondents.submit": "submit",
    "researchers.estimates": "results",
    "researchers.crosstab": "results",
    "pages.results": "results",
    "pages.estimates_csv": "results",
    "pages.chart_svg": "results",
    "pages.login": "login",
    "pages.dashboard_login": "login",
    "pages.dashboard_tokens": "researcher",
    "pages.draft_preview": "researcher",
    "pages.draft_preview_manifest": "researcher",
}
EXEMPT = {"respondents.health"}  # load balancers poll it
STORAGE_SCHEMES = ("memory", "memcached")  # neither writes a counter to disk


class RateLimited(DomainError):
    """Too many requests from one client in a class of endpoints; retry after `seconds`."""

    def __init__(self, detail: str, seconds: int):
        super().__init__(detail)
        self.seconds = seconds


def class_of(endpoint: str) -> str:
    """The class an endpoint's requests count in (SETTINGS)."""
    if endpoint in CLASSES:
        return CLASSES[endpoint]
    return "researcher" if endpoint.startswith("researchers.") else "other"


def client_key() -> str:
    """HMAC-SHA256(SECRET_KEY, address), truncated to 128 bits: the same client on every
    replica sharing the secret, and no address to read back."""
    secret = current_app.config["SECRET_KEY"].encode()
    address = (request.remote_addr or "").encode()
    return hmac.new(secret, b"rate-limit\0" + address, hashlib.sha256).hexdigest()[:32]


def _limit() -> str:
    return current_app.config[SETTINGS[class_of(request.endpoint or "")]]


def _exempt() -> bool:
    return request.endpoint in EXEMPT


def breach(exc) -> RateLimited:
    """The RateLimited for Flask-Limiter's RateLimitExceeded, naming the class, its setting
    and the limit; seconds = until the window frees a request, at least 1."""
    name = class_of(request.endpoint or "")
    current = current_app.extensions["ldp_limiter"].current_limit
    seconds = max(1, math.ceil(current.reset_at - time.time())) if current else 1
    return RateLimited(f"too many {name} requests from this client: the limit is "
                       f"{exc.description} ({SETTINGS[name]}); retry after {seconds} s", seconds)


def init_app(app: Flask) -> None:
    """One limit per class and client over all the class's endpoints, unless
    RATE_LIMITS_ENABLED is false. A storage that cannot be reached lets requests through
    (logged), rather than refusing every one."""
    limiter = Limiter(
        client_key,
        application_limits=[ApplicationLimit(limit_provider=_limit, scope=class_of,
                                             exempt_when=_exempt)],
        storage_uri=app.config["RATE_LIMIT_STORAGE"],
        strategy="fixed-window",  # its Retry-After is exact; at most 2N in any span of a window
        key_prefix="ldp-survey",
        swallow_errors=True,
        enabled=app.config["RATE_LIMITS_ENABLED"],
    )
    limiter.init_app(app)
    app.extensions["ldp_limiter"] = limiter
