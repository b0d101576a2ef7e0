"""Attacks on the stored data, as someone with a copy of the database would make them: read
every table in physical order, the hidden columns (PostgreSQL's xmin, ctid) and the raw bytes
of SQLite's files, and try to recover arrival order or link a response to its invitation token
or idempotency key.

Each response's answer names its arrival index (a 40-option question), so arrival order is
known to the test; what must hold is that nothing stored after a release reveals it."""

import hashlib
import math
import time
from pathlib import Path

import psycopg
import pytest

from ldpsurvey.aggregator.web.request_connection import get_db

from helpers import release_due

N, BATCH = 40, 20
ORDERED = {
    "title": "Arrival order", "release_batch": BATCH, "invitation_only": True,
    "questions": [{"id": "arrival", "text": "Which one?", "type": "choice", "epsilon": 1.0,
                   "options": [f"o{i}" for i in range(N)]}],
}


def spearman_bound(values: list[int]) -> float:
    """|Spearman's rho| * sqrt(n - 1) between position and value (distinct values): about a
    standard normal when the order is uniformly random, so < 4.5 but with odds of 1 in 10^5."""
    n = len(values)
    ranks = {v: r for r, v in enumerate(sorted(values))}
    d2 = sum((position - ranks[v]) ** 2 for position, v in enumerate(values))
    rho = 1 - 6 * d2 / (n * (n * n - 1))
    return abs(rho) * math.sqrt(n - 1)


def idempotency_key(i: int) -> str:
    return f"arrival-key-{i:04d}-5c1e9"


def submit_in_order(client, auth, count=N, with_keys=True):
    """Create the survey, mint tokens, submit response i with token i (and an idempotency key
    for even i) in order, with a scheduled release after every BATCH of them. Returns (survey
    id, tokens)."""
    survey_id = client.post("/api/surveys", json=ORDERED, headers=auth).json["survey_id"]
    tokens = client.post(f"/api/surveys/{survey_id}/tokens", json={"count": count},
                         headers=auth).json["tokens"]
    for i, token in enumerate(tokens):
        headers = {"Survey-Token": token}
        if with_keys and i % 2 == 0:
            headers["Idempotency-Key"] = idempotency_key(i)
        response = client.post(f"/api/surveys/{survey_id}/responses",
                               json={"answers": {"arrival": i}}, headers=headers)
        assert response.status_code == 201
        if (i + 1) % BATCH == 0:
            release_due(client.application)
    return survey_id, tokens


def physical(db, table: str, columns: str) -> list[tuple]:
    """A table's rows in their physical order (with xmin on PostgreSQL)."""
    if db.dialect == "postgresql":
        return db.query(f"SELECT {columns}, xmin::text FROM {table} ORDER BY ctid")
    return db.query(f"SELECT {columns} FROM {table}")


