"""Schema migrations: a database written by release 0.1.0 (before versions were recorded) is
upgraded in place with nothing lost; a newer schema is refused; replicas starting together
migrate once."""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ldpsurvey.aggregator import ConfigurationError, close_app, create_api_key, create_app
from ldpsurvey.aggregator.store.migrations import LATEST
from ldpsurvey.aggregator.web.request_connection import get_db

from helpers import POSTGRES_URL, SURVEY, postgres_available, postgres_url, require

RELEASE = Path(__file__).parents[1] / "fixtures" / "release-0.1.0"


@pytest.fixture
def schema():
    """A new, empty PostgreSQL schema of its own (the session's is already migrated)."""
    require(postgres_available(), f"no PostgreSQL server at {POSTGRES_URL}")
    import secrets

    import psycopg

    name = f"ldp_migrate_{secrets.token_hex(6)}"
    try:
        yield name
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def created(schema: str) -> str:
    """Create the empty PostgreSQL schema `schema` (the fixture's name); its URL."""
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return postgres_url(schema)


def release_database(kind: str, tmp_path: Path, schema: str | None) -> tuple[str, dict]:
    """A copy of the database release 0.1.0 wrote (SQLite file, or its pg_dump loaded into
    `schema`), and what that release was given and answered."""
    facts = json.loads((RELEASE / f"{kind}.json").read_text())
    if kind == "sqlite":
        shutil.copy(RELEASE / "database.sqlite3", tmp_path / "release.sqlite3")
        return f"sqlite:///{tmp_path / 'release.sqlite3'}", facts
    import psycopg

    dump = (RELEASE / "postgresql.sql").read_text().replace("ldp_release_0_1_0", schema)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(dump)
    return postgres_url(schema), facts


def private_copy(key: Path, folder: Path) -> str:
    """The fixture's key as a 0600 file (git checks files out 0644)."""
    copy = folder / key.name
    copy.write_bytes(key.read_bytes())
    copy.chmod(0o600)
    return str(copy)


