"""No fault of the database takes the service down (issue 38): a paused replica holding a
survey's lock, a stopped PostgreSQL, a full disk under SQLite. The faults are made as they
happen: a process stopped with SIGSTOP, a server stopped with pg_ctl (a cluster of the test's
own: the machine's server is shared), a tmpfs filled to its last byte. Every request has a
client-side timeout, so a hang fails the test; nothing here measures speed: waits are for a
condition, with a generous deadline."""

import contextlib
import glob
import json
import os
import pwd
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from helpers import SURVEY, postgres_available, release_due, require

ANSWERS = {"answers": {"smoked": 1, "drove": 0, "sleep": 2}}
CLIENT_TIMEOUT = 60  # seconds: far above any bound the server keeps; only a hang reaches it
DEADLINE = 120  # seconds to wait for a condition (intake resuming) before failing
# Short bounds, so the tests wait seconds, not the production defaults' tens of seconds.
FAST = {"DATABASE_LOCK_TIMEOUT": 1, "DATABASE_IDLE_IN_TRANSACTION_TIMEOUT": 3,
        "DATABASE_NETWORK_TIMEOUT": 2, "RELEASE_EVERY": 3600}


@contextlib.contextmanager
def served(config: dict, instance) -> Iterator[tuple[str, object]]:
    """The aggregator with `config` over real HTTP on a loopback port; its URL and app."""
    from werkzeug.serving import make_server

    from ldpsurvey.aggregator import close_app, create_app

    app = create_app({**FAST, **config}, instance_path=instance)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", app
    finally:
        server.shutdown()
        thread.join()
        close_app(app)


def call(url: str, method: str = "GET", body: dict | None = None,
         headers: dict | None = None) -> tuple[int, dict, dict]:
    """Status, JSON body and headers; a request unanswered in CLIENT_TIMEOUT seconds raises."""
    request = urllib.request.Request(url, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=CLIENT_TIMEOUT) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), dict(error.headers)


def publish(base: str, app) -> tuple[str, dict]:
    from ldpsurvey.aggregator import create_api_key

    auth = {"Authorization": f"Bearer {create_api_key(app).key}"}
    status, body, _ = call(f"{base}/api/surveys", "POST", SURVEY, auth)
    assert status == 201, body
    return body["survey_id"], auth


def submit(base: str, survey_id: str, key: str | None = None) -> tuple[int, dict, dict]:
    return call(f"{base}/api/surveys/{survey_id}/responses", "POST", ANSWERS,
                {"Idempotency-Key": key} if key else None)


def assert_unavailable(status: int, body: dict, headers: dict) -> None:
    """A 503 database_unavailable with a Retry-After in whole seconds."""
    assert (status, body["error"]) == (503, "database_unavailable"), body
    assert int(headers["Retry-After"]) > 0


def until_accepted(base: str, survey_id: str) -> list[int]:
    """Submit until one is accepted (201), within DEADLINE seconds; every status seen."""
    statuses: list[int] = []
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        status, body, headers = submit(base, survey_id)
        statuses.append(status)
        if status == 201:
            return statuses
        assert_unavailable(status, body, headers)
    pytest.fail(f"intake did not resume within {DEADLINE} s: {statuses}")


def counted(app, survey_id: str) -> int:
    """Responses stored for the survey, once every pending one is released."""
    from ldpsurvey.aggregator.store.connection import connection_to

    release_due(app)
    with connection_to(app.extensions["ldp_database"]) as db:
        return db.query("SELECT COUNT(*) FROM responses WHERE survey_id = ?",
                        (survey_id,))[0][0]


# --- a paused replica ----------------------------------------------------------------------------

HOLDER = """
import sys, time
from ldpsurvey.aggregator import create_app
from ldpsurvey.aggregator.store.surveys import lock_survey
from ldpsurvey.aggregator.web.request_connection import get_db

app = create_app({"DATABASE_URL": sys.argv[1], "STORAGE_KEY": sys.argv[2],
                  "RELEASE_EVERY": 3600}, instance_path=sys.argv[3])
with app.app_context():
    db = get_db()
    with db.transaction():
        lock_survey(db, sys.argv[4], exclusive=True)  # as a release or a close holds it
        print("locked", flush=True)
        time.sleep(3600)
"""


