"""The aggregator's settings: their defaults and the check every value passes at start.

Values come from DEFAULTS, then LDP_SURVEY_<NAME> environment variables (parsed as JSON when
they are JSON, else kept as text), then the mapping given to `create_app`. Unknown
LDP_SURVEY_* names are ignored: the client and the deploy files use that prefix too.
"""

import logging
import math
import os
import warnings
from typing import Any

from flask import Config
from limits import parse_many

from ldpsurvey.aggregator.exceptions import ConfigurationError
from ldpsurvey.shared import http_contract
from ldpsurvey.shared.mechanisms import disclosed
from ldpsurvey.shared.survey.manifest import web_origin

logger = logging.getLogger(__name__)

DEPLOYMENTS = ("development", "production")

# The setting holding each class's limit ("N per minute; M per hour", Flask-Limiter's notation).
RATE_LIMIT_SETTINGS = {
    "submit": "RATE_LIMIT_SUBMIT",          # a respondent's submission (counted by hit)
    "results": "RATE_LIMIT_RESULTS",        # estimates, cross-tabs, results pages and downloads
    "researcher": "RATE_LIMIT_RESEARCHER",  # the rest of the researcher API and dashboard actions
    "login": "RATE_LIMIT_LOGIN",            # a login attempt with a key
    "other": "RATE_LIMIT_OTHER",            # manifests, forms, the key, static pages
}
RATE_LIMIT_STORAGE_SCHEMES = ("memory", "memcached")  # neither writes a counter to disk

DEFAULTS: dict[str, Any] = {
    "DEPLOYMENT": "development",  # "production" demands KEY_FILE, SECRET_KEY and STORAGE_KEY
    "DATABASE_URL": None,               # default: sqlite:///<instance>/ldp-survey.sqlite3
    "KEY_FILE": None,                   # default (development only): <instance>/signing-key.pem
    # No secret here: production must set one; development keeps one in the instance folder.
    "SECRET_KEY": None,  # nosec B105
    # Keys token hashes, idempotency records and pending answers (storage_key.py); kept out of
    # the database so that a copy of its files matches and reads none of them.
    "STORAGE_KEY": None,
    "EPSILON_CAP": 5.0,                 # no question may exceed this epsilon
    "MAX_CONTENT_LENGTH": 16 * 2**20,   # any request body, bytes
    "MAX_RESPONSE_BYTES": 64 * 2**10,   # one response, bytes
    "MAX_BATCH_RESPONSES": http_contract.MAX_BATCH_RESPONSES,
    "MAX_TOKENS_PER_REQUEST": http_contract.MAX_TOKENS_PER_REQUEST,
    "PROXY_HOPS": None,                 # reverse proxies in front (default: 1 in production)
    "SERVED_BY": None,                  # this replica's name, sent as a Served-By header
    "CENTRAL_DELTA": 1e-6,              # delta of the shuffle-amplified central epsilon
    # In a survey with openly answered questions, the fewest respondents a regression group or
    # a weighting margin's level may hold: open answers must not single anyone out.
    "MIN_CELL": disclosed.DEFAULT_MIN_CELL,
    "SESSION_HOURS": http_contract.SESSION_HOURS,  # a results-page login ends after this long
    # Seconds between scheduled releases, at multiples of it since the Unix epoch (UTC):
    # pools are released only then, never by the request that fills them (releases.py).
    "RELEASE_EVERY": 3600,
    # Days an idempotency record is kept after its response's release: a retry within them is
    # answered as a replay, one after them is stored anew. Keeps the records' index the size
    # of that many days of intake, not of the survey's history (closing deletes them all).
    "IDEMPOTENCY_DAYS": 7,
    # Seconds a database session may wait for a lock, run one statement, sit idle inside a
    # transaction (PostgreSQL then ends it, freeing its locks), or wait on the network
    # (database.Timeouts; docs/deployment.md says how to size them).
    "DATABASE_LOCK_TIMEOUT": 5,
    "DATABASE_STATEMENT_TIMEOUT": 60,
    "DATABASE_IDLE_IN_TRANSACTION_TIMEOUT": 10,
    "DATABASE_NETWORK_TIMEOUT": 5,
    # Per client (a keyed hash of its address) and class of endpoint (limits.py), in
    # Flask-Limiter's notation; counted in RATE_LIMIT_STORAGE, which replicas must share:
    # memory:// (each process counts alone: a gunicorn worker too) or memcached://HOST:PORT
    # (never on disk; what deploy/ uses).
    "RATE_LIMITS_ENABLED": True,
    "RATE_LIMIT_STORAGE": "memory://",
    "RATE_LIMIT_SUBMIT": "120 per minute",     # a NAT can hide a classroom of respondents
    "RATE_LIMIT_RESULTS": "60 per minute",     # estimates, cross-tabs, results pages
    "RATE_LIMIT_RESEARCHER": "600 per minute",
    "RATE_LIMIT_LOGIN": "10 per minute",
    "RATE_LIMIT_OTHER": "600 per minute",
    # Where respondents reach this service (https://survey.example.org): its origin is signed
    # into every new manifest. Production requires it; development, when unset, signs the
    # origin of the request that creates the survey.
    "PUBLIC_URL": None,
    # What one regression or weighting may cost (budgets.py): parameters and latent rows
    # (units x combinations of the randomized covariates' options) and solver iterations,
    # checked before it starts; seconds (CPU and wall-clock) and MiB of memory, enforced on its
    # own process. The _ANONYMOUS ones apply to the public of a public-results survey.
    "ANALYSIS_PARAMETERS": 256,
    "ANALYSIS_LATENT_ROWS": 65_536,
    "ANALYSIS_ITERATIONS": 1000,
    "ANALYSIS_SECONDS": 45,             # under the proxy's 60 s read timeout (deploy/nginx)
    "ANALYSIS_MEMORY_MIB": 1024,
    "ANALYSIS_PARAMETERS_ANONYMOUS": 64,
    "ANALYSIS_LATENT_ROWS_ANONYMOUS": 8192,
    "ANALYSIS_ITERATIONS_ANONYMOUS": 200,
    "ANALYSIS_SECONDS_ANONYMOUS": 10,
    "ANALYSIS_MEMORY_MIB_ANONYMOUS": 256,
    "ANALYSES_AT_ONCE": 2,              # per process: the other threads serve everything else
}
PREFIX = "LDP_SURVEY"
RATE_LIMITS = tuple(RATE_LIMIT_SETTINGS.values())
TEXT = ("DATABASE_URL", "KEY_FILE", "SECRET_KEY", "STORAGE_KEY", "SERVED_BY", "PUBLIC_URL",
        "RATE_LIMIT_STORAGE", *RATE_LIMITS)