def version_of(app) -> int:
    with app.app_context():
        return get_db().query("SELECT version FROM schema_version")[0][0]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_release_0_1_0_database_is_upgraded_with_nothing_lost(kind, tmp_path, request):
    schema = request.getfixturevalue("schema") if kind == "postgresql" else None
    url, facts = release_database(kind, tmp_path, schema)
    key_file = private_copy(RELEASE / "signing-key.pem", tmp_path)
    app = create_app({"DATABASE_URL": url, "KEY_FILE": key_file},
                     instance_path=tmp_path / "instance")
    try:
        assert version_of(app) == LATEST
        client = app.test_client()
        researcher = {"Authorization": f"Bearer {facts['researcher_key']}"}
        relay = {"Authorization": f"Bearer {facts['relay_key']}"}
        surveys = facts["surveys"]
        assert client.get("/api/key").json == facts["public_key"]
        listed = client.get("/api/surveys", headers=researcher).json["surveys"]
        assert {s["survey_id"]: s["status"] for s in listed} == {
            surveys["open"]: "open", surveys["invited"]: "open", surveys["closed"]: "closed"}
        before = facts["estimates_open"]
        after = client.get(f"/api/surveys/{surveys['open']}/estimates", headers=researcher).json
        # Nothing lost: the same design and counts give the same unbiased estimates (the
        # intervals and extra fields of later releases aside).
        def data(document):
            return [(q["id"], q["n"], q["alpha"], q["beta"], round(q["epsilon"], 12),
                     [(o["reported_count"], round(o["p_hat"], 12)) for o in q["options"]])
                    for q in document["questions"]]

        assert data(after) == data(before)
        # An idempotent retry of a response stored by 0.1.0 is still answered as a replay.
        first = facts["single_responses"][0]
        replay = client.post(f"/api/surveys/{surveys['open']}/responses",
                             json={"answers": first["answers"]},
                             headers={"Idempotency-Key": first["idempotency_key"]})
        assert replay.status_code == 201 and replay.headers["Idempotent-Replayed"] == "true"
        batch = client.post(f"/api/surveys/{surveys['open']}/responses/batch",
                            json={"responses": facts["batch"]["responses"]},
                            headers={**relay, "Idempotency-Key": facts["batch"]["idempotency_key"]})
        assert batch.status_code == 201 and batch.headers["Idempotent-Replayed"] == "true"
        # Tokens minted by 0.1.0: the spent one stays spent, the unspent one works once.
        answer = {"answers": {"smoked": 1, "sleep": 0}}
        invited = f"/api/surveys/{surveys['invited']}/responses"
        assert client.post(invited, json=answer,
                           headers={"Survey-Token": facts["spent_token"]}).status_code == 403
        assert client.post(invited, json=answer,
                           headers={"Survey-Token": facts["unspent_token"]}).status_code == 201
        assert client.post(invited, json=answer,
                           headers={"Survey-Token": facts["unspent_token"]}).status_code == 403
        closed = client.post(f"/api/surveys/{surveys['closed']}/responses", json=answer)
        assert closed.status_code == 409
        counted = client.get(f"/api/surveys/{surveys['open']}/estimates", headers=researcher)
        assert counted.json["questions"][0]["n"] == before["questions"][0]["n"] == 8
        # Step 7: the release summaries hold what the releases of then add up to.
        from ldpsurvey.aggregator.store.connection import today
        from ldpsurvey.aggregator.store.releases import (
            last_release_number,
            released_count,
            released_per_day,
            smallest_release,
        )

        with app.app_context():
            db = get_db()
            for survey_id in surveys.values():
                released, smallest, last, days = db.query(
                    "SELECT COALESCE(SUM(size), 0), MIN(size), COALESCE(MAX(release_number), 0), "
                    "COUNT(DISTINCT released_day) FROM releases WHERE survey_id = ?",
                    (survey_id,))[0]
                assert (released_count(db, survey_id), smallest_release(db, survey_id),
                        last_release_number(db, survey_id)) == (released, smallest, last)
                timeline = released_per_day(db, survey_id)
                assert len(timeline) == days and sum(n for _, n in timeline) == released
            assert released_count(db, surveys["open"]) == 8
            # Step 8: each response of then in its bucket, which the export reads in order.
            from ldpsurvey.aggregator.config.ids import bucket_of

            stored = db.query("SELECT bucket, response_id FROM responses")
            assert len(stored) >= 8 and all(b == bucket_of(i) for b, i in stored)
            # Step 10: the records of then, all released, are dated the day of the step (kept
            # IDEMPOTENCY_DAYS from it; no release has run since).
            assert db.query("SELECT released, released_day FROM idempotency_keys "
                            "GROUP BY released, released_day") == [(1, today())]
        # Accounts (step 3): the old keys keep their surveys, a new researcher sees none of
        # them, the old relay key fills no invitation-only survey, and an admin manages them.
        from ldpsurvey.aggregator import create_api_key
        from ldpsurvey.aggregator.services import accounts

        newcomer = {"Authorization": f"Bearer {create_api_key(app).key}"}
        assert client.get("/api/surveys", headers=newcomer).json == {"surveys": []}
        assert client.get(f"/api/surveys/{surveys['open']}/estimates",
                          headers=newcomer).status_code == 404
        # The old relay key fills the old surveys that were not invitation-only, and no other.
        new_survey = client.post("/api/surveys", json=SURVEY, headers=newcomer).json["survey_id"]
        for survey_id in (surveys["invited"], new_survey):
            refused = client.post(f"/api/surveys/{survey_id}/responses/batch",
                                  json={"responses": [{"answers": {"smoked": 1, "sleep": 0}}]},
                                  headers=relay)
            assert refused.status_code == 403
        shared = client.post(f"/api/surveys/{surveys['invited']}/tokens", json={"count": 1},
                             headers=researcher)
        assert shared.status_code == 403  # shared, not owned: minting needs an admin now
        admin = {"Authorization": f"Bearer {create_api_key(app, 'admin').key}"}
        assert client.post(f"/api/surveys/{surveys['invited']}/tokens", json={"count": 1},
                           headers=admin).status_code == 201
        with app.app_context():
            old = [k for k in accounts.list_keys(get_db()) if k.created is None]
        assert sorted(k.role for k in old) == ["relay", "researcher"]
    finally:
        close_app(app)
    # Starting again finds nothing to do.
    again = create_app({"DATABASE_URL": url, "KEY_FILE": key_file},
                       instance_path=tmp_path / "instance")
    assert version_of(again) == LATEST
    close_app(again)