@contextlib.contextmanager
def paused_lock_holder(app, survey_id: str, instance) -> Iterator[subprocess.Popen]:
    """Another replica (a process of its own, the app's settings but for the defaults of the
    timeouts) holding the survey exclusively inside a transaction, then paused with SIGSTOP:
    what a paused VM or a hung host looks like to the database."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, app.config["DATABASE_URL"], app.config["STORAGE_KEY"],
         str(instance), survey_id], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        os.killpg(holder.pid, signal.SIGSTOP)
        yield holder
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_paused_replica_frees_intake_on_postgresql(database_url, tmp_path):
    """The replica holding the survey's lock is paused: the other's intake answers 503 with
    Retry-After once the lock timeout passes (it queued behind the lock, unbounded, before),
    and accepts again once the idle-in-transaction timeout has ended the paused session, which
    is never resumed. Nothing acknowledged is lost."""
    with served({"DATABASE_URL": database_url}, tmp_path / "a") as (base, app):
        survey_id, _ = publish(base, app)
        assert submit(base, survey_id)[0] == 201
        with paused_lock_holder(app, survey_id, tmp_path / "b"):
            assert_unavailable(*submit(base, survey_id))
            statuses = until_accepted(base, survey_id)
            assert submit(base, survey_id)[0] == 201
        assert counted(app, survey_id) == 2 + statuses.count(201)


def test_a_paused_holder_of_the_sqlite_lock_is_answered_503(tmp_path):
    """SQLite: another program holds the file's write lock and is paused. Intake answers 503
    with Retry-After once the lock timeout passes (SQLite's busy timeout, 30 s before), and
    accepts again once the holder is gone (SQLite cannot take a lock from a live process)."""
    path = tmp_path / "paused.sqlite3"
    with served({"DATABASE_URL": f"sqlite:///{path}"}, tmp_path / "a") as (base, app):
        survey_id, _ = publish(base, app)
        holder = subprocess.Popen(
            [sys.executable, "-c", "import sqlite3, sys, time\n"
             "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
             "db.execute('BEGIN IMMEDIATE')\nprint('locked', flush=True)\ntime.sleep(3600)",
             str(path)], stdout=subprocess.PIPE, text=True, start_new_session=True)
        try:
            assert holder.stdout.readline() == "locked\n"
            os.killpg(holder.pid, signal.SIGSTOP)
            assert_unavailable(*submit(base, survey_id))
        finally:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait()
        assert until_accepted(base, survey_id)[-1] == 201
        assert counted(app, survey_id) == 1


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_every_postgresql_session_is_bounded_by_the_settings(database_url, tmp_path):
    """The lock, statement and idle-in-transaction timeouts and the server's TCP settings are
    set on every pooled connection, from the settings (two values each: both sides), and the
    URL's own options (the test schema's search path) still apply."""
    schema = database_url.partition("search_path%3D")[2].partition("&")[0]
    for lock, idle in ((1, 3), (4, 7)):
        with served({"DATABASE_URL": database_url, "DATABASE_LOCK_TIMEOUT": lock,
                     "DATABASE_IDLE_IN_TRANSACTION_TIMEOUT": idle,
                     "DATABASE_STATEMENT_TIMEOUT": 30}, tmp_path) as (_, app):
            database = app.extensions["ldp_database"]
            held = [database.connect() for _ in range(3)]  # three of the pool's connections
            try:
                for db in held:
                    shown = {name: db.query(f"SHOW {name}")[0][0] for name in (
                        "lock_timeout", "statement_timeout", "tcp_user_timeout",
                        "idle_in_transaction_session_timeout", "search_path")}
                    assert shown == {"lock_timeout": f"{lock}s", "statement_timeout": "30s",
                                     "idle_in_transaction_session_timeout": f"{idle}s",
                                     "tcp_user_timeout": "2000", "search_path": schema}
            finally:
                for db in held:
                    database.release(db)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_statement_over_the_timeout_is_unavailable_but_a_release_may_run_longer(
        database_url, tmp_path):
    """A statement that runs longer than DATABASE_STATEMENT_TIMEOUT is cancelled, which is a
    DatabaseUnavailable (503); inside a transaction that lifted the timeout (a release, a
    migration step: unbounded_statements) the same statement runs to its end."""
    from ldpsurvey.aggregator.store.connection import unavailable

    with served({"DATABASE_URL": database_url, "DATABASE_STATEMENT_TIMEOUT": 0.05},
                tmp_path) as (_, app):
        database = app.extensions["ldp_database"]
        db = database.connect()
        try:
            with pytest.raises(Exception) as cancelled, db.transaction():
                db.query("SELECT pg_sleep(0.5)")
            assert "statement did not finish in time" in str(unavailable(cancelled.value))
            with db.transaction():
                db.unbounded_statements()
                assert db.query("SELECT pg_sleep(0.5)") == [("",)]
        finally:
            database.release(db)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_options_in_the_database_url_win_over_the_settings(database_url, tmp_path):
    schema = database_url.partition("search_path%3D")[2].partition("&")[0]
    url = database_url.replace(f"search_path%3D{schema}",
                               f"search_path%3D{schema}%20-clock_timeout%3D7s")
    with served({"DATABASE_URL": url, "DATABASE_LOCK_TIMEOUT": 1}, tmp_path) as (_, app):
        database = app.extensions["ldp_database"]
        db = database.connect()
        try:
            assert db.query("SHOW lock_timeout") == [("7s",)]
        finally:
            database.release(db)


def test_sqlite_waits_for_its_lock_at_most_the_lock_timeout(tmp_path):
    for lock in (1, 4):
        with served({"DATABASE_URL": f"sqlite:///{tmp_path / f'{lock}.sqlite3'}",
                     "DATABASE_LOCK_TIMEOUT": lock}, tmp_path / str(lock)) as (_, app):
            database = app.extensions["ldp_database"]
            db = database.connect()
            try:
                assert db.query("PRAGMA busy_timeout") == [(lock * 1000,)]
            finally:
                database.release(db)


# --- a stopped PostgreSQL ------------------------------------------------------------------------

POSTGRES_BIN = max(glob.glob("/usr/lib/postgresql/*/bin"), default="", key=lambda p: float(
    p.split("/")[-2]))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OwnPostgres:
    """A PostgreSQL cluster of the test's own, on a free port, that it may stop and start
    (the machine's server is shared with other tests). initdb refuses root: as root it runs
    as the postgres user, in a folder of its own under the system's temporary folder."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="ldp-survey-pg-")
        self.port, self.as_user = free_port(), []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.run("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync")
        self.start()

    @property
    def data(self) -> str:
        return f"{self.folder}/data"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def run(self, program: str, *args: str) -> None:
        subprocess.run([*self.as_user, f"{POSTGRES_BIN}/{program}", *args], check=True,
                       capture_output=True, timeout=300)

    def start(self) -> None:
        self.run("pg_ctl", "-D", self.data, "-l", f"{self.folder}/log", "-w", "-o",
                 f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1", "start")

    def stop(self) -> None:
        self.run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def own_postgres():
    require(postgres_available() and os.path.exists(f"{POSTGRES_BIN}/initdb"),
            "PostgreSQL's server programs (initdb, pg_ctl)")
    cluster = OwnPostgres()
    try:
        yield cluster
    finally:
        cluster.remove()


def test_a_stopped_postgresql_is_answered_503_and_intake_resumes_when_it_returns(
        own_postgres, tmp_path):
    """While the server is stopped: a submission 503 with Retry-After (a hang of 30 to 57 s
    and a 500 before), /healthz 200 and /readyz 503, each within the client's timeout. Once it
    is back: intake resumes (the pool asks at once, no back-off) and no request is handed one
    of the pool's dead connections (about 10 500s per restart before): every answer is a 503
    or a 201, then only 201s. Every acknowledged response is counted once. A page for people
    says, in HTML, to try again in a moment (503 with Retry-After too)."""
    with served({"DATABASE_URL": own_postgres.url}, tmp_path) as (base, app):
        survey_id, _ = publish(base, app)
        database = app.extensions["ldp_database"]
        held = [database.connect() for _ in range(4)]  # four connections idle in the pool
        for db in held:
            database.release(db)
        assert submit(base, survey_id)[0] == 201
        own_postgres.stop()
        assert_unavailable(*submit(base, survey_id))
        assert call(f"{base}/healthz")[:2] == (200, {"status": "ok"})
        assert_unavailable(*call(f"{base}/readyz"))
        with pytest.raises(urllib.error.HTTPError) as page:  # a page for people: HTML
            urllib.request.urlopen(f"{base}/s/{survey_id}", timeout=CLIENT_TIMEOUT)
        assert page.value.code == 503 and int(page.value.headers["Retry-After"]) > 0
        assert "Please try again in a moment" in page.value.read().decode()
        own_postgres.start()
        statuses = until_accepted(base, survey_id)
        after = [submit(base, survey_id)[0] for _ in range(10)]
        assert after == [201] * 10
        assert call(f"{base}/readyz")[:2] == (200, {"status": "ready"})
        assert counted(app, survey_id) == 1 + statuses.count(201) + len(after)


# --- a full disk ---------------------------------------------------------------------------------

@contextlib.contextmanager
def small_tmpfs(folder, size: str) -> Iterator[None]:
    os.makedirs(folder)
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(folder)],
        capture_output=True).returncode == 0
    require(mounted, "a tmpfs to fill (mount -t tmpfs needs root)")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def fill(path) -> None:
    """Write zeros to `path` until the file system has no byte left."""
    with open(path, "wb", buffering=0) as filler:
        chunk = b"\0" * 65536
        while chunk:
            try:
                filler.write(chunk)
            except OSError:
                chunk = chunk[:len(chunk) // 2]


def test_a_full_disk_under_sqlite_is_answered_503_and_loses_nothing(tmp_path):
    """The disk holding the SQLite file fills: submissions are answered 503 with Retry-After
    (500 before), and nothing of them is stored (a 201 only for one written in space the
    log's file already held), /healthz and /readyz answer; once space is freed intake
    resumes, and every acknowledged response is counted once."""
    disk = tmp_path / "disk"
    with small_tmpfs(disk, "4m"), served({"DATABASE_URL": f"sqlite:///{disk / 'db.sqlite3'}"},
                                         tmp_path / "instance") as (base, app):
        survey_id, _ = publish(base, app)
        assert submit(base, survey_id, "before-the-disk-filled")[0] == 201
        fill(disk / "filler")
        answers = {f"while-full-{i:04d}": submit(base, survey_id, f"while-full-{i:04d}")
                   for i in range(20)}
        refused = [key for key, (status, *_) in answers.items() if status != 201]
        assert refused
        for key in refused:
            assert_unavailable(*answers[key])
        assert call(f"{base}/healthz")[0] == 200
        assert call(f"{base}/readyz")[0] == 200  # it answers reads
        (disk / "filler").unlink()
        assert until_accepted(base, survey_id)[-1] == 201
        status, _, headers = submit(base, survey_id, refused[0])
        assert status == 201 and "Idempotent-Replayed" not in headers  # it was never stored
        assert counted(app, survey_id) == 3 + len(answers) - len(refused)
        with sqlite3.connect(disk / "db.sqlite3") as check:
            assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)


