"""The aggregator's settings: their defaults and the check every value passes at start.

Values come from DEFAULTS, then LDP_SURVEY_<NAME> environment variables (parsed as JSON when
they are JSON, else kept as text), then the mapping given to `create_app`. Unknown
LDP_SURVEY_* names are ignored: the client and the deploy files use that prefix too.
"""

import logging
import math
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
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
MAX_SESSION_HOURS = 24 * 366
MAX_IDEMPOTENCY_DAYS = 36_500  # a century: a date that far back is still a date

@dataclass(frozen=True)
class Rule:
    """What a setting's value must be: `expected` in words (the start-up error says it) and
    the test. A `text` setting's environment value stays text, and a value of it that is not
    text is shown by its type only (never echoing a secret)."""

    expected: str
    accepts: Callable[[Any], bool]
    text: bool = False  # its value must be text (an environment value stays text)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def whole(least: int, most: int | None = None, span: str = "") -> Rule:
    """A whole number from `least` (to `most`, which `span` names in words)."""
    expected = f"a whole number of at least {least}" + (f", at most {most} ({span})" if most
                                                         else "")
    return Rule(expected, lambda v: _is_int(v) and least <= v <= (most or math.inf))


def seconds(most: float = math.inf, span: str = "") -> Rule:
    """A finite number of seconds above 0 (at most `most`, which `span` names in words)."""
    expected = "a finite number of seconds above 0" + (f", at most {span}" if span else "")
    return Rule(expected, lambda v: _is_number(v) and math.isfinite(v) and 0 < v <= most)


def _parses(parse: Callable[[str], Any], value: Any) -> bool:
    """Whether `parse` takes the text value without a ValueError."""
    try:
        parse(value)
    except ValueError:
        return False
    return True


TEXT = Rule("text", lambda v: isinstance(v, str), text=True)
LIMITS = Rule('limits such as "60 per minute; 1000 per hour"',
              lambda v: isinstance(v, str) and _parses(parse_many, v), text=True)


@dataclass(frozen=True)
class Setting:
    """One setting: its name (LDP_SURVEY_<name> in the environment), default, rule and
    meaning; `optional`: None (unset) is accepted whatever the rule."""

    name: str
    default: Any
    rule: Rule
    meaning: str
    optional: bool = False