def test_a_newer_schema_is_refused(app, tmp_path):
    with app.app_context():
        db = get_db()
        with db.transaction():
            db.execute("UPDATE schema_version SET version = ?", (LATEST + 1,))
    try:
        with pytest.raises(ConfigurationError, match=f"version {LATEST + 1}.*upgrade ldp-survey"):
            create_app({"DATABASE_URL": app.config["DATABASE_URL"]},
                       instance_path=tmp_path / "other")
    finally:
        with app.app_context():
            db = get_db()
            with db.transaction():
                db.execute("UPDATE schema_version SET version = ?", (LATEST,))


REPLICA = """
import pathlib, sys, time
from ldpsurvey.aggregator import close_app, create_app
url, folder = sys.argv[1], pathlib.Path(sys.argv[2])
(folder / sys.argv[3]).touch()  # imported: ready
while not (folder / "go").exists():
    time.sleep(0.005)
close_app(create_app({"DATABASE_URL": url}, instance_path=folder / "instance"))
"""


def test_replicas_starting_together_migrate_once(schema, tmp_path):
    """Four replicas (processes, as deployed) start at once on one empty PostgreSQL schema:
    all start, one schema. They wait, imported, for one signal, so their migrations overlap."""
    url = created(schema)
    replicas = [subprocess.Popen([sys.executable, "-c", REPLICA, url,
                                  str(tmp_path), f"ready-{i}"], stderr=subprocess.PIPE, text=True)
                for i in range(4)]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("ready-*"))) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    (tmp_path / "go").touch()
    for replica in replicas:
        _, errors = replica.communicate(timeout=60)
        assert replica.returncode == 0, errors
    app = create_app({"DATABASE_URL": url},
                     instance_path=tmp_path / "instance")  # the replicas' storage key
    try:
        with app.app_context():
            assert get_db().query("SELECT version FROM schema_version") == [(LATEST,)]
    finally:
        close_app(app)


def test_step_4_adds_empty_joint_counters_that_new_declared_crosstabs_fill(tmp_path):
    """Surveys of earlier releases declared no cross-tabs: step 4 adds the table, empty; a
    survey published after it with a declared pair gets a zero counter per cell."""
    url, facts = release_database("sqlite", tmp_path, None)
    app = create_app({"DATABASE_URL": url, "KEY_FILE": private_copy(RELEASE / "signing-key.pem",
                                                                    tmp_path)},
                     instance_path=tmp_path / "instance")
    try:
        researcher = {"Authorization": f"Bearer {facts['researcher_key']}"}
        with app.app_context():
            assert get_db().query("SELECT COUNT(*) FROM joint_counts") == [(0,)]
        declared = {**SURVEY, "crosstabs": [["smoked", "sleep"]]}
        client = app.test_client()
        assert client.post("/api/surveys", json=declared, headers=researcher).status_code == 201
        with app.app_context():
            assert get_db().query("SELECT COUNT(*), SUM(count) FROM joint_counts") == [(6, 0)]
    finally:
        close_app(app)


BODY = {"answers": {"smoked": 1, "drove": 0, "sleep": 2}}


