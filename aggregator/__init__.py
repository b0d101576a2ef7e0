"""The ldp-survey aggregator: a Flask service that only ever holds randomized answers."""

import os
import secrets
from pathlib import Path
from typing import Any

from flask import Flask

from . import db, errors, openapi, pages, researchers, respondents, security, signing
from .instance import private_file

DEFAULTS: dict[str, Any] = {
    "ENV": "development",               # "production" demands KEY_FILE and SECRET_KEY
    "DATABASE_URL": None,               # default: sqlite:///<instance>/ldp-survey.sqlite3
    "KEY_FILE": None,                   # default (development only): <instance>/signing-key.pem
    # No secret here: production must set one; development keeps one in the instance folder.
    "SECRET_KEY": None,  # nosec B105
    "EPSILON_CAP": 5.0,                 # no question may exceed this epsilon
    "MAX_CONTENT_LENGTH": 16 * 2**20,   # any request body, bytes
    "MAX_RESPONSE_BYTES": 64 * 2**10,   # one response, bytes
    "MAX_BATCH_RESPONSES": 10_000,      # responses in one batch
    "MAX_TOKENS_PER_REQUEST": 10_000,   # invitation tokens minted at once
    "PROXY_HOPS": None,                 # reverse proxies in front (default: 1 in production)
}


class ConfigurationError(RuntimeError):
    """The aggregator cannot start safely with this configuration."""


def create_app(config: dict[str, Any] | None = None,
               instance_path: str | Path | None = None) -> Flask:
    """The application factory. Configuration: DEFAULTS, then LDP_SURVEY_<NAME> environment
    variables, then `config`. The instance folder (key and SQLite file in development) is
    `instance_path`, else $LDP_SURVEY_INSTANCE, else ./instance."""
    instance_path = instance_path or os.environ.get("LDP_SURVEY_INSTANCE") or "instance"
    app = Flask(__name__, instance_path=str(Path(instance_path).resolve()))
    app.config.from_mapping(DEFAULTS)
    app.config.from_prefixed_env("LDP_SURVEY")
    app.config.from_mapping(config or {})
    instance = Path(app.instance_path)
    production = app.config["ENV"] == "production"
    if production and not (app.config["KEY_FILE"] and app.config["SECRET_KEY"]):
        raise ConfigurationError("production needs LDP_SURVEY_KEY_FILE (the shared signing key) "
                                 "and LDP_SURVEY_SECRET_KEY, so every replica serves the same key")
    if not app.config["SECRET_KEY"]:
        app.config["SECRET_KEY"] = private_file(instance / "secret-key",
                                                lambda: secrets.token_hex(32).encode()).decode()
    if app.config["PROXY_HOPS"] is None:
        app.config["PROXY_HOPS"] = 1 if production else 0
    if app.config["KEY_FILE"]:
        key = signing.load_key(Path(app.config["KEY_FILE"]))
    else:
        key = signing.load_or_create(instance / "signing-key.pem")
    app.extensions["ldp_signing_key"] = key
    if not app.config["DATABASE_URL"]:
        app.config["DATABASE_URL"] = f"sqlite:///{instance / 'ldp-survey.sqlite3'}"
    db.init_app(app)
    errors.init_app(app)
    security.init_app(app)
    app.register_blueprint(respondents.bp)
    app.register_blueprint(researchers.bp)
    app.register_blueprint(openapi.bp)
    app.register_blueprint(pages.bp)
    return app