LIMITS = ("MAX_CONTENT_LENGTH", "MAX_RESPONSE_BYTES", "MAX_BATCH_RESPONSES",
          "MAX_TOKENS_PER_REQUEST", "SESSION_HOURS", "MIN_CELL", "IDEMPOTENCY_DAYS",
          *(name for name in DEFAULTS if name.startswith("ANALYS")))
TIMEOUTS = ("DATABASE_LOCK_TIMEOUT", "DATABASE_STATEMENT_TIMEOUT",
            "DATABASE_IDLE_IN_TRANSACTION_TIMEOUT", "DATABASE_NETWORK_TIMEOUT")
MIN_SECRET_BYTES = 32
MAX_SESSION_HOURS = 24 * 366
MAX_IDEMPOTENCY_DAYS = 36_500  # a century: a date that far back is still a date


def load(config: Config, overrides: dict[str, Any] | None) -> None:
    """Fill `config` from the defaults, the environment and `overrides`, then validate it."""
    overrides = overrides or {}
    config.from_mapping(DEFAULTS)
    config.from_prefixed_env(PREFIX)
    for name in TEXT:  # a secret of digits only must stay text, not become a number
        if f"{PREFIX}_{name}" in os.environ:
            config[name] = os.environ[f"{PREFIX}_{name}"]
    config.from_mapping(overrides)
    old = config.pop("ENV", None)  # Flask no longer has an ENV key; ours is now DEPLOYMENT
    if old is not None:
        message = f"the setting ENV ({PREFIX}_ENV) is deprecated: use DEPLOYMENT ({PREFIX}_DEPLOYMENT)"
        warnings.warn(message, DeprecationWarning, stacklevel=3)
        logger.warning(message)  # operators see this; Python hides DeprecationWarning by default
        if "DEPLOYMENT" not in overrides and f"{PREFIX}_DEPLOYMENT" not in os.environ:
            config["DEPLOYMENT"] = old
    validate(config)


