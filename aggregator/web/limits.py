"""Per-client rate limits (Flask-Limiter): each class of endpoint has its own limit per client,
counted in storage the replicas share (RATE_LIMIT_STORAGE: memory:// for one process,
memcached://host:port for several; memcached keeps its counters in memory only). The client is
an HMAC of its address as Flask sees it (after ProxyFix), keyed with SECRET_KEY: no address is
stored, logged or sent to the storage. Over a limit: 429 with Retry-After (errors.py)."""

import hashlib
import hmac
import logging
import math
import time
from functools import lru_cache

from flask import Flask, current_app, request
from flask_limiter import ApplicationLimit, Limiter
from limits import RateLimitItem, parse_many

from ldpsurvey.aggregator.config.settings import RATE_LIMIT_SETTINGS as SETTINGS
from ldpsurvey.aggregator.exceptions import DomainError

logger = logging.getLogger(__name__)

CLASSES = {
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
# Load balancers poll health and readiness; assets under content-addressed names are cached
# for good (a page load through a shared address would otherwise spend 11 requests of 13 on them).
EXEMPT = {"respondents.health", "respondents.ready", "pages.asset"}
KEY_PREFIX = "ldp-survey"  # of every counter's key in the storage


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
    """The request's client, as keyed_client."""
    return keyed_client(current_app.config["SECRET_KEY"], request.remote_addr or "")


def keyed_client(secret: str, address: str) -> str:
    """HMAC-SHA256(SECRET_KEY, address), truncated to 128 bits: the same client on every
    replica sharing the secret, and no address to read back."""
    return hmac.new(secret.encode(), b"rate-limit\0" + address.encode(),
                    hashlib.sha256).hexdigest()[:32]


def _limit() -> str:
    return current_app.config[SETTINGS[class_of(request.endpoint or "")]]


def _exempt() -> bool:
    return request.endpoint in EXEMPT


def breach(exc) -> RateLimited:
    """The RateLimited for Flask-Limiter's RateLimitExceeded (limited)."""
    current = current_app.extensions["ldp_limiter"].current_limit
    return limited(class_of(request.endpoint or ""), exc.description,
                   current.reset_at if current else 0)


def limited(name: str, limit: str, reset_at: float) -> RateLimited:
    """A client over class `name`'s limit (its text, "60 per 1 minute"): naming the class, its
    setting and the limit; seconds = until the window frees a request (at `reset_at`), at
    least 1."""
    seconds = max(1, math.ceil(reset_at - time.time()))
    return RateLimited(f"too many {name} requests from this client: the limit is {limit} "
                       f"({SETTINGS[name]}); retry after {seconds} s", seconds)


@lru_cache(maxsize=16)
def parsed(text: str) -> tuple[RateLimitItem, ...]:
    """A setting's limits ("N per minute; M per hour"), in the order the limiter checks them;
    parsed once, not per request."""
    return tuple(sorted(parse_many(text)))


def hit(app: Flask, name: str, address: str) -> None:
    """Count a request of class `name` from `address` that Flask does not serve (submissions.py)
    against the class's limits, in the limiter's storage under the key its application limit
    uses; RateLimited over one. As the limiter does: nothing when RATE_LIMITS_ENABLED is
    false, and a storage that cannot be reached lets the request through (logged)."""
    if not app.config["RATE_LIMITS_ENABLED"]:
        return
    strategy = app.extensions["ldp_limiter"].limiter
    identifiers = (KEY_PREFIX, keyed_client(app.config["SECRET_KEY"], address), name)
    for limit in parsed(app.config[SETTINGS[name]]):
        try:
            if strategy.hit(limit, *identifiers):
                continue
            reset_at = strategy.get_window_stats(limit, *identifiers).reset_time
        except Exception as exc:
            logger.error("rate limit storage failed (%s); the request is let through",
                         type(exc).__name__)
            return
        logger.info("ratelimit %s (%s) exceeded: %s", limit, identifiers[1], name)
        raise limited(name, str(limit), reset_at)


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
        key_prefix=KEY_PREFIX,
        swallow_errors=True,
        enabled=app.config["RATE_LIMITS_ENABLED"],
    )
    limiter.init_app(app)
    app.extensions["ldp_limiter"] = limiter
