"""The conformance suite's fixtures: one aggregator per test module (on SQLite and on the real
PostgreSQL server; the browser modules choose SQLite alone), its researcher key and its server,
shared by the module's tests instead of made again for each."""

import pytest

from helpers import aggregator, database, served


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database_url(request, tmp_path_factory):
    """An empty database for the module: a fresh SQLite file, or the session's PostgreSQL
    schema (emptied after the module)."""
    with database(request, tmp_path_factory.mktemp("database")) as url:
        yield url


@pytest.fixture(scope="module")
def app(database_url, tmp_path_factory):
    with aggregator(database_url, tmp_path_factory.mktemp("instance")) as application:
        yield application


@pytest.fixture(scope="module")
def researcher_key(app) -> str:
    from ldpsurvey.aggregator import create_api_key

    return create_api_key(app).key


@pytest.fixture(scope="module")
def auth(researcher_key) -> dict[str, str]:
    return {"Authorization": f"Bearer {researcher_key}"}


@pytest.fixture(scope="module")
def live_server(app):
    with served(app) as url:
        yield url