def written_before_step(step: int, url: str, key: str, tmp_path, monkeypatch, write) -> tuple:
    """A database at `url` as the release before schema step `step` left it, with one survey,
    and in one transaction what `write(db, survey_id, rows, claim)` stores of BODY, sent with
    Idempotency-Key `key` (rows: its canonical JSON; claim: its idempotency claim). Returns
    the survey's id and the claim."""
    from ldpsurvey.aggregator.services.answers import parse_answers
    from ldpsurvey.aggregator.store import migrations
    from ldpsurvey.aggregator.store.idempotency import idempotency_claim
    from ldpsurvey.aggregator.store.responses import answers_json
    from ldpsurvey.aggregator.store.surveys import get_survey

    monkeypatch.setattr(migrations, "STEPS", migrations.STEPS[:step - 1])
    monkeypatch.setattr(migrations, "LATEST", step - 1)
    app = create_app({"DATABASE_URL": url}, instance_path=tmp_path / "instance")
    try:
        auth = {"Authorization": f"Bearer {create_api_key(app).key}"}
        survey_id = app.test_client().post("/api/surveys", json=SURVEY,
                                           headers=auth).json["survey_id"]
        with app.app_context():
            db = get_db()
            survey = get_survey(db, survey_id).survey
            rows = answers_json(survey, [parse_answers(survey, BODY)])
            claim = idempotency_claim(db, key, "\n".join(rows))
            with db.transaction():
                write(db, survey_id, rows, claim)
    finally:
        close_app(app)
        monkeypatch.undo()
    return survey_id, claim


def test_step_12_keeps_unreleased_records_as_released_that_day(tmp_path, monkeypatch):
    """Before step 12 a keyed request wrote an unreleased idempotency record beside its pending
    group, with nothing to join the two; step 12 keeps such records as released on the day it
    runs, so a retry is still answered as its first request (and one with another body is a
    conflict) until IDEMPOTENCY_DAYS from then, and their group still releases whole."""
    from ldpsurvey.aggregator.store.connection import today
    from ldpsurvey.aggregator.store.pending import sealed_pending
    from ldpsurvey.aggregator.store.surveys import get_survey

    from helpers import release_due

    def step_11_intake(db, survey_id, rows, claim):
        db.execute("INSERT INTO idempotency_keys (survey_id, key_hash, body_mac, accepted, "
                   "released) VALUES (?, ?, ?, 1, 0)", (survey_id, claim.key_hash, claim.body_mac))
        db.execute("INSERT INTO pending (survey_id, pending_id, size, answers) "
                   "VALUES (?, 'step-11-group', 1, ?)",
                   (survey_id, sealed_pending(db, get_survey(db, survey_id).survey,
                                                    rows)))

    url = f"sqlite:///{tmp_path / 'step11.sqlite3'}"
    key = "kept-across-step-12"
    survey_id, _ = written_before_step(12, url, key, tmp_path, monkeypatch, step_11_intake)
    app = create_app({"DATABASE_URL": url}, instance_path=tmp_path / "instance")
    try:
        assert version_of(app) == LATEST
        client = app.test_client()
        with app.app_context():
            db = get_db()
            assert db.query("SELECT released, released_day FROM idempotency_keys") == [
                (1, today())]
            assert db.query("SELECT key_hash, body_mac FROM pending") == [(None, None)]
            assert db.query("SELECT name FROM sqlite_master WHERE name = "
                            "'idempotency_unreleased'") == []
        path = f"/api/surveys/{survey_id}/responses"
        again = client.post(path, json=BODY, headers={"Idempotency-Key": key})
        assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
        other = client.post(path, json={"answers": {"smoked": 0, "drove": 0, "sleep": 2}},
                            headers={"Idempotency-Key": key})
        assert other.status_code == 409
        assert release_due(app) == 1  # the step-11 group, once
    finally:
        close_app(app)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_step_13_gives_keyed_groups_their_key_hash_as_id(kind, tmp_path, monkeypatch, request):
    """Step 13 renames each keyed pending group (made at step 12 under a random id, found by
    the index of keys) to its claim's key hash and drops that index: a retry is still answered
    as its first request, another body is still a conflict, a group without a key keeps its
    id, and both release once, after which the retry is answered from the record."""
    from ldpsurvey.aggregator.config.ids import new_ids
    from ldpsurvey.aggregator.store.pending import sealed_pending
    from ldpsurvey.aggregator.store.surveys import get_survey

    from helpers import release_due

    keyed_id, plain_id = new_ids(2)

    def step_12_intake(db, survey_id, rows, claim):  # a keyed group, and one without a key
        sealed = sealed_pending(db, get_survey(db, survey_id).survey, rows)
        for pending_id, key_hash, body_mac in [(keyed_id, claim.key_hash, claim.body_mac),
                                               (plain_id, None, None)]:
            db.execute("INSERT INTO pending (survey_id, pending_id, size, answers, key_hash, "
                       "body_mac) VALUES (?, ?, 1, ?, ?, ?)",
                       (survey_id, pending_id, sealed, key_hash, body_mac))

    url = (f"sqlite:///{tmp_path / 'step12.sqlite3'}" if kind == "sqlite"
           else created(request.getfixturevalue("schema")))
    key = "kept-across-step-13"
    survey_id, claim = written_before_step(13, url, key, tmp_path, monkeypatch, step_12_intake)
    app = create_app({"DATABASE_URL": url}, instance_path=tmp_path / "instance")
    try:
        assert version_of(app) == LATEST
        client = app.test_client()
        with app.app_context():
            db = get_db()
            assert sorted(db.query("SELECT pending_id, key_hash FROM pending")) == sorted(
                [(claim.key_hash, claim.key_hash), (plain_id, None)])
            indexes = ("SELECT name FROM sqlite_master WHERE type = 'index'" if kind == "sqlite"
                       else "SELECT indexname FROM pg_indexes WHERE tablename = 'pending' "
                       "AND schemaname = current_schema()")
            assert "pending_by_key" not in {name for (name,) in db.query(indexes)}
        path = f"/api/surveys/{survey_id}/responses"
        again = client.post(path, json=BODY, headers={"Idempotency-Key": key})
        assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
        other = client.post(path, json={"answers": {"smoked": 0, "drove": 0, "sleep": 2}},
                            headers={"Idempotency-Key": key})
        assert other.status_code == 409
        assert release_due(app) == 2  # each group once
        after = client.post(path, json=BODY, headers={"Idempotency-Key": key})
        assert after.status_code == 201 and after.headers["Idempotent-Replayed"] == "true"
        assert release_due(app) == 0
    finally:
        close_app(app)


