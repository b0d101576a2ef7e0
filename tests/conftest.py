"""Shared fixtures. Tests that need a real external part (Chromium, a PostgreSQL server) call
`require(available, reason)`: under LDP_REQUIRE_ALL=1 a missing part fails the test; otherwise
the test skips with the reason in capitals so nobody mistakes a skip for a pass.
"""

import json
import os
from pathlib import Path

import pytest

REFERENCE = json.loads((Path(__file__).parent / "reference" / "forced_response_cases.json")
                       .read_text())


def require(available: bool, reason: str) -> None:
    """Fail (LDP_REQUIRE_ALL=1) or skip loudly when a real dependency is missing."""
    if available:
        return
    if os.environ.get("LDP_REQUIRE_ALL") == "1":
        pytest.fail(f"LDP_REQUIRE_ALL=1 but {reason}", pytrace=False)
    pytest.skip(f"SKIPPED, NOT TESTED: {reason} (set LDP_REQUIRE_ALL=1 to make this fail)")


@pytest.fixture(scope="session")
def reference() -> dict:
    """The worked reference cases from ../shared/reference (copied into tests/reference)."""
    return REFERENCE


# --- the aggregator, on SQLite and on a real PostgreSQL server ---------------------------------

POSTGRES_URL = os.environ.get("LDP_TEST_POSTGRES_URL",
                              "postgresql://postgres@127.0.0.1:5432/test")


def postgres_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(POSTGRES_URL, connect_timeout=3):
            return True
    except Exception:
        return False


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """A fresh, empty database: a SQLite file, or a private schema on the PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'test.sqlite3'}"
        return
    require(postgres_available(), f"no PostgreSQL server at {POSTGRES_URL}")
    import secrets

    import psycopg

    schema = f"ldp_test_{secrets.token_hex(6)}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


# Every API response any test receives through the test client, with a body-less copy of its
# request, for the OpenAPI conformance check in test_openapi.py.
RECORDED_RESPONSES: list = []


def recording_client_class():
    from flask.testing import FlaskClient
    from werkzeug.test import EnvironBuilder
    from werkzeug.wrappers import Request

    class RecordingClient(FlaskClient):
        def open(self, *args, **kwargs):
            response = super().open(*args, **kwargs)
            sent = response.request
            if sent.path.startswith("/api/") or sent.path == "/healthz":
                copy = EnvironBuilder(method=sent.method, path=sent.path,
                                      query_string=sent.query_string.decode(),
                                      headers=dict(sent.headers)).get_environ()
                RECORDED_RESPONSES.append((Request(copy), response))
            return response

    return RecordingClient


@pytest.fixture
def app(database_url, tmp_path):
    from ldpsurvey.aggregator import create_app

    application = create_app({"DATABASE_URL": database_url}, instance_path=tmp_path / "instance")
    application.test_client_class = recording_client_class()
    yield application
    application.extensions["ldp_database"].close()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def researcher_key(app) -> str:
    from ldpsurvey.aggregator.auth import create_key
    from ldpsurvey.aggregator.db import get_db

    with app.app_context():
        return create_key(get_db(), "researcher")


@pytest.fixture
def auth(researcher_key) -> dict[str, str]:
    return {"Authorization": f"Bearer {researcher_key}"}


SURVEY = {
    "title": "Habits",
    "description": "A test survey.",
    "public_results": False,
    "questions": [
        {"id": "smoked", "text": "Smoked?", "type": "yes_no", "alpha": 0.5, "beta": 0.5},
        {"id": "drove", "text": "Drove after drinking?", "type": "yes_no", "alpha": 0.75,
         "beta": 0.3},
        {"id": "sleep", "text": "Sleep?", "type": "choice", "options": ["<6", "6-8", ">8"],
         "epsilon": 1.0},
    ],
}


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
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()
