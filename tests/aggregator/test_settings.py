"""Settings are checked at start: a bad value stops the aggregator with its name."""

import re

import pytest

from ldpsurvey.aggregator import ConfigurationError, close_app, create_app


def start(tmp_path, **config):
    app = create_app({"DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", **config},
                     instance_path=tmp_path)
    close_app(app)
    return app


@pytest.mark.parametrize("config, named", [
    ({"DEPLOYMENT": "prodution"}, "DEPLOYMENT"),
    ({"EPSILON_CAP": float("nan")}, "EPSILON_CAP"),
    ({"EPSILON_CAP": float("inf")}, "EPSILON_CAP"),
    ({"EPSILON_CAP": 0}, "EPSILON_CAP"),
    ({"EPSILON_CAP": "5"}, "EPSILON_CAP"),
    ({"MAX_BATCH_RESPONSES": 1.5}, "MAX_BATCH_RESPONSES"),
    ({"MAX_BATCH_RESPONSES": True}, "MAX_BATCH_RESPONSES"),
    ({"MAX_TOKENS_PER_REQUEST": 0}, "MAX_TOKENS_PER_REQUEST"),
    ({"MAX_RESPONSE_BYTES": "lots"}, "MAX_RESPONSE_BYTES"),
    ({"MAX_CONTENT_LENGTH": None}, "MAX_CONTENT_LENGTH"),
    ({"PROXY_HOPS": -1}, "PROXY_HOPS"),
    ({"SESSION_HOURS": 0}, "SESSION_HOURS"),
    ({"SESSION_HOURS": 10**8}, "SESSION_HOURS"),  # would overflow a date at login
    ({"DATABASE_URL": 5}, "DATABASE_URL"),
    ({"RELEASE_EVERY": 0}, "RELEASE_EVERY"),
    ({"IDEMPOTENCY_DAYS": 0}, "IDEMPOTENCY_DAYS"),
    ({"IDEMPOTENCY_DAYS": 1.5}, "IDEMPOTENCY_DAYS"),
    ({"IDEMPOTENCY_DAYS": 10**6}, "IDEMPOTENCY_DAYS"),  # a release would overflow the date
    ({"RELEASE_EVERY": -3600}, "RELEASE_EVERY"),
    ({"RELEASE_EVERY": float("inf")}, "RELEASE_EVERY"),
    ({"RELEASE_EVERY": "hourly"}, "RELEASE_EVERY"),
    ({"RELEASE_EVERY": True}, "RELEASE_EVERY"),
    ({"PUBLIC_URL": "survey.example.org"}, "PUBLIC_URL"),
    ({"PUBLIC_URL": "ftp://survey.example.org"}, "PUBLIC_URL"),
    ({"PUBLIC_URL": "https://survey.example.org:99999"}, "PUBLIC_URL"),
])
def test_a_bad_value_is_a_start_up_error_naming_the_setting(tmp_path, config, named):
    with pytest.raises(ConfigurationError, match=f"setting {named} \\(LDP_SURVEY_{named}\\)"):
        create_app(config, instance_path=tmp_path)


@pytest.mark.parametrize("variable, value, named", [
    ("LDP_SURVEY_EPSILON_CAP", "NaN", "EPSILON_CAP"),
    ("LDP_SURVEY_MAX_BATCH_RESPONSES", "ten", "MAX_BATCH_RESPONSES"),
    ("LDP_SURVEY_DEPLOYMENT", "staging", "DEPLOYMENT"),
])
def test_bad_environment_variables_are_named(tmp_path, monkeypatch, variable, value, named):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError, match=named):
        start(tmp_path)


