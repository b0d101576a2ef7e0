"""The ldp-survey aggregator: a Flask service that only ever holds randomized answers.

Its life cycle: `create_app()` configures it and brings the database schema up to date,
`create_api_key(app)` mints an API key (accounts.py), `close_app(app)` closes its database.
"""

import os
import secrets
from pathlib import Path
from typing import Any

from flask import Flask

from ldpsurvey.aggregator.config import settings, signing
from ldpsurvey.aggregator.config.instance import private_file
from ldpsurvey.aggregator.config.settings import DEFAULTS
from ldpsurvey.aggregator.exceptions import ConfigurationError, DomainError
from ldpsurvey.aggregator.services import accounts, budgets
from ldpsurvey.aggregator.web import (
    errors,
    limits,
    openapi,
    pages,
    request_connection,
    researchers,
    respondents,
    security,
    submissions,
)
from ldpsurvey.aggregator.web.request_connection import close_app

DEVELOPMENT_KEY_FILE = "signing-key.pem"  # in the instance folder, unless KEY_FILE is set

__all__ = ["DEFAULTS", "DEVELOPMENT_KEY_FILE", "ConfigurationError", "DomainError", "accounts",
           "close_app", "create_api_key", "create_app"]


def create_app(config: dict[str, Any] | None = None,
               instance_path: str | Path | None = None) -> Flask:
    """The application factory. Configuration: DEFAULTS, then LDP_SURVEY_<NAME> environment
    variables, then `config` (see settings.py); a bad value is a ConfigurationError. The
    instance folder (keys and SQLite file in development) is `instance_path`, else
    $LDP_SURVEY_INSTANCE, else ./instance."""
    instance_path = instance_path or os.environ.get("LDP_SURVEY_INSTANCE") or "instance"
    app = Flask(__name__, instance_path=str(Path(instance_path).resolve()))
    settings.load(app.config, config)
    instance = Path(app.instance_path)
    production = app.config["DEPLOYMENT"] == "production"
    for name, file in (("SECRET_KEY", "secret-key"), ("STORAGE_KEY", "storage-key")):
        if not app.config[name]:
            app.config[name] = private_file(instance / file,
                                            lambda: secrets.token_hex(32).encode()).decode()
    if app.config["PROXY_HOPS"] is None:
        app.config["PROXY_HOPS"] = 1 if production else 0
    if app.config["KEY_FILE"]:
        key = signing.load_key(Path(app.config["KEY_FILE"]), refuse_exposed=production)
    else:
        key = signing.load_or_create(instance / DEVELOPMENT_KEY_FILE)
    app.extensions["ldp_signing_key"] = key
    if not app.config["DATABASE_URL"]:
        app.config["DATABASE_URL"] = f"sqlite:///{instance / 'ldp-survey.sqlite3'}"
    request_connection.init_app(app)
    app.extensions["ldp_analyses"] = budgets.Runner(
        budgets.budget_from(app.config, public=False), budgets.budget_from(app.config, public=True),
        app.config["ANALYSES_AT_ONCE"])
    errors.init_app(app)
    submissions.init_app(app)
    security.init_app(app)
    app.register_blueprint(respondents.bp)
    app.register_blueprint(researchers.bp)
    app.register_blueprint(openapi.bp)
    app.register_blueprint(pages.bp)
    limits.init_app(app)
    return app


def create_api_key(app: Flask, role: str = "researcher", name: str | None = None,
                   surveys: tuple[str, ...] = (), existing: bool = False) -> accounts.IssuedKey:
    """A new API key in the app's database (see accounts.create_key); the key appears only in
    what this returns, only its hash is kept."""
    with app.app_context():
        return accounts.create_key(request_connection.get_db(), role, name, surveys, existing)


