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
    aggregator,
    database,
    postgres_available,
    require,
    served,
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


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """An empty database: a fresh SQLite file, or the session's PostgreSQL schema."""
    with database(request, tmp_path) as url:
        yield url


@pytest.fixture
def app(database_url, tmp_path):
    with aggregator(database_url, tmp_path / "instance") as application:
        yield application


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
    with served(app) as url:
        yield url


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