def test_step_13_renames_a_group_an_older_replica_commits_meanwhile(tmp_path, monkeypatch,
                                                                    schema):
    """PostgreSQL: a replica of the release before inserts a keyed group under a random id
    (as it did) in a transaction still open when step 13 starts. The step waits for it and
    renames it too: no keyed group is left under another id than its key's hash, where a retry
    would not find it and be stored again."""
    import threading

    import psycopg

    url = created(schema)
    survey_id, claim = written_before_step(13, url, "racing-step-13", tmp_path, monkeypatch,
                                           lambda *_: None)
    with psycopg.connect(url) as older:  # a transaction of its own, open
        older.execute("INSERT INTO pending (survey_id, pending_id, size, answers, key_hash, "
                      "body_mac) VALUES (%s, 'older-replica-id', 1, 'sealed', %s, %s) "
                      "ON CONFLICT (survey_id, key_hash) WHERE key_hash IS NOT NULL DO NOTHING",
                      (survey_id, claim.key_hash, claim.body_mac))
        started = []
        migrating = threading.Thread(target=lambda: started.append(create_app(
            {"DATABASE_URL": url}, instance_path=tmp_path / "instance")))
        migrating.start()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as watcher:
            for _ in range(200):  # until the step waits for the open transaction's lock
                if watcher.execute("SELECT 1 FROM pg_stat_activity WHERE application_name = "
                                   "%s AND wait_event_type = 'Lock'", (schema,)).fetchall():
                    break
                time.sleep(0.05)
            else:
                pytest.fail("the migration never waited for the open insert")
        older.commit()
    migrating.join(timeout=30)
    [app] = started
    try:
        assert version_of(app) == LATEST
        with app.app_context():
            assert get_db().query("SELECT pending_id FROM pending") == [(claim.key_hash,)]
    finally:
        close_app(app)
