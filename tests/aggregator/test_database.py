"""Connections behave alike on SQLite and PostgreSQL: nested transactions, failures, grouped
commits."""

from pathlib import Path

import pytest

from ldpsurvey.aggregator.web.request_connection import get_db


def names(db) -> list[str]:
    return sorted(name for (name,) in db.query("SELECT name FROM researchers"))


def test_a_nested_transaction_is_undone_alone(app):
    with app.app_context():
        db = get_db()
        with db.transaction():
            db.execute("INSERT INTO researchers (researcher_id, name) VALUES ('outer', 'outer')")
            with pytest.raises(RuntimeError), db.transaction():
                db.execute("INSERT INTO researchers (researcher_id, name) VALUES ('inner', 'inner')")
                raise RuntimeError
        assert names(db) == ["outer"]


def test_a_failed_transaction_leaves_the_connection_usable(app):
    with app.app_context():
        db = get_db()
        with pytest.raises(Exception, match=r"(?i)unique|constraint"), db.transaction():
            db.execute("INSERT INTO researchers (researcher_id, name) VALUES ('same', 'same')")
            db.execute("INSERT INTO researchers (researcher_id, name) VALUES ('same', 'same')")
        with db.transaction():
            db.execute("INSERT INTO researchers (researcher_id, name) VALUES ('after', 'after')")
        assert names(db) == ["after"]


def test_a_thread_per_request_does_not_keep_a_connection_per_thread(tmp_path):
    """The development server (and the mock) start a thread for every request: 200 requests
    leave at most the pool's few SQLite connections open, not 200 (each held about 2 MB and
    three file descriptors: the mock at 10^7 respondents reached 4.5 GB)."""
    import os
    import threading
    import urllib.request

    from werkzeug.serving import make_server

    from ldpsurvey.aggregator import close_app, create_app
    from ldpsurvey.aggregator.store.connection import SQLiteDatabase

    path = str(tmp_path / "pool.sqlite3")
    app = create_app({"DATABASE_URL": f"sqlite:///{path}"}, instance_path=tmp_path)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01})
    thread.start()
    try:
        for _ in range(200):
            urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/readyz").read()
        open_files = sum(os.path.realpath(f"/proc/self/fd/{fd}") == path
                         for fd in os.listdir("/proc/self/fd"))
        assert open_files <= SQLiteDatabase.IDLE + 1
    finally:
        server.shutdown()
        thread.join()
        close_app(app)