def test_environment_values_are_read(tmp_path, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_MAX_BATCH_RESPONSES", "50")
    monkeypatch.setenv("LDP_SURVEY_EPSILON_CAP", "2.5")
    app = start(tmp_path)
    assert app.config["MAX_BATCH_RESPONSES"] == 50 and app.config["EPSILON_CAP"] == 2.5


def test_a_secret_of_digits_stays_text(tmp_path, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_SECRET_KEY", "1" * 64)
    monkeypatch.setenv("LDP_SURVEY_STORAGE_KEY", "2" * 64)
    assert start(tmp_path).config["SECRET_KEY"] == "1" * 64
    assert start(tmp_path).config["STORAGE_KEY"] == "2" * 64


def test_production_needs_a_long_secret(tmp_path):
    from ldpsurvey.aggregator.config.signing import write_key_file

    write_key_file(tmp_path / "key.pem")
    production = {"DEPLOYMENT": "production", "KEY_FILE": str(tmp_path / "key.pem"),
                  "PUBLIC_URL": "https://survey.example.org"}
    with pytest.raises(ConfigurationError, match="SECRET_KEY must be at least 32 bytes"):
        start(tmp_path, **production, SECRET_KEY="s" * 31, STORAGE_KEY="k" * 32)
    with pytest.raises(ConfigurationError, match="needs LDP_SURVEY_STORAGE_KEY"):
        start(tmp_path, **production, SECRET_KEY="s" * 32)
    with pytest.raises(ConfigurationError, match="STORAGE_KEY must be at least 32 bytes"):
        start(tmp_path, **production, SECRET_KEY="s" * 32, STORAGE_KEY="k" * 31)
    assert start(tmp_path, **production, SECRET_KEY="s" * 32,
                 STORAGE_KEY="k" * 32).config["DEPLOYMENT"] == "production"
    assert not (tmp_path / "storage-key").exists()  # production never makes one up


def test_unknown_names_with_the_prefix_are_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_CLIENT_DIR", "/somewhere")  # the respondent client's
    monkeypatch.setenv("LDP_SURVEY_WORKERS", "3")              # gunicorn.conf.py's
    start(tmp_path)


def test_the_old_env_name_still_works_with_a_deprecation_warning(tmp_path, monkeypatch):
    from ldpsurvey.aggregator.config.signing import write_key_file

    write_key_file(tmp_path / "key.pem")
    monkeypatch.setenv("LDP_SURVEY_ENV", "production")
    monkeypatch.setenv("LDP_SURVEY_STORAGE_KEY", "k" * 64)  # one database, in both deployments
    with pytest.warns(DeprecationWarning, match="LDP_SURVEY_DEPLOYMENT"):
        app = start(tmp_path, KEY_FILE=str(tmp_path / "key.pem"), SECRET_KEY="s" * 64,
                    PUBLIC_URL="https://survey.example.org")
    assert app.config["DEPLOYMENT"] == "production" and "ENV" not in app.config
    with pytest.warns(DeprecationWarning), pytest.raises(ConfigurationError, match="KEY_FILE"):
        start(tmp_path)  # production without a key file: the alias is really obeyed
    monkeypatch.setenv("LDP_SURVEY_DEPLOYMENT", "development")  # the new name wins
    with pytest.warns(DeprecationWarning):
        assert start(tmp_path).config["DEPLOYMENT"] == "development"


def test_the_old_key_in_code_still_selects_production(tmp_path):
    """create_app({"ENV": "production"}) must not fall back to development silently."""
    with pytest.warns(DeprecationWarning), pytest.raises(ConfigurationError, match="KEY_FILE"):
        start(tmp_path, ENV="production")


def test_idempotency_days_up_to_a_century_are_accepted(tmp_path):
    assert start(tmp_path, IDEMPOTENCY_DAYS=36_500).config["IDEMPOTENCY_DAYS"] == 36_500


@pytest.mark.parametrize("every", [3600, 0.05, 86400])
def test_a_release_interval_above_0_is_accepted(tmp_path, every):
    assert start(tmp_path, RELEASE_EVERY=every).config["RELEASE_EVERY"] == every


def test_production_needs_the_public_url_development_does_not(tmp_path):
    from ldpsurvey.aggregator.config.signing import write_key_file

    write_key_file(tmp_path / "key.pem")
    production = {"DEPLOYMENT": "production", "KEY_FILE": str(tmp_path / "key.pem"),
                  "SECRET_KEY": "s" * 64, "STORAGE_KEY": "k" * 64}
    with pytest.raises(ConfigurationError, match="production needs LDP_SURVEY_PUBLIC_URL"):
        start(tmp_path, **production)
    assert start(tmp_path, **production, PUBLIC_URL="https://survey.example.org")
    development = start(tmp_path, STORAGE_KEY="k" * 64)  # the same database, so its key
    assert development.config["PUBLIC_URL"] is None  # development: the request's origin


def documented_settings() -> set[str]:
    """The settings docs/deployment.md's table names: each row's backquoted names, `_X` short
    for the row's first name with its last part replaced, `..._X` adding X to each."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "deployment.md").read_text()
    table = text.split("## Settings", 1)[1].split("\n\n")[2]
    names: set[str] = set()
    for row in table.splitlines()[2:]:
        row_names: list[str] = []
        for token in re.findall(r"`([A-Z_.]+)`", row.split("|")[1]):
            if token.startswith("..."):
                row_names += [name + token[3:] for name in row_names]
            elif token.startswith("_"):
                row_names.append(row_names[0].rpartition("_")[0] + token)
            else:
                row_names.append(token)
        names.update(row_names)
    return names


def test_the_docs_list_every_setting_and_no_other():
    """docs/deployment.md's settings table and the table the check reads (SETTINGS) name the
    same settings."""
    from ldpsurvey.aggregator.config.settings import SETTINGS

    assert documented_settings() == {setting.name for setting in SETTINGS}


@pytest.mark.parametrize("name", ["EPSILON_CAP", "SESSION_HOURS", "CENTRAL_DELTA",
                                  "DATABASE_LOCK_TIMEOUT", "RATE_LIMIT_LOGIN", "PUBLIC_URL"])
def test_the_error_says_what_the_table_says(tmp_path, name):
    """A refused value's error is the setting's rule in words, from the one table."""
    from ldpsurvey.aggregator.config.settings import SETTINGS

    (setting,) = [s for s in SETTINGS if s.name == name]
    with pytest.raises(ConfigurationError, match=re.escape(f"must be {setting.rule.expected}")):
        create_app({name: "nonsense" if setting.rule.text else -1}, instance_path=tmp_path)
