"""Helpers the test modules share (fixtures live in conftest.py)."""

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

POSTGRES_URL = os.environ.get("LDP_TEST_POSTGRES_URL",
                              "postgresql://postgres@127.0.0.1:5432/test")

SURVEY = {
    "title": "Habits",
    "description": "A test survey.",
    "public_results": False,
    # Every response is released at the next scheduled instant (tests run it with release_due,
    # below) however few arrived; the release-batch tests (test_release_batches.py) set their own.
    "release_batch": 1,
    "questions": [
        {"id": "smoked", "text": "Smoked?", "type": "yes_no", "alpha": 0.5, "beta": 0.5},
        {"id": "drove", "text": "Drove after drinking?", "type": "yes_no", "alpha": 0.75,
         "beta": 0.3},
        {"id": "sleep", "text": "Sleep?", "type": "choice", "options": ["<6", "6-8", ">8"],
         "epsilon": 1.0},
    ],
}

# Every API response any test receives through the test client, with a body-less copy of its
# request, for the OpenAPI conformance check in test_openapi.py.
RECORDED_RESPONSES: list = []


def require(available: bool, reason: str) -> None:
    """Fail (LDP_REQUIRE_ALL=1) or skip loudly when a real dependency is missing: the reason is
    in capitals so nobody mistakes a skip for a pass."""
    if available:
        return
    if os.environ.get("LDP_REQUIRE_ALL") == "1":
        pytest.fail(f"LDP_REQUIRE_ALL=1 but {reason}", pytrace=False)
    pytest.skip(f"SKIPPED, NOT TESTED: {reason} (set LDP_REQUIRE_ALL=1 to make this fail)")


def postgres_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(POSTGRES_URL, connect_timeout=3):
            return True
    except Exception:
        return False


MEMCACHED = ("127.0.0.1", 11211)  # .ci/run starts it


def memcached_available() -> bool:
    """Whether memcached answers `version` at MEMCACHED."""
    import socket

    try:
        with socket.create_connection(MEMCACHED, timeout=3) as sock:
            sock.sendall(b"version\r\n")
            return sock.recv(64).startswith(b"VERSION")
    except OSError:
        return False


def postgres_url(schema: str) -> str:
    """The test server's URL with `schema` as the search path."""
    return f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"


def recording_client_class():
    """A Flask test client that records every API response in RECORDED_RESPONSES."""
    from flask.testing import FlaskClient
    from werkzeug.test import EnvironBuilder
    from werkzeug.wrappers import Request

    class RecordingClient(FlaskClient):
        def open(self, *args, **kwargs):
            # Buffered unless a test asks otherwise: a streamed export left unread would hold
            # its database snapshot, and the app context it runs in, for the rest of the test.
            kwargs.setdefault("buffered", True)
            response = super().open(*args, **kwargs)
            sent = response.request
            # an unbuffered body is the test's to read: only buffered ones can be checked later
            if kwargs["buffered"] and (sent.path.startswith("/api/") or sent.path == "/healthz"):
                copy = EnvironBuilder(method=sent.method, path=sent.path,
                                      query_string=sent.query_string.decode(),
                                      headers=dict(sent.headers)).get_environ()
                RECORDED_RESPONSES.append((Request(copy), response))
            return response

    return RecordingClient


def released_n(client, auth, survey_id: str) -> int:
    """How many responses the survey counts once the releases due now have run (release_due):
    its first question's n, as a researcher reads it."""
    release_due(client.application)
    return client.get(f"/api/surveys/{survey_id}/estimates",
                      headers=auth).json["questions"][0]["n"]


def release_due(app) -> int:
    """Run the releases due at a scheduled instant now (releases.release_due), as the app's
    release clock would: for tests that read results right after posting, without waiting for
    the clock. Returns how many responses were released."""
    from ldpsurvey.aggregator import releases
    from ldpsurvey.aggregator.database import connection_to

    with connection_to(app.extensions["ldp_database"]) as connection:
        return releases.release_due(connection)


@contextlib.contextmanager
def serving(handler: type) -> Iterator[str]:
    """A stand-in server answering with `handler` on a loopback port, in a thread; its URL.
    (Polled every 10 ms, so shutdown() returns at once: the default polls every 0.5 s.)"""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


def sent_body(stdout: str) -> dict:
    """The request body `respond --details` showed as exactly what will be sent."""
    return json.loads(stdout.split("The request body: ")[1].splitlines()[0])
