"""Helpers the test modules share (fixtures live in conftest.py)."""

import contextlib
import json
import os
import re
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

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

# Openly answered questions (disclosed, issue 28.1): a number and a choice asked openly beside
# a randomized yes/no.
OPEN_AND_HIDDEN = {"title": "Open and hidden", "release_batch": 1, "questions": [
    {"id": "age", "text": "How old are you?", "type": "numeric", "min": 18, "max": 99,
     "unit": "years", "disclosed": True},
    {"id": "sex", "text": "What is your sex?", "type": "choice", "options": ["Female", "Male"],
     "disclosed": True},
    {"id": "smoked", "text": "Have you smoked in the last month?", "type": "yes_no",
     "epsilon": 1.0}]}

# One survey holding every question type, mechanism and design the product supports (issue
# 39: "every surface, every type"): yes/no and choice by forced response (one a concept), choice
# by OUE, OLH and auto, multi_select by bits, padding and auto, numeric by Duchi's, piecewise,
# hybrid, auto and its distribution (square wave), cheating detection, and yes/no, choice and
# numeric answered openly. tests/conformance/ (the conformance suite) checks it against the
# registry (shared/mechanisms/registry.py, through tests/conformance/mechanisms.py):
# test_every_surface.py takes it through every server surface, test_every_form.py through the
# form's accessibility, plain-word, keyboard and touch-target tests, each also on every entry's
# question alone. Every randomized question at epsilon 0.3 but the distribution at 0.15, 4.35
# in all: within a respondent's default limits (ln 3 a question, 4 ln 3 = 4.39 a submission).
# At most two ticks on each multi_select question.
EVERY_TYPE = {"title": "Every kind of question", "release_batch": 1, "questions": [
    {"id": "smoked", "text": "Have you smoked in the last month?", "type": "yes_no",
     "epsilon": 0.3},
    {"id": "ever", "text": "Have you ever smoked?", "type": "yes_no", "epsilon": 0.3,
     "concept": "smoking.ever"},
    {"id": "shoplifted", "text": "Have you ever taken something from a shop?", "type": "yes_no",
     "design": "cheating_detection", "epsilon": 0.3},
    {"id": "sleep", "text": "How long do you sleep?", "type": "choice",
     "options": ["Under 6 hours", "6 to 8 hours", "Over 8 hours"], "epsilon": 0.3},
    {"id": "fruit", "text": "Which fruit do you eat most?", "type": "choice",
     "options": ["Apples", "Pears", "Plums", "Grapes"], "mechanism": "oue", "epsilon": 0.3},
    {"id": "bread", "text": "Which bread do you buy?", "type": "choice",
     "options": ["White", "Brown", "Rye", "None"], "mechanism": "olh", "epsilon": 0.3},
    {"id": "travel", "text": "How do you get to work?", "type": "choice",
     "options": ["Walk", "Bike", "Bus", "Car"], "mechanism": "auto", "epsilon": 0.3},
    {"id": "sports", "text": "Which of these did you do last week?", "type": "multi_select",
     "options": ["Running", "Swimming", "Cycling", "Rowing"], "mechanism": "bits",
     "max_selected": 2, "epsilon": 0.3},
    {"id": "drinks", "text": "Which of these did you drink last week?", "type": "multi_select",
     "options": ["Beer", "Wine", "Cider", "Spirits"], "mechanism": "padding",
     "max_selected": 2, "epsilon": 0.3},
    {"id": "games", "text": "Which of these did you play last week?", "type": "multi_select",
     "options": ["Chess", "Cards", "Darts", "Bingo"], "mechanism": "auto",
     "max_selected": 2, "epsilon": 0.3},
    {"id": "glasses", "text": "How many glasses of water do you drink a day?",
     "type": "numeric", "min": 0, "max": 20, "unit": "glasses", "mechanism": "duchi",
     "epsilon": 0.3},
    {"id": "steps", "text": "How many thousand steps do you walk a day?", "type": "numeric",
     "min": 0, "max": 30, "mechanism": "piecewise", "epsilon": 0.3},
    {"id": "screen", "text": "How many hours a day do you look at a screen?", "type": "numeric",
     "min": 0, "max": 24, "unit": "hours", "mechanism": "hybrid", "epsilon": 0.3},
    {"id": "commute", "text": "How many minutes does your trip to work take?", "type": "numeric",
     "min": 0, "max": 90, "unit": "minutes", "mechanism": "auto", "epsilon": 0.3},
    {"id": "income", "text": "What is your yearly income, in thousands?", "type": "numeric",
     "min": 0, "max": 200, "unit": "thousand", "mechanism": "auto", "distribution": True,
     "bins": 8, "epsilon": 0.15},
    {"id": "age", "text": "How old are you?", "type": "numeric", "min": 18, "max": 120,
     "unit": "years", "disclosed": True},
    {"id": "region", "text": "Where do you live?", "type": "choice",
     "options": ["North", "South", "East", "West"], "disclosed": True},
    {"id": "member", "text": "Are you a member?", "type": "yes_no", "disclosed": True}]}