# --- a refused start -----------------------------------------------------------------------------

@pytest.mark.parametrize("change, says", [
    ({"LDP_SURVEY_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/none"},
     "cannot connect to PostgreSQL at 127.0.0.1:1/none"),
    ({"LDP_SURVEY_DATABASE_LOCK_TIMEOUT": "0"}, "setting DATABASE_LOCK_TIMEOUT"),
])
def test_a_refused_start_under_gunicorn_is_one_line(tmp_path, change, says):
    """gunicorn with the shipped config, and a database it cannot reach or a setting missing:
    the worker prints the reason in one line and gunicorn stops (a traceback of 70 to 100
    lines per worker before; with more workers, each prints its line)."""
    from processes import ROOT, free_port, production

    env, _, _ = production(tmp_path, f"sqlite:///{tmp_path / 'refused.sqlite3'}")
    gunicorn = shutil.which("gunicorn", path=os.path.dirname(sys.executable))
    result = subprocess.run(
        [gunicorn, "-c", str(ROOT / "deploy" / "gunicorn.conf.py")],
        env={**os.environ, **env, **change, "LDP_SURVEY_BIND": f"127.0.0.1:{free_port()}",
             "LDP_SURVEY_WORKERS": "1"}, capture_output=True, text=True, timeout=300,
        cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output
    own = [line for line in output.splitlines() if not line.startswith("[")]  # not gunicorn's
    assert len(own) == 1 and own[0].startswith(says), output
