"""Shared fixtures: the aggregator on SQLite and on a real PostgreSQL server, its clients and a
published survey. Helpers that test modules import live in helpers.py.

PostgreSQL tests share one schema per session, migrated once; every table but schema_version
is emptied after each test, which costs far less than a schema per test.
"""

import json
import os
import secrets
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

from helpers import (
    POSTGRES_URL,
    SURVEY,
    postgres_available,
    postgres_url,
    recording_client_class,
    require,
)

# Hypothesis' deadline times each example, and time is not what any property here checks: on a
# loaded machine (CI, parallel workers) it fails at random ("Unreliable test timings").
settings.register_profile("ldp", deadline=None)
settings.load_profile("ldp")

REFERENCE = json.loads((Path(__file__).parent / "reference" / "forced_response_cases.json")
                       .read_text())


@pytest.fixture(scope="session", autouse=True)
def limits_no_test_reaches():
    """The suite floods the aggregator from one address (127.0.0.1), in-process and through the
    processes it starts (they inherit the environment): every class of rate limit is set far
    above what any test sends. test_limits.py tests the real limits with its own settings."""
    from ldpsurvey.aggregator.web.limits import SETTINGS

    names = [f"LDP_SURVEY_{name}" for name in SETTINGS.values()]
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(dict.fromkeys(names, "1000000 per minute"))
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def reference() -> dict:
    """The worked reference cases from ../shared/reference (copied into tests/reference)."""
    return REFERENCE


@pytest.fixture(scope="session")
def postgres_schema():
    """One private schema on the PostgreSQL server for the whole session; yields its name."""
    require(postgres_available(), f"no PostgreSQL server at {POSTGRES_URL}")
    import psycopg

    schema = f"ldp_test_{secrets.token_hex(6)}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield schema
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def empty_tables(schema: str) -> None:
    """Delete every row but the schema version (DELETE: far quicker than TRUNCATE on tables
    this small; foreign-key triggers are off for this session, so any order will do)."""
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        tables = [name for (name,) in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename <> "
            "'schema_version'", (schema,))]
        with conn.transaction():
            for table in tables:
                conn.execute(f"DELETE FROM {schema}.{table}")


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """An empty database: a fresh SQLite file, or the session's PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'test.sqlite3'}"
        return
    schema = request.getfixturevalue("postgres_schema")
    try:
        yield postgres_url(schema)
    finally:
        empty_tables(schema)


@pytest.fixture
def app(database_url, tmp_path):
    from ldpsurvey.aggregator import close_app, create_app

    application = create_app({"DATABASE_URL": database_url}, instance_path=tmp_path / "instance")
    application.test_client_class = recording_client_class()
    yield application
    close_app(application)


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def researcher_key(app) -> str:
    from ldpsurvey.aggregator import create_api_key

    return create_api_key(app).key


@pytest.fixture
def auth(researcher_key) -> dict[str, str]:
    return {"Authorization": f"Bearer {researcher_key}"}


@pytest.fixture
def survey_id(client, auth) -> str:
    response = client.post("/api/surveys", json=SURVEY, headers=auth)
    assert response.status_code == 201, response.json
    return response.json["survey_id"]


@pytest.fixture
def live_server(app):
    """The app served over real HTTP on a loopback port, in a thread."""
    import threading

    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    # A short poll interval: shutdown() waits for it (0.5 s by default, for every test).
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01},
                              daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}"
    app.config["PUBLIC_URL"] = url  # where respondents reach it: signed into new surveys
    yield url
    server.shutdown()
    thread.join()


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, headless, driven by Playwright (one per test module)."""
    require(Path(CHROMIUM).exists(),
            "Chromium is not installed (apt-get install chromium chromium-driver)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "playwright is not installed (pip install 'ldp-survey[test]')")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"])
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    """A fresh page (its own storage) at a phone-like 420 by 900 px."""
    context = browser.new_context(viewport={"width": 420, "height": 900})
    page = context.new_page()
    yield page
    context.close()