# A true answer to each, as typed in a number field or the options ticked.
EVERY_TYPE_ANSWERS = {"smoked": "No", "ever": "Yes", "shoplifted": "No", "sleep": "6 to 8 hours",
                      "fruit": "Pears", "bread": "Rye", "travel": "Bus",
                      "sports": ["Running", "Cycling"], "drinks": ["Wine"], "games": ["Chess"],
                      "glasses": "6", "steps": "7.5", "screen": "5", "commute": "25", "income": "55",
                      "age": "40", "region": "East", "member": "Yes"}
# Words of a report exactly as the server reads it (scheme.shown_report, web/*.js `shown`):
# kept for "How your answers are protected" and `respond --details`, never the plain view.
TECHNICAL = ("marks ", "seed ", "hash value", "randomized cell", "randomized bit",
             "placeholder, ")


def every_type_answered(client, auth, n: int = 240, definition: dict = EVERY_TYPE) -> str:
    """EVERY_TYPE (or another `definition`) published with n responses released, each
    question's true answer drawn at random and randomized by its own scheme on the device's
    draws; its survey id."""
    survey_id = published(client, auth, definition)
    answered(client, auth, survey_id, definition, n, seed=39)
    assert released_n(client, auth, survey_id) == n
    return survey_id


def answered(client, auth, survey_id: str, definition: dict, n: int, seed: int) -> None:
    """n responses to the published `definition`, each true answer drawn at random (seeded)
    and randomized by its question's own scheme on the device's draws, sent in one batch."""
    import random

    from ldpsurvey.shared import parse_definition
    from ldpsurvey.shared.mechanisms.randomizer import secure_draw

    survey = parse_definition(definition)
    rng = random.Random(seed)

    def truth(question):
        if question.type == "multi_select":
            return sorted(rng.sample(range(len(question.options)), rng.randint(0, 2)))
        if question.type == "numeric":
            low, high = question.scheme.low, question.scheme.high
            return rng.randint(low, high) if question.disclosed else rng.uniform(low, high)
        return rng.randrange(len(question.options))

    responses = [{"answers": {q.id: q.scheme.randomize(truth(q), secure_draw)
                              for q in survey.questions}} for _ in range(n)]
    response = client.post(f"/api/surveys/{survey_id}/responses/batch", headers=auth,
                           json={"responses": responses})
    assert response.status_code == 201, response.json


REPOSITORY = Path(__file__).resolve().parents[1]


def doc_pages() -> dict[str, str]:
    """README.md and every docs/*.md page (the MkDocs site), by path from the repository root:
    what the documentation tests read and check."""
    paths = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]
    return {path.relative_to(REPOSITORY).as_posix(): path.read_text() for path in paths}


def doc_text(name: str) -> str:
    """The text of one page: "README.md", or a docs page by name ("exports" or "exports.md")."""
    if name == "README.md":
        return (REPOSITORY / name).read_text()
    return (REPOSITORY / "docs" / (name if name.endswith(".md") else f"{name}.md")).read_text()


def checked_doc_example(marker: str, folder: Path) -> tuple[str, dict]:
    """The one survey-file block marked `marker` in the docs, and `survey check --json`'s
    report of it (asserting the command succeeds)."""
    from click.testing import CliRunner

    from ldpsurvey.cli import main

    (block,) = doc_blocks(marker)
    path = folder / "example.toml"
    path.write_text(block)
    result = CliRunner().invoke(main, ["survey", "check", str(path), "--json"])
    assert result.exit_code == 0, result.output
    return block, json.loads(result.stdout)