def test_no_stored_order_or_value_follows_arrival(app, client, auth):
    survey_id, _ = submit_in_order(client, auth)
    import json

    with app.app_context():
        db = get_db()
        rows = physical(db, "responses", "answers, response_id, released_day")
        assert len(rows) == N and db.query("SELECT COUNT(*) FROM pending") == [(0,)]
        arrival = [json.loads(row[0])["arrival"] for row in rows]
        by_key = [json.loads(row[0])["arrival"] for row in sorted(rows, key=lambda r: r[1])]
        for release in range(N // BATCH):
            members = range(release * BATCH, (release + 1) * BATCH)
            assert spearman_bound([a for a in arrival if a in members]) < 4.5
            assert spearman_bound([a for a in by_key if a in members]) < 4.5
        assert len({row[2] for row in rows}) == 1  # one day: the day of release
        keys = app.extensions["ldp_database"].keys
        hashes = {keys.idempotency_id(idempotency_key(i)): i for i in range(0, N, 2)}
        records = physical(db, "idempotency_keys", "key_hash, released")
        assert {r[0] for r in records} == set(hashes) and {r[1] for r in records} == {1}
        for release in range(N // BATCH):
            members = range(release * BATCH, (release + 1) * BATCH)
            assert spearman_bound([hashes[r[0]] for r in records if hashes[r[0]] in members]) < 4.5
        assert db.query("SELECT released_day, size FROM releases WHERE survey_id = ?",
                        (survey_id,)) == [(rows[0][2], BATCH)] * (N // BATCH)
        if db.dialect == "postgresql":  # a release is one transaction: one xmin for all
            for table_rows, column in ((rows, 3), (records, 2)):
                xmins = [row[column] for row in table_rows]
                assert len(set(xmins)) == N // BATCH
        assert db.query("SELECT COUNT(*) FROM invitation_tokens") == [(0,)]


def test_a_release_read_in_chunks_is_stored_in_the_order_of_its_keys_alone(app, client, auth,
                                                                          monkeypatch):
    """A release reads its pool in chunks of pending ids, and whoever copied the files before
    it knows which pending id arrived when (PostgreSQL's xmin). Were each chunk stored as it
    was read, the chunks would show as blocks of the table's physical order (and of the log),
    the last one perhaps a single response: the release is stored in one statement, in the
    order of the new keys, so the physical order is that order and nothing else."""
    from ldpsurvey.aggregator.store import pending as pending_store

    monkeypatch.setattr(pending_store, "RELEASE_CHUNK", 3)
    submit_in_order(client, auth)
    with app.app_context():
        db = get_db()
        rows = physical(db, "responses", "release_number, bucket, response_id")
    assert len(rows) == N
    for release in {row[0] for row in rows}:  # each release's rows, as they lie
        stored = [row[1:3] for row in rows if row[0] == release]
        assert stored == sorted(stored)


def sqlite_files(app) -> bytes:
    path = Path(app.config["DATABASE_URL"].removeprefix("sqlite:///"))
    return b"".join(Path(f"{path}{suffix}").read_bytes() for suffix in ("", "-wal", "-shm")
                    if Path(f"{path}{suffix}").exists())


def forms(secret: str, *keyed: str) -> list[bytes]:
    """A secret as text, as hex SHA-256 and as the raw digest, and each of its `keyed` forms
    (hex HMACs under the storage key) as hex and raw."""
    digest = hashlib.sha256(secret.encode())
    return [secret.encode(), digest.hexdigest().encode(), digest.digest(),
            *(form.encode() for form in keyed), *(bytes.fromhex(form) for form in keyed)]


def token_forms(app, token: str) -> list[bytes]:
    """forms(token), with its keyed hash under the app's storage key (which a spent token's
    row in spent_tokens holds until the close)."""
    return forms(token, app.extensions["ldp_database"].keys.token_hash(token))


def wal_bytes(app) -> bytes:
    path = app.config["DATABASE_URL"].removeprefix("sqlite:///")
    return Path(f"{path}-wal").read_bytes() if Path(f"{path}-wal").exists() else b""


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_copy_of_the_sqlite_files_links_no_token_and_keeps_no_key(app, client, auth):
    survey_id, tokens = submit_in_order(client, auth)
    files = sqlite_files(app)
    assert files.count(b'"arrival":') == N  # the responses are there to be found
    for token in tokens:  # with the key, the spent tokens' hashes (spent_tokens), not in the log
        assert not any(form in files for form in forms(token)), token
        assert not any(form in wal_bytes(app) for form in token_forms(app, token)), token
    client.post(f"/api/surveys/{survey_id}/close", headers=auth)
    files = sqlite_files(app)
    for token in tokens:
        assert not any(form in files for form in token_forms(app, token)), token
    for i in range(0, N, 2):
        key = idempotency_key(i)
        keyed = app.extensions["ldp_database"].keys.idempotency_id(key)
        assert not any(form in files for form in forms(key, keyed))


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_wal_is_truncated_once_a_long_reader_finishes(app, client, auth):
    """A reader holding an old snapshot (a long export) stops the checkpoint; it is retried
    in the background, and writers are not held up meanwhile."""
    import sqlite3

    path = app.config["DATABASE_URL"].removeprefix("sqlite:///")
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM surveys").fetchone()
    try:
        # intake goes on while the reader reads: every submission is a 201 (submit_in_order),
        # none waits for the reader (the lock timeout would answer it 503)
        _, tokens = submit_in_order(client, auth)
        scrubber = app.extensions["ldp_database"].scrubber
        assert scrubber.pending()
        assert Path(f"{path}-wal").stat().st_size > 0
    finally:
        reader.execute("COMMIT")
        reader.close()
    wait_for_scrub(app)
    assert Path(f"{path}-wal").stat().st_size == 0
    files = sqlite_files(app)
    for token in tokens:
        assert not any(form in files for form in forms(token))
    assert stale_wal_index_pages(path) in ([], [1])


def stale_wal_index_pages(path: str) -> list[int]:
    """The page numbers SQLite's -shm still lists for log frames (it keeps them after the log
    is truncated, until a new log starts): one set per transaction, so they would order the
    intakes by the token page each touched. The first block's list follows a 136-byte header
    (sqlite.org/walformat.html)."""
    import struct

    shm = Path(f"{path}-shm").read_bytes()
    return [page for page in struct.unpack_from("<4062I", shm, 136) if page]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_wal_index_lists_no_page_of_earlier_transactions(app, client, auth):
    path = app.config["DATABASE_URL"].removeprefix("sqlite:///")
    survey_id, _ = submit_in_order(client, auth)
    assert stale_wal_index_pages(path) == [1]  # the header page, written to clear the rest
    client.post(f"/api/surveys/{survey_id}/close", headers=auth)
    assert stale_wal_index_pages(path) == [1]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_crash_before_the_log_was_truncated_is_scrubbed_at_start(app, client, auth, tmp_path):
    """The files as a kill -9 leaves them while a reader held the truncation off: opening them
    again truncates the log before anything else."""
    import shutil
    import sqlite3

    from ldpsurvey.aggregator import close_app, create_app

    path = app.config["DATABASE_URL"].removeprefix("sqlite:///")
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM surveys").fetchone()
    _, tokens = submit_in_order(client, auth)
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    for suffix in ("", "-wal", "-shm"):
        shutil.copy(f"{path}{suffix}", crashed / f"db.sqlite3{suffix}")
    reader.execute("COMMIT")
    reader.close()
    assert any(form in (crashed / "db.sqlite3-wal").read_bytes()
               for token in tokens for form in token_forms(app, token))  # the crash's link
    restarted = create_app({"DATABASE_URL": f"sqlite:///{crashed / 'db.sqlite3'}"},
                           instance_path=tmp_path / "instance")
    try:  # (the spent tokens' keyed hashes stay in spent_tokens, in the file, until the close)
        log = wal_bytes(restarted)
        assert not any(form in log for token in tokens for form in token_forms(app, token))
    finally:
        close_app(restarted)


def wait_for_scrub(app, seconds: float = 10) -> None:
    """Until the database's scrub (in the background on PostgreSQL) has finished."""
    scrubber = app.extensions["ldp_database"].scrubber
    deadline = time.monotonic() + seconds
    while scrubber.pending() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not scrubber.pending()


def heap_rows(conn, table: str) -> int:
    """Row versions with storage in the table's pages, live or dead (pageinspect)."""
    blocks = conn.execute(f"SELECT pg_relation_size('{table}') / 8192").fetchone()[0]
    return sum(conn.execute(
        "SELECT COUNT(*) FROM public.heap_page_items(public.get_raw_page(%s, %s)) "
        "WHERE lp_len > 0", (table, block)).fetchone()[0] for block in range(blocks))


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_vacuum_held_off_by_a_backup_is_retried(app, client, auth):
    """A backup (pg_dump holds one REPEATABLE READ snapshot) keeps VACUUM from removing the
    dead versions; once it ends, the retried VACUUM removes them."""
    with psycopg.connect(app.config["DATABASE_URL"], autocommit=True) as conn, \
            psycopg.connect(app.config["DATABASE_URL"]) as backup:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect SCHEMA public")
        backup.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        backup.execute("SELECT COUNT(*) FROM surveys").fetchone()
        submit_in_order(client, auth)
        scrubber = app.extensions["ldp_database"].scrubber
        assert scrubber.pending() and heap_rows(conn, "pending") > 0
        backup.rollback()
        wait_for_scrub(app)
        for table in ("pending", "invitation_tokens", "idempotency_keys"):
            assert heap_rows(conn, table) == conn.execute(
                f"SELECT COUNT(*) FROM {table}").fetchone()[0], table


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_scrub_outlives_a_cut_connection(app, client, auth, caplog, monkeypatch):
    """The server drops the pool's connections (a restart, a failover) while a backup holds
    VACUUM off, and every connection of the pool is taken (a flood of requests): the pool
    hands out none of the dropped ones (database.check_idle), the attempt that finds none is
    logged and retried, and the scrub still finishes once the backup ends and connections are
    free. (A failed attempt used to end the scrubber's thread for good.)"""
    from ldpsurvey.aggregator.store.connection import Scrubber

    monkeypatch.setattr(Scrubber, "MAX_RETRY", 0.2)
    with psycopg.connect(app.config["DATABASE_URL"], autocommit=True) as conn, \
            psycopg.connect(app.config["DATABASE_URL"]) as backup:
        backup.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        backup.execute("SELECT COUNT(*) FROM surveys").fetchone()
        submit_in_order(client, auth)
        assert app.extensions["ldp_database"].scrubber.pending()
        cut = [pid for pid, _ in conn.execute(
            "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
            "current_database() AND pid NOT IN (pg_backend_pid(), %s) AND "
            "backend_type = 'client backend' AND application_name = "
            "current_setting('application_name')", (backup.info.backend_pid,))]
        while conn.execute("SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ANY(%s)",
                           (cut,)).fetchone()[0]:  # until they have ended (it is a signal)
            time.sleep(0.02)
        database = app.extensions["ldp_database"]
        held = [database.connect() for _ in range(database.pool.max_size)]
        try:
            assert all(db.query("SELECT 1") == [(1,)] for db in held)  # none of them dropped
            deadline = time.monotonic() + 120
            while "retrying" not in caplog.text and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            for db in held:
                database.release(db)
        assert ("scrubbing idempotency_keys, invitation_tokens, pending, spent_tokens failed"
                in caplog.text)
        backup.rollback()
        wait_for_scrub(app)
        conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect SCHEMA public")
        for table in ("pending", "invitation_tokens", "idempotency_keys"):
            assert heap_rows(conn, table) == conn.execute(
                f"SELECT COUNT(*) FROM {table}").fetchone()[0], table


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_postgresql_keeps_no_dead_row_of_pending_tokens_or_keys(app, client, auth):
    """After a release, VACUUM has removed the row versions that tied a spent token (xmax)
    or an idempotency record to its response's arrival (xmin); read with pageinspect."""
    submit_in_order(client, auth)
    wait_for_scrub(app)
    with psycopg.connect(app.config["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect SCHEMA public")
        for table in ("pending", "invitation_tokens", "idempotency_keys"):
            live = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            assert heap_rows(conn, table) == live, table