@pytest.mark.parametrize("url, says", [
    ("postgresql://postgres@127.0.0.1:5432/ldp_survey_no_such_database", "does not exist"),
    ("postgresql://postgres@127.0.0.1:1/test", "127.0.0.1:1/test"),
])
def test_an_unreachable_postgresql_is_one_line_within_seconds(tmp_path, url, says):
    """Not a pool timeout's 47-line traceback after 10 s: one line naming the problem. The
    wait is bounded by the connection's own timeout (connect_timeout, DATABASE_NETWORK_TIMEOUT),
    not measured here (a loaded machine takes seconds to start Python); a hang fails at the
    subprocess's timeout."""
    import subprocess
    import sys

    from helpers import postgres_available, require

    if "5432" in url:
        require(postgres_available(), "PostgreSQL at 127.0.0.1:5432")

    result = subprocess.run([sys.executable, "-m", "ldpsurvey.cli", "admin", "keys", "list",
                             "--database", url, "--instance", str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and says in result.stderr


def insert_name(name: str):
    """A part of a group: insert a researcher named `name`, returning the name; a name
    starting with 'fail' raises after its insert, so its part must be undone alone."""
    def work(tx):
        tx.execute("INSERT INTO researchers (researcher_id, name) VALUES (?, ?)", (name, name))
        if name.startswith("fail"):
            raise ValueError(name)
        return name
    return work


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_concurrent_parts_share_one_commit_and_fail_alone(app, monkeypatch):
    """SQLite's group commit: while one commit is under way, five callers queue; the next
    leader runs all five in one transaction (one commit, one sync); each caller gets its own
    result, and the one whose part fails gets its exception with its insert undone. No
    caller has its answer before its group's sync is done (each sync here takes 0.2 s)."""
    import threading
    import time

    from ldpsurvey.aggregator.store import connection as module
    from ldpsurvey.aggregator.store.connection import GroupCommit

    groups, first_started, go_on = [], threading.Event(), threading.Event()
    run, sync_log = GroupCommit._run, module.sync_log
    outcomes: dict[str, object] = {}
    answered_by_sync: list[list[str]] = []

    def counting(connection, group):
        groups.append(len(group))
        run(connection, group)

    def slow_sync(path):
        time.sleep(0.2)  # time enough for a caller woken too early to answer
        answered_by_sync.append(sorted(outcomes))
        sync_log(path)

    monkeypatch.setattr(GroupCommit, "_run", staticmethod(counting))
    monkeypatch.setattr(module, "sync_log", slow_sync)

    def slow(tx):
        first_started.set()
        assert go_on.wait(10)
        return insert_name("first")(tx)

    database = app.extensions["ldp_database"]

    def call(name, work):
        connection = database.connect()
        try:
            outcomes[name] = connection.grouped(work)
        except ValueError as exc:
            outcomes[name] = exc
        finally:
            database.release(connection)

    leader = threading.Thread(target=call, args=("first", slow))
    leader.start()
    assert first_started.wait(10)
    names_ = ["a", "b", "fail-c", "d", "e"]
    followers = [threading.Thread(target=call, args=(n, insert_name(n))) for n in names_]
    for thread in followers:
        thread.start()
    group = database.group
    deadline = time.monotonic() + 10
    while len(group._waiting) < len(names_):  # all five queued behind the first commit
        assert time.monotonic() < deadline
        threading.Event().wait(0.01)
    go_on.set()
    for thread in [leader, *followers]:
        thread.join(10)
    assert groups == [1, 5] and answered_by_sync == [[], ["first"]]
    assert {n: str(v) for n, v in outcomes.items()} == {
        "first": "first", "a": "a", "b": "b", "fail-c": "fail-c", "d": "d", "e": "e"}
    assert isinstance(outcomes["fail-c"], ValueError)
    with app.app_context():
        assert names(get_db()) == ["a", "b", "d", "e", "first"]
    from ldpsurvey.aggregator.config.instance import exposed

    assert not exposed(Path(database.writer.path))  # the writers' lock file: 0600, empty


def test_grouped_work_is_all_or_nothing(app):
    """On both databases: a grouped part that fails leaves nothing; one that succeeds is
    committed when grouped returns."""
    with app.app_context():
        db = get_db()
        with pytest.raises(ValueError, match="fail-x"):
            db.grouped(insert_name("fail-x"))
        assert db.grouped(insert_name("kept")) == "kept"
        assert names(db) == ["kept"]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_part_alone_takes_no_savepoint(app, monkeypatch):
    """A group of one part runs in the group's transaction itself: its failure undoes that
    transaction, which holds nothing else (two statements fewer per lone submission). Parts
    of a larger group each take one (test_concurrent_parts_share_one_commit_and_fail_alone)."""
    from ldpsurvey.aggregator.store.connection import SQLiteConnection

    savepoints = []
    savepoint = SQLiteConnection._savepoint
    monkeypatch.setattr(SQLiteConnection, "_savepoint",
                        lambda self: savepoints.append(1) or savepoint(self))
    with app.app_context():
        db = get_db()
        assert db.grouped(insert_name("alone")) == "alone"
        with pytest.raises(ValueError, match="fail-alone"):
            db.grouped(insert_name("fail-alone"))
        assert names(db) == ["alone"] and savepoints == []
        with db.transaction(), db.transaction():  # a nested transaction does take one
            pass
        assert savepoints == [1]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_log_keeps_its_file_across_checkpoints_up_to_a_bound(app, monkeypatch):
    """When SQLite starts the WAL over after a checkpoint, it cuts the file back to
    WAL_KEPT_BYTES, not to nothing: later commits overwrite it in place (a sync of data
    alone) instead of growing it again. A log grown beyond the bound (one large transaction)
    is cut back to it; the scrub still empties it."""
    from ldpsurvey.aggregator.store.connection import SQLiteDatabase

    monkeypatch.setattr(SQLiteDatabase, "WAL_KEPT_BYTES", 64 * 1024)
    database = app.extensions["ldp_database"]
    database.close()  # connections opened from here on take the bound above
    database = type(database)(database.path, database.keys)
    wal = Path(f"{database.path}-wal")
    connection = database.connect()
    db = connection.raw
    try:
        db.execute("PRAGMA wal_autocheckpoint = 4")  # pages: a checkpoint every few commits
        db.execute("CREATE TABLE scratch (x BLOB)")

        def commit(rows: int, times: int) -> list[tuple[int, bytes]]:
            """Commit `rows` rows of about a page each, `times` times; after each, the log's
            size and salts (which a restart of the log changes)."""
            seen = []
            for _ in range(times):
                db.execute("BEGIN IMMEDIATE")
                db.execute("INSERT INTO scratch VALUES " + ", ".join(["(randomblob(3000))"] * rows))
                db.execute("COMMIT")
                seen.append((wal.stat().st_size, wal.read_bytes()[16:24]))
            return seen

        small = commit(1, 60)
        sizes = [size for size, _ in small]
        assert len({salts for _, salts in small}) >= 5  # the log started over again and again
        assert sizes == sorted(sizes)  # and its file was never cut back
        commit(40, 1)  # one transaction of 40 pages grows it past the bound
        assert wal.stat().st_size > 64 * 1024
        after = [size for size, _ in commit(1, 20)]
        assert max(after[1:]) <= 64 * 1024 and min(after) > 0  # cut back to it, not to nothing
        connection.scrub(["scratch"])
        assert wal.stat().st_size == 0
    finally:
        database.release(connection)
        database.close()


def test_a_retry_racing_its_first_request_is_answered_as_it(app, survey_id):
    """Two requests with one Idempotency-Key at once (a client retrying before the first
    answer came back): the second waits for the first's pending group with that key (on
    PostgreSQL, its insert waits on the pool's primary key, the key's hash; on SQLite, for the
    writers' lock), then is answered as a replay of it; one group is kept."""
    import threading

    from ldpsurvey.aggregator.services import intake
    from ldpsurvey.aggregator.services.answers import parse_answers
    from ldpsurvey.aggregator.store.idempotency import idempotency_claim, released_claim
    from ldpsurvey.aggregator.store.pending import insert_pending, sealed_pending
    from ldpsurvey.aggregator.store.responses import answers_json
    from ldpsurvey.aggregator.store.surveys import get_survey, lock_open_survey

    database = app.extensions["ldp_database"]
    body, key = {"answers": {"smoked": 1, "drove": 0, "sleep": 2}}, "racing-twin-0001"
    first, second = database.connect(), database.connect()
    outcomes: list = []
    try:
        survey = get_survey(first, survey_id).survey
        rows = answers_json(survey, [parse_answers(survey, body)])
        claim = idempotency_claim(first, key, "\n".join(rows))
        twin = threading.Thread(target=lambda: outcomes.append(
            intake.accept_one(second, survey_id, body, key, None)))
        with first.transaction():
            lock_open_survey(first, survey_id)
            assert released_claim(first, survey_id, claim) is None
            assert insert_pending(first, survey_id, sealed_pending(first, survey, rows),
                                        1, claim)
            twin.start()
            twin.join(0.5)
            assert twin.is_alive() and outcomes == []  # waiting for the first to commit
        twin.join(10)
        assert outcomes == [intake.Accepted(survey_id, 1, replayed=True)]
        assert first.query("SELECT size FROM pending WHERE survey_id = ?", (survey_id,)) == [(1,)]
    finally:
        database.release(first)
        database.release(second)


class LogSyncs:
    """os.fdatasync as the database module calls it, recording for each call the file synced,
    whether the writers' lock was free (another writer could commit meanwhile) and the
    researchers' names a new connection read then (what had been committed)."""

    def __init__(self, database, monkeypatch, fail: bool = False):
        import fcntl
        import os
        import sqlite3

        from ldpsurvey.aggregator.store import connection as module

        self.calls: list[tuple[str, bool, list[str]]] = []
        real = os.fdatasync

        def fdatasync(fd: int) -> None:
            probe = os.open(database.writer.path, os.O_RDWR)
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                free = True
            except BlockingIOError:
                free = False
            finally:
                os.close(probe)  # (and with it the probe's lock)
            reader = sqlite3.connect(database.path)
            committed = sorted(n for (n,) in reader.execute("SELECT name FROM researchers"))
            reader.close()
            self.calls.append((os.readlink(f"/proc/self/fd/{fd}"), free, committed))
            if fail:
                raise OSError(5, "Input/output error")
            real(fd)

        monkeypatch.setattr(module.os, "fdatasync", fdatasync)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_group_commit_is_synced_with_the_writers_lock_free_before_it_returns(app, monkeypatch):
    """Intake's group commit writes the log unsynced under the writers' lock (on a connection
    of its own at synchronous=NORMAL), lets go of the lock, so that the next writer commits
    while it waits for the disk, syncs the log (one sync covers every commit before it) and
    only then returns. A
    group that fails is synced too: its refusal may rest on another group's commit (a token
    it spent). Every other transaction stays FULL, synced by SQLite inside its commit, before
    any reader sees it."""
    database = app.extensions["ldp_database"]
    syncs = LogSyncs(database, monkeypatch)
    log = f"{database.path}-wal"
    with app.app_context():
        db = get_db()
        assert db.grouped(insert_name("g")) == "g"
        assert syncs.calls == [(log, True, ["g"])]
        assert database.group._connection.query("PRAGMA synchronous")[0][0] == 1  # NORMAL
        assert db.query("PRAGMA synchronous")[0][0] == 2  # FULL again, for what comes next
        with pytest.raises(ValueError, match="fail-x"):
            db.grouped(insert_name("fail-x"))
        assert syncs.calls[1:] == [(log, True, ["g"])]
        assert db.query("PRAGMA synchronous")[0][0] == 2
        with db.transaction():
            assert db.query("PRAGMA synchronous")[0][0] == 2
            db.execute("INSERT INTO researchers (researcher_id, name) VALUES ('t', 't')")
        assert names(db) == ["g", "t"] and len(syncs.calls) == 2  # SQLite synced it itself


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_failed_sync_is_answered_only_once_the_log_is_in_the_database_file(app, survey_id,
                                                                             monkeypatch):
    """A disk that fails the log's sync: what the group committed is readable but perhaps not
    on disk, so the log is copied into the database file (synced) and emptied before any
    answer, and then the 201 stands. If that cannot finish (a reader holds an old snapshot),
    no 201: the client keeps its answers and retries with the same key, answered as the
    first once the copy, retried in the background, is done. (Through a plain client: the
    suite's checks every answer against the API's description, which promises no 500.)"""
    import sqlite3
    import time

    from werkzeug.test import Client

    from ldpsurvey.shared.http_contract import REPLAYED_HEADER

    client = Client(app)
    database = app.extensions["ldp_database"]
    wal = Path(f"{database.path}-wal")
    path = f"/api/surveys/{survey_id}/responses"
    answers = {"answers": {"smoked": 1, "drove": 0, "sleep": 2}}
    failing = LogSyncs(database, monkeypatch, fail=True)
    recovered = client.post(path, json=answers, headers={"Idempotency-Key": "k-sync-fails"})
    assert recovered.status_code == 201 and len(failing.calls) == 1 and wal.stat().st_size == 0
    reader = sqlite3.connect(database.path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM surveys").fetchone()
    refused = client.post(path, json=answers, headers={"Idempotency-Key": "k-sync-held"})
    assert refused.status_code == 500 and len(failing.calls) == 2
    assert database.scrubber.pending() and wal.stat().st_size > 0
    reader.execute("COMMIT")
    reader.close()
    monkeypatch.undo()
    deadline = time.monotonic() + 10
    while database.scrubber.pending() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not database.scrubber.pending() and wal.stat().st_size == 0
    syncs = LogSyncs(database, monkeypatch)
    retried = client.post(path, json=answers, headers={"Idempotency-Key": "k-sync-held"})
    assert retried.status_code == 201 and retried.headers.get(REPLAYED_HEADER) == "true"
    assert len(syncs.calls) == 1


def test_a_database_reached_through_a_link_syncs_its_own_log(tmp_path, monkeypatch):
    """SQLite keeps the log beside the database file a link leads to: that log is the one
    synced (a log named after the link does not exist)."""
    from ldpsurvey.aggregator import close_app, create_api_key, create_app

    from helpers import SURVEY

    real = tmp_path / "disk" / "survey.sqlite3"
    real.parent.mkdir()
    real.touch(mode=0o600)
    link = tmp_path / "link.sqlite3"
    link.symlink_to(real)
    app = create_app({"DATABASE_URL": f"sqlite:///{link}"}, instance_path=tmp_path / "instance")
    try:
        client = app.test_client()
        auth = {"Authorization": f"Bearer {create_api_key(app).key}"}
        survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
        syncs = LogSyncs(app.extensions["ldp_database"], monkeypatch)
        answers = {"answers": {"smoked": 1, "drove": 0, "sleep": 2}}
        assert client.post(f"/api/surveys/{survey_id}/responses", json=answers).status_code == 201
        assert [path for path, _, _ in syncs.calls] == [f"{real}-wal"]
    finally:
        close_app(app)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_leader_that_fails_before_taking_the_parts_takes_its_own_back(app):
    """A leader that cannot open the group's connection (or begin) answers its caller with
    the error, and its part is not stored later by the next leader."""
    database = app.extensions["ldp_database"]
    group, connect = database.group, database.group._connect
    opened = []

    def failing_once():
        if not opened:
            opened.append(1)
            raise OSError("cannot open")
        return connect()

    group._connect = failing_once
    with app.app_context():
        db = get_db()
        with pytest.raises(OSError, match="cannot open"):
            db.grouped(insert_name("answered-500"))
        assert group._waiting == []
        assert db.grouped(insert_name("kept")) == "kept"
        assert names(db) == ["kept"]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_group_sqlite_rolled_back_whole_fails_every_part_without_waiting(app):
    """When SQLite rolls a group's transaction back whole (an I/O error, say), no savepoint is
    left to undo a part into: the group fails as one, rather than the next part taking the
    writers' lock again, which the leader holds (every writer would wait forever)."""
    import threading

    from ldpsurvey.aggregator.store.connection import GroupCommit, _Work

    database = app.extensions["ldp_database"]
    connection = database.connect()

    def rolled_back_whole(tx):
        tx.raw.execute("ROLLBACK")  # as SQLite does itself on SQLITE_IOERR
        raise OSError("disk I/O error")

    group = [_Work(insert_name("a")), _Work(rolled_back_whole), _Work(insert_name("c"))]
    failed: list[BaseException] = []

    def run() -> None:
        try:
            with connection.transaction():
                GroupCommit._run(connection, group)
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(5)
    try:
        assert not thread.is_alive() and isinstance(failed[0], OSError)
    finally:
        database.release(connection)
    with app.app_context():
        assert names(get_db()) == []


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_group_connection_left_in_a_transaction_is_replaced(app):
    """If a failed group's rollback fails too, its connection is closed (which undoes what it
    held) and the next leader opens another, instead of every later group failing to begin."""
    database = app.extensions["ldp_database"]
    with app.app_context():
        db = get_db()
        assert db.grouped(insert_name("before")) == "before"
        real = database.group._connection.raw

        class RollbackFails:
            def __getattr__(self, name):
                return getattr(real, name)

            def execute(self, sql, *args):
                if sql == "ROLLBACK":
                    raise OSError("rollback failed")
                return real.execute(sql, *args)

        database.group._connection.raw = RollbackFails()
        with pytest.raises(OSError, match="rollback failed"):
            db.grouped(insert_name("fail-held"))
        assert database.group._connection is None
        assert db.grouped(insert_name("after")) == "after"
        assert names(db) == ["after", "before"]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_no_group_runs_once_the_database_is_closed(app):
    database = app.extensions["ldp_database"]
    connection = database.connect()
    try:
        assert connection.grouped(insert_name("open")) == "open"
        database.group.close()
        assert database.group._connection is None
        with pytest.raises(RuntimeError, match="closed"):
            connection.grouped(insert_name("late"))
    finally:
        database.release(connection)


def test_the_scrub_waits_for_readers_but_raises_what_is_not_busy():
    """truncate_wal: busy (a reader holds the log) is "not done yet"; any other error (an I/O
    error) is raised, to be logged, rather than retried in silence."""
    import sqlite3

    from ldpsurvey.aggregator.store.connection import truncate_wal

    class Raw:
        def __init__(self, code: int):
            self.code = code

        def execute(self, sql):
            if sql.startswith("PRAGMA user_version ="):
                error = sqlite3.OperationalError("refused")
                error.sqlite_errorcode = self.code
                raise error
            row = {"PRAGMA busy_timeout": (5000,), "PRAGMA user_version": (1,)}.get(sql, (0,))
            return type("Cursor", (), {"fetchone": lambda _self: row})()

    assert truncate_wal(Raw(sqlite3.SQLITE_BUSY), ()) is False
    assert truncate_wal(Raw(517), ()) is False  # SQLITE_BUSY_SNAPSHOT: busy too
    with pytest.raises(sqlite3.OperationalError):
        truncate_wal(Raw(10), ())  # SQLITE_IOERR