def doc_blocks(marker: str) -> list[str]:
    """Every fenced block that follows a `<!-- marker ...-->` comment, in README.md and the
    docs pages, in that order: the blocks the tests run as written (at least one)."""
    pattern = re.compile(rf"<!-- {re.escape(marker)}\b.*?-->\n```\w*\n(.*?)```", re.S)
    blocks = [block for text in doc_pages().values() for block in pattern.findall(text)]
    assert blocks, f"no page holds the block marked <!-- {marker} -->"
    return blocks


# Every API response any test receives through the test client, with a body-less copy of its
# request; each is checked against the OpenAPI description as it arrives (conforms), and
# test_openapi.py checks that they exercise every documented operation.
RECORDED_RESPONSES: list = []
_DESCRIPTIONS: dict = {}  # (MAX_BATCH_RESPONSES, MAX_TOKENS_PER_REQUEST) -> (document, OpenAPI)


def description(config) -> tuple[dict, object]:
    """The app's /api/openapi.json document and its openapi_core validator (parsed once per
    pair of limits it depends on: parsing takes far longer than a validation)."""
    from openapi_core import OpenAPI

    from ldpsurvey.aggregator.web.openapi import document

    limits = (config["MAX_BATCH_RESPONSES"], config["MAX_TOKENS_PER_REQUEST"])
    if limits not in _DESCRIPTIONS:
        described = json.loads(json.dumps(document(*limits)))
        _DESCRIPTIONS[limits] = described, OpenAPI.from_dict(described)
    return _DESCRIPTIONS[limits]


def operation_of(path: str, document: dict) -> str:
    """The documented path template a request path matches (or the path itself)."""
    parts = path.split("/")
    for template in document["paths"]:
        pieces = template.split("/")
        if len(pieces) == len(parts) and all(
                p.startswith("{") or p == q for p, q in zip(pieces, parts, strict=True)):
            return template
    return path


def conforms(config, sent, response) -> None:
    """Raise (openapi_core's error, or AssertionError) unless the response is what the
    description promises for its request: a documented operation's schema, a HEAD's status
    without a body, or for an undocumented path or method a 404/405 with the error body."""
    from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest, WerkzeugOpenAPIResponse

    document, api = description(config)
    request = WerkzeugOpenAPIRequest(sent)
    template = operation_of(request.path, document)
    if request.method == "head":  # Flask answers HEAD as GET without a body
        get = document["paths"][template]["get"]
        assert str(response.status_code) in get["responses"] and not response.data
    elif request.method not in document["paths"].get(template, {}):
        assert response.status_code in (404, 405), (request.method, request.path)
        assert set(response.json) == {"error", "detail"}
    else:
        api.validate_response(request, WerkzeugOpenAPIResponse(response))


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


@contextlib.contextmanager
def database(request, folder: Path) -> Iterator[str]:
    """The URL of an empty database for a fixture parametrized "sqlite" or "postgresql": a
    fresh SQLite file in folder, or the session's PostgreSQL schema (emptied afterwards)."""
    if request.param == "sqlite":
        yield f"sqlite:///{folder / 'test.sqlite3'}"
        return
    schema = request.getfixturevalue("postgres_schema")
    try:
        yield postgres_url(schema)
    finally:
        empty_tables(schema)


@contextlib.contextmanager
def aggregator(database_url: str, instance_path: Path):
    """The aggregator on this database, its test client recording every API response."""
    from ldpsurvey.aggregator import close_app, create_app

    application = create_app({"DATABASE_URL": database_url}, instance_path=instance_path)
    application.test_client_class = recording_client_class()
    try:
        yield application
    finally:
        close_app(application)


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
    """The test server's URL with `schema` as the search path and the application name, so a
    test that cuts connections cuts only its own session's (parallel runs share the server)."""
    return f"{POSTGRES_URL}?options=-csearch_path%3D{schema}&application_name={schema}"


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
            if kwargs["buffered"] and (sent.path.startswith("/api/") or sent.path in ("/healthz", "/readyz")):
                copy = EnvironBuilder(method=sent.method, path=sent.path,
                                      query_string=sent.query_string.decode(),
                                      headers=dict(sent.headers)).get_environ()
                RECORDED_RESPONSES.append((Request(copy), response))
                conforms(self.application.config, Request(copy), response)
            return response

    return RecordingClient