SETTINGS = (
    Setting("DEPLOYMENT", "development",
            Rule(f"one of {', '.join(DEPLOYMENTS)}", lambda v: v in DEPLOYMENTS),
            '"production" demands KEY_FILE, SECRET_KEY, STORAGE_KEY and PUBLIC_URL'),
    Setting("DATABASE_URL", None, TEXT, "default: sqlite:///<instance>/ldp-survey.sqlite3",
            optional=True),
    Setting("KEY_FILE", None, TEXT, "the Ed25519 signing key (PEM); default (development "
            "only): <instance>/signing-key.pem", optional=True),
    # No secret here: production must set one; development keeps one in the instance folder.
    Setting("SECRET_KEY", None, TEXT, "signs the results page's session cookie",
            optional=True),
    Setting("STORAGE_KEY", None, TEXT, "keys token hashes, idempotency records and pending "
            "answers (storage_key.py), kept out of the database so that a copy of its files "
            "matches and reads none of them", optional=True),
    Setting("EPSILON_CAP", 5.0,
            Rule("a finite number above 0",
                 lambda v: _is_number(v) and math.isfinite(v) and v > 0),
            "no question may exceed this epsilon"),
    Setting("MAX_CONTENT_LENGTH", 16 * 2**20, whole(1), "any request body, bytes"),
    Setting("MAX_RESPONSE_BYTES", 64 * 2**10, whole(1), "one response, bytes"),
    Setting("MAX_BATCH_RESPONSES", http_contract.MAX_BATCH_RESPONSES, whole(1),
            "responses per batch request"),
    Setting("MAX_TOKENS_PER_REQUEST", http_contract.MAX_TOKENS_PER_REQUEST, whole(1),
            "invitation tokens per request"),
    Setting("PROXY_HOPS", None, whole(0), "reverse proxies in front (default: 1 in "
            "production)", optional=True),
    Setting("SERVED_BY", None, TEXT, "this replica's name, sent as a Served-By header",
            optional=True),
    Setting("CENTRAL_DELTA", 1e-6,
            Rule("a number between 0 and 1", lambda v: _is_number(v) and 0 < v < 1),
            "delta of the shuffle-amplified central epsilon"),
    Setting("MIN_CELL", disclosed.DEFAULT_MIN_CELL, whole(1), "in a survey with openly "
            "answered questions, the fewest respondents a regression group or a weighting "
            "margin's level may hold: open answers must not single anyone out"),
    Setting("SESSION_HOURS", http_contract.SESSION_HOURS, whole(1, MAX_SESSION_HOURS, "a year"),
            "a results-page login ends after this long"),
    Setting("RELEASE_EVERY", 3600, seconds(), "seconds between scheduled releases, at "
            "multiples of it since the Unix epoch (UTC): pools are released only then, never "
            "by the request that fills them (releases.py)"),
    Setting("IDEMPOTENCY_DAYS", 7, whole(1, MAX_IDEMPOTENCY_DAYS, "a century"),
            "days an idempotency record is kept after its response's release: a retry within "
            "them is answered as a replay, one after them is stored anew (the records' index "
            "holds that many days of intake, not the survey's history)"),
    # Seconds a database session may wait for a lock, run one statement, sit idle inside a
    # transaction (PostgreSQL then ends it, freeing its locks), or wait on the network
    # (connection.Timeouts; docs/deployment.md says how to size them).
    *(Setting(f"DATABASE_{name}_TIMEOUT", default, seconds(86_400, "a day"), meaning)
      for name, default, meaning in (
          ("LOCK", 5, "seconds a request waits for a lock"),
          ("STATEMENT", 60, "PostgreSQL: seconds one statement may run"),
          ("IDLE_IN_TRANSACTION", 10, "PostgreSQL: seconds a session may sit idle inside a "
           "transaction"),
          ("NETWORK", 5, "PostgreSQL: seconds to connect or wait on the network"))),
    # Per client (a keyed hash of its address) and class of endpoint (limits.py), in
    # Flask-Limiter's notation; counted in RATE_LIMIT_STORAGE, which replicas must share.
    Setting("RATE_LIMITS_ENABLED", True, Rule("true or false", lambda v: isinstance(v, bool)),
            "per-client rate limits"),
    Setting("RATE_LIMIT_STORAGE", "memory://",
            Rule("memory:// or memcached://HOST:PORT", lambda v: isinstance(v, str) and (
                v.partition("://")[0] in RATE_LIMIT_STORAGE_SCHEMES), text=True),
            "memory:// (each process counts alone: a gunicorn worker too) or "
            "memcached://HOST:PORT (never on disk; what deploy/ uses)"),
    Setting("RATE_LIMIT_SUBMIT", "120 per minute", LIMITS,
            "a respondent's submission (a NAT can hide a classroom of respondents)"),
    Setting("RATE_LIMIT_RESULTS", "60 per minute", LIMITS,
            "estimates, cross-tabs, results pages and downloads"),
    Setting("RATE_LIMIT_RESEARCHER", "600 per minute", LIMITS,
            "the rest of the researcher API and dashboard actions"),
    Setting("RATE_LIMIT_LOGIN", "10 per minute", LIMITS, "a login attempt with a key"),
    Setting("RATE_LIMIT_OTHER", "600 per minute", LIMITS,
            "manifests, forms, the key, static pages"),
    Setting("PUBLIC_URL", None,
            Rule("an http:// or https:// address",
                 lambda v: isinstance(v, str) and _parses(web_origin, v), text=True),
            "where respondents reach this service (https://survey.example.org): its origin is "
            "signed into every new manifest. Production requires it; development, when unset, "
            "signs the origin of the request that creates the survey", optional=True),
    # What one regression or weighting may cost (budgets.py): parameters and latent rows
    # (units x combinations of the randomized covariates' options) and solver iterations,
    # checked before it starts; seconds (CPU and wall-clock) and MiB of memory, enforced on its
    # own process. The _ANONYMOUS ones apply to the public of a public-results survey.
    *(Setting(f"ANALYSIS_{name}{suffix}", default, whole(1), meaning + who)
      for suffix, who, defaults in (("", "", (256, 65_536, 1000, 45, 1024)),
                                    ("_ANONYMOUS", " (the public of a public-results survey)",
                                     (64, 8192, 200, 10, 256)))
      for (name, meaning), default in zip((
          ("PARAMETERS", "parameters of one regression or weighting"),
          ("LATENT_ROWS", "latent rows of one (units x combinations of the randomized "
           "covariates' options)"),
          ("ITERATIONS", "solver iterations of one"),
          ("SECONDS", "seconds (CPU and wall-clock) of one; under the proxy's 60 s read "
           "timeout (deploy/nginx)"),
          ("MEMORY_MIB", "MiB of memory of one")), defaults, strict=True)),
    Setting("ANALYSES_AT_ONCE", 2, whole(1),
            "per process: the other threads serve everything else"),
)
DEFAULTS: dict[str, Any] = {setting.name: setting.default for setting in SETTINGS}
PREFIX = "LDP_SURVEY"
MIN_SECRET_BYTES = 32


def load(config: Config, overrides: dict[str, Any] | None) -> None:
    """Fill `config` from the defaults, the environment and `overrides`, then validate it."""
    overrides = overrides or {}
    config.from_mapping(DEFAULTS)
    config.from_prefixed_env(PREFIX)
    for setting in SETTINGS:  # a secret of digits only must stay text, not become a number
        if setting.rule.text and f"{PREFIX}_{setting.name}" in os.environ:
            config[setting.name] = os.environ[f"{PREFIX}_{setting.name}"]
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
    """Refuse values that would make the service misbehave, naming the setting: each against
    its rule (SETTINGS), then what production needs together."""
    for setting in SETTINGS:
        value = config[setting.name]
        if value is None and setting.optional:
            continue
        if setting.rule.text and not isinstance(value, str):  # shown by its type, not echoed
            _refuse(setting.name, type(value).__name__, TEXT.expected)
        if not setting.rule.accepts(value):
            _refuse(setting.name, value, setting.rule.expected)
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


def _refuse(name: str, value: Any, expected: str) -> None:
    raise ConfigurationError(f"setting {name} ({PREFIX}_{name}) must be {expected}, "
                             f"got {str(value)[:40]!r}")