def validate(config: Config) -> None:
    """Refuse values that would make the service misbehave, naming the setting."""
    if config["DEPLOYMENT"] not in DEPLOYMENTS:
        _refuse("DEPLOYMENT", config["DEPLOYMENT"], f"one of {', '.join(DEPLOYMENTS)}")
    cap = config["EPSILON_CAP"]
    if not _is_number(cap) or not math.isfinite(cap) or cap <= 0:
        _refuse("EPSILON_CAP", cap, "a finite number above 0")
    delta = config["CENTRAL_DELTA"]
    if not _is_number(delta) or not 0 < delta < 1:
        _refuse("CENTRAL_DELTA", delta, "a number between 0 and 1")
    every = config["RELEASE_EVERY"]
    if not _is_number(every) or not math.isfinite(every) or every <= 0:
        _refuse("RELEASE_EVERY", every, "a finite number of seconds above 0")
    for name in TIMEOUTS:
        if not _is_number(config[name]) or not 0 < config[name] <= 86_400:
            _refuse(name, config[name], "a number of seconds above 0, at most a day")
    for name in LIMITS:
        if not _is_int(config[name]) or config[name] < 1:
            _refuse(name, config[name], "a whole number of at least 1")
    if config["SESSION_HOURS"] > MAX_SESSION_HOURS:
        _refuse("SESSION_HOURS", config["SESSION_HOURS"], f"at most {MAX_SESSION_HOURS} (a year)")
    if config["IDEMPOTENCY_DAYS"] > MAX_IDEMPOTENCY_DAYS:
        _refuse("IDEMPOTENCY_DAYS", config["IDEMPOTENCY_DAYS"],
                f"at most {MAX_IDEMPOTENCY_DAYS} (a century)")
    hops = config["PROXY_HOPS"]
    if hops is not None and (not _is_int(hops) or hops < 0):
        _refuse("PROXY_HOPS", hops, "a whole number of at least 0")
    for name in TEXT:
        if config[name] is not None and not isinstance(config[name], str):
            _refuse(name, type(config[name]).__name__, "text")
    _validate_rate_limits(config)
    if config["PUBLIC_URL"] is not None:
        try:
            web_origin(config["PUBLIC_URL"])
        except ValueError:
            _refuse("PUBLIC_URL", config["PUBLIC_URL"], "an http:// or https:// address")
    if config["DEPLOYMENT"] == "production":
        if not (config["KEY_FILE"] and config["SECRET_KEY"]):
            raise ConfigurationError(
                f"production needs {PREFIX}_KEY_FILE (the shared signing key) and "
                f"{PREFIX}_SECRET_KEY, so every replica serves the same key")
        if not config["STORAGE_KEY"]:
            raise ConfigurationError(
                f"production needs {PREFIX}_STORAGE_KEY (keys the stored tokens and pending "
                "answers; every replica needs the same one, kept apart from the database)")
        for name in ("SECRET_KEY", "STORAGE_KEY"):
            if len(config[name].encode()) < MIN_SECRET_BYTES:
                raise ConfigurationError(f"{PREFIX}_{name} must be at least {MIN_SECRET_BYTES} "
                                         "bytes in production (e.g. 64 random hex digits)")
        if not config["PUBLIC_URL"]:
            raise ConfigurationError(
                f"production needs {PREFIX}_PUBLIC_URL, the address respondents reach this "
                "service at (e.g. https://survey.example.org): it is signed into each survey")


def public_origin(config: Config, request_url: str) -> str:
    """The origin signed into a new survey's manifest: PUBLIC_URL's, else (development only;
    production requires PUBLIC_URL) that of the request creating it."""
    return web_origin(config["PUBLIC_URL"] or request_url)


def _validate_rate_limits(config: Config) -> None:
    if not isinstance(config["RATE_LIMITS_ENABLED"], bool):
        _refuse("RATE_LIMITS_ENABLED", config["RATE_LIMITS_ENABLED"], "true or false")
    storage = config["RATE_LIMIT_STORAGE"]
    if storage is None or storage.partition("://")[0] not in RATE_LIMIT_STORAGE_SCHEMES:
        _refuse("RATE_LIMIT_STORAGE", storage, "memory:// or memcached://HOST:PORT")
    for name in RATE_LIMITS:
        try:
            parse_many(config[name] or "")
        except ValueError:
            _refuse(name, config[name], 'limits such as "60 per minute; 1000 per hour"')


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _refuse(name: str, value: Any, expected: str) -> None:
    raise ConfigurationError(f"setting {name} ({PREFIX}_{name}) must be {expected}, "
                             f"got {str(value)[:40]!r}")