def published(client, auth, definition: dict) -> str:
    """Publish `definition` through the API (asserting 201) and return its survey id."""
    response = client.post("/api/surveys", json=definition, headers=auth)
    assert response.status_code == 201, response.json
    return response.json["survey_id"]


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
    from ldpsurvey.aggregator.services import releases
    from ldpsurvey.aggregator.store.connection import connection_to

    with connection_to(app.extensions["ldp_database"]) as connection:
        return releases.release_due(connection, app.config["IDEMPOTENCY_DAYS"])


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


@contextlib.contextmanager
def served(app) -> Iterator[str]:
    """The app served over real HTTP on a loopback port, in a thread; its URL, which is also
    the app's PUBLIC_URL (where respondents reach it: signed into new surveys)."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    # A short poll interval: shutdown() waits for it (0.5 s by default, for every test).
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01},
                              daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}"
    app.config["PUBLIC_URL"] = url
    try:
        yield url
    finally:
        server.shutdown()
        thread.join()


def sent_body(stdout: str) -> dict:
    """The request body `respond --details` showed as exactly what will be sent."""
    return json.loads(stdout.split("The request body: ")[1].splitlines()[0])


# The sandbox of every systemd unit ldp-survey ships or writes (deploy/ldp-survey.service,
# `ldp-survey deploy systemd`); each sets its capabilities (CapabilityBoundingSet) itself.
SYSTEMD_SANDBOX = {
    "NoNewPrivileges": "true", "PrivateTmp": "true",
    "ProtectSystem": "strict", "ProtectHome": "true", "ReadWritePaths": "/var/lib/ldp-survey",
    "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
    "UMask": "0077", "ProtectKernelTunables": "true", "ProtectKernelModules": "true",
    "ProtectControlGroups": "true", "PrivateDevices": "true",
    "SystemCallFilter": "@system-service", "SystemCallArchitectures": "native",
    "LockPersonality": "true", "RestrictNamespaces": "true", "RestrictRealtime": "true",
    "RestrictSUIDSGID": "true", "MemoryDenyWriteExecute": "true", "ProtectHostname": "true",
    "ProtectClock": "true",
}


def unit_settings(path: Path) -> dict[str, dict[str, list[str]]]:
    """A systemd unit file as {section: {key: [values, in order]}}."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def tally(scheme, reports) -> list[int]:
    """A scheme's counters after these reports, as the aggregator's releases add them."""
    counts = [0] * scheme.counters
    for report in reports:
        for counter, amount in scheme.tally(report):
            counts[counter] += amount
    return counts


def respond(live_server: str, survey_id: str, answers: str, client_dir, *options: str):
    """`ldp-survey respond --yes` with these --answers from a device keeping its state in
    client_dir; the click result."""
    from click.testing import CliRunner

    from ldpsurvey.cli import main

    return CliRunner(env={"LDP_SURVEY_CLIENT_DIR": str(client_dir)}).invoke(main, [
        "respond", "--url", live_server, "--survey", survey_id, "--yes", "--answers", answers,
        *options])


def run_mock(folder, definition: dict, truth: str, *options: str):
    """`ldp-survey mock` on this definition (written to folder as JSON) and this scenario (TOML
    text); the click result."""
    import json

    from click.testing import CliRunner

    from ldpsurvey.cli import main

    (folder / "survey.json").write_text(json.dumps(definition))
    (folder / "truth.toml").write_text(truth)
    return CliRunner().invoke(main, ["mock", "--survey", str(folder / "survey.json"), "--truth",
                                     str(folder / "truth.toml"), *options])


def sent_and_released(client, auth, verified, submission, state) -> list[int]:
    """Submit a prepared submission as the respondent client does, run the next release, and
    return each question's released n."""
    from ldpsurvey.client import submit

    submit(verified, submission, state)
    release_due(client.application)
    body = client.get(f"/api/surveys/{verified.survey.survey_id}/estimates", headers=auth).json
    return [question["n"] for question in body["questions"]]
