"""Database connections, hiding the differences between SQLite and PostgreSQL (no Flask here).

SQLite (a file in the instance folder, WAL, synchronous=FULL, and intake's group commits
synced before they return, so a 2xx means the answer is on disk, on a disk that does not fail
its syncs: GroupCommit._sync) is the embedded default;
PostgreSQL is used when DATABASE_URL starts with postgresql://. The store writes SQL with `?`
placeholders against a `Connection`; what the two dialects spell differently (locking reads,
serializing migrations, nested transactions) is a method here. The tables are created and
changed by numbered steps in `migrations.py`; `db.py` hands each request its connection.
"""

import errno
import fcntl
import logging
import os
import select
import sqlite3
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from ldpsurvey.aggregator.config.instance import private_database_file
from ldpsurvey.aggregator.exceptions import ConfigurationError, DatabaseUnavailable
from ldpsurvey.aggregator.store.storage_key import StorageKeys
from ldpsurvey.shared import Survey

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class Timeouts:
    """How long, in seconds, a database session may wait or hold what others wait for
    (settings DATABASE_*_TIMEOUT, docs/deployment.md): `lock` for a lock (SQLite: for the
    file's write lock), `statement` for one statement to run, `idle_in_transaction` for a
    client inside a transaction to send its next statement (PostgreSQL ends the session and
    its locks: a paused or cut-off replica frees the surveys it held), `network` for a
    connection to open, for a free connection from the pool, and for the other end to
    acknowledge what was sent or answer keepalives (PostgreSQL)."""

    lock: float = 5.0
    statement: float = 60.0
    idle_in_transaction: float = 10.0
    network: float = 5.0


def unavailable(exc: BaseException) -> DatabaseUnavailable | None:
    """The DatabaseUnavailable that an exception from a database call stands for, or None if
    it stands for none: the server unreachable, restarting or ending the session, a lock not
    free or a statement not done in time, a full disk (psycopg's OperationalError and its
    pool's timeout; SQLite's busy, full and I/O errors; ENOSPC, EDQUOT)."""
    if isinstance(exc, DatabaseUnavailable):
        return exc
    psycopg = sys.modules.get("psycopg")  # not imported: no psycopg error was raised
    if isinstance(exc, sqlite3.OperationalError):
        code = exc.sqlite_errorcode & 0xFF
        reason = {sqlite3.SQLITE_BUSY: "a lock was not free in time",
                  sqlite3.SQLITE_FULL: "its disk is full",
                  sqlite3.SQLITE_IOERR: "its disk failed a read or write"}.get(code)
    elif isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        reason = "its disk is full"
    elif psycopg is not None and isinstance(exc, psycopg.OperationalError):
        reason = {"53100": "its disk is full", "55P03": "a lock was not free in time",
                  "57014": "a statement did not finish in time",
                  "40001": "a concurrent transaction conflicted",
                  "40P01": "a concurrent transaction conflicted"}.get(
            getattr(exc, "sqlstate", None) or "", "it cannot be reached or is restarting")
    else:
        return None
    if reason is None:
        return None
    return DatabaseUnavailable(f"the database cannot serve this now ({reason}); retry in "
                               f"{DatabaseUnavailable.retry_after} seconds, with the same "
                               "Idempotency-Key if the request had one")


class Connection(ABC):
    """One database connection with the few operations the store needs, the storage key's
    subkeys (`keys`) under which the store hashes tokens and idempotency keys and seals pending
    answers, and `published`: published surveys' parsed manifests by id, which never change,
    shared by the database's connections in this process (store.published_survey)."""

    dialect: str  # "sqlite" or "postgresql": for the tests that inspect raw files and catalogs
    # Appended to CREATE TABLE: a table whose rows sit in primary-key order, with no hidden
    # rowid counting insertions (SQLite); PostgreSQL has no rowid.
    without_rowid: str = ""

    def indexed_by(self, index: str) -> str:
        """Appended to a table's name in a query: read it through this index (SQLite's
        planner, without statistics, would take the primary key over a partial index);
        PostgreSQL's planner picks by its statistics."""
        return ""

    def __init__(self, raw: Any, scrubber: "Scrubber", keys: StorageKeys,
                 published: dict[str, Survey]):
        self.raw, self.scrubber, self.keys, self.published = raw, scrubber, keys, published

    def _sql(self, sql: str) -> str:
        return sql

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; return the number of rows it changed."""
        return self.raw.execute(self._sql(sql), params).rowcount

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.raw.cursor().executemany(self._sql(sql), list(rows))

    def insert_rows(self, table: str, columns: Sequence[str],
                    rows: Iterable[Sequence[Any]]) -> None:
        """Insert many rows, stored in the order given (table and columns are the code's own
        names, never input)."""
        marks = ", ".join("?" * len(columns))
        self.executemany(f"INSERT INTO {table} ({', '.join(columns)}) "  # noqa: S608  # nosec B608
                         f"VALUES ({marks})", rows)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return list(self.raw.execute(self._sql(sql), params).fetchall())

    @abstractmethod
    def query_locked(self, sql: str, params: Sequence[Any] = (), *,
                     exclusive: bool = False) -> list[tuple]:
        """A SELECT whose rows no other transaction may change until this one ends; with
        `exclusive`, no other may even lock them for reading (intake shares a survey's row,
        a release or close takes it alone)."""

    def scrub(self, tables: Sequence[str]) -> None:
        """Outside a transaction: remove what deleted rows of `tables` leave behind in the
        database's files, as far as the database allows (truncate_wal, vacuum_tables)."""
        self.scrubber.scrub(self.raw, tables)

    @abstractmethod
    def lock_database(self) -> None:
        """Inside a transaction: wait until no other connection runs a migration step."""

    @abstractmethod
    def unbounded_statements(self) -> None:
        """Inside a transaction: its statements may run longer than DATABASE_STATEMENT_TIMEOUT
        (a release of a large pool, a migration step)."""

    @abstractmethod
    def transaction(self) -> AbstractContextManager["Connection"]:
        """All or nothing: commit on success (durably), roll back on any exception. Inside
        another transaction it is a savepoint: its own part is undone on an exception."""

    def grouped(self, work: "Callable[[Connection], T]") -> T:
        """`work(connection)` all or nothing, as `transaction`, returning its result once
        committed (durably) or raising its exception with its part undone; the commit may be
        shared with concurrent callers' work (SQLite: GroupCommit). Call outside a
        transaction; `work` must use only the connection it is given."""
        with self.transaction():
            return work(self)

    @abstractmethod
    def snapshot(self) -> AbstractContextManager["Connection"]:
        """A read-only transaction: every read in it sees the database as of its first read,
        and writers are not held up meanwhile. Not inside another transaction. Keep it short:
        while it is open the scrub cannot finish (truncate_wal, vacuum_tables)."""


class SQLiteConnection(Connection):
    dialect = "sqlite"
    without_rowid = " WITHOUT ROWID"

    def __init__(self, raw: Any, scrubber: "Scrubber", keys: StorageKeys,
                 published: dict[str, Survey], writer: "WriterLock", group: "GroupCommit"):
        super().__init__(raw, scrubber, keys, published)
        self.writer, self.group = writer, group

    def grouped(self, work: Callable[[Connection], T]) -> T:
        if self.raw.in_transaction:
            return super().grouped(work)
        return self.group.run(work)

    def indexed_by(self, index: str) -> str:
        return f" INDEXED BY {index}"

    def query_locked(self, sql: str, params: Sequence[Any] = (), *,
                     exclusive: bool = False) -> list[tuple]:
        return self.query(sql, params)  # BEGIN IMMEDIATE already holds the write lock

    def lock_database(self) -> None:
        pass  # BEGIN IMMEDIATE already serializes writers

    def unbounded_statements(self) -> None:
        pass  # SQLite has no statement timeout

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        if self.raw.in_transaction:
            with self._savepoint():
                yield self
            return
        with self.writer.held():
            self.raw.execute("BEGIN IMMEDIATE")  # take the write lock now: no upgrade deadlocks
            try:
                yield self
                self.raw.execute("COMMIT")
            except BaseException:
                if self.raw.in_transaction:  # also after a failed COMMIT: never leave one open
                    self.raw.execute("ROLLBACK")
                raise

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        if self.raw.in_transaction:
            raise RuntimeError("a snapshot cannot be nested in a transaction")
        self.raw.execute("BEGIN DEFERRED")  # WAL: readers never block the writer
        try:
            yield self
        finally:
            if self.raw.in_transaction:
                self.raw.execute("COMMIT")

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
        self.raw.execute("SAVEPOINT nested")
        try:
            yield
        except BaseException:
            if self.raw.in_transaction:  # SQLite rolls it all back itself on an I/O error
                self.raw.execute("ROLLBACK TO nested")
                self.raw.execute("RELEASE nested")
            raise
        self.raw.execute("RELEASE nested")


class PostgresConnection(Connection):
    dialect = "postgresql"
    MIGRATION_LOCK = 0x6C64705F  # any constant shared by every replica ("ldp_")

    def _sql(self, sql: str) -> str:
        """psycopg's placeholders: ? -> %s, and a literal % (LIKE) doubled."""
        return sql.replace("%", "%%").replace("?", "%s")

    def query_locked(self, sql: str, params: Sequence[Any] = (), *,
                     exclusive: bool = False) -> list[tuple]:
        return self.query(sql + (" FOR UPDATE" if exclusive else " FOR SHARE"), params)

    def lock_database(self) -> None:
        """A migration step waits for another replica's and runs as long as it needs: the
        session's lock and statement timeouts are lifted for this transaction."""
        self.raw.execute("SET LOCAL lock_timeout = 0")
        self.unbounded_statements()
        self.raw.execute("SELECT pg_advisory_xact_lock(%s)", (self.MIGRATION_LOCK,))

    def unbounded_statements(self) -> None:
        self.raw.execute("SET LOCAL statement_timeout = 0")

    def insert_rows(self, table: str, columns: Sequence[str],
                    rows: Iterable[Sequence[Any]]) -> None:
        """COPY: one stream instead of a statement per row; rows land in the order sent."""
        with self.raw.cursor().copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        with self.raw.transaction():
            yield self

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        from psycopg.pq import TransactionStatus

        if self.raw.info.transaction_status != TransactionStatus.IDLE:
            raise RuntimeError("a snapshot cannot be nested in a transaction")
        with self.raw.transaction():
            self.raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield self


def sync_log(fd: int) -> None:
    """fdatasync (fsync where there is none: macOS) of the write-ahead log open at `fd`: every
    transaction committed to it before is then on disk, whichever connection or process wrote
    it (the page cache is the file's, not a descriptor's)."""
    getattr(os, "fdatasync", os.fsync)(fd)


class Scrubber:
    """Runs a database's scrub (`attempt(raw connection, tables) -> done`) until it is done: at
    once on the caller's connection when `inline`, and, if that could not finish (a reader holds
    an old snapshot: a backup or another tool; exports read in short transactions) or is not
    inline, in a background thread on a connection of its own, retried after RETRY seconds,
    doubling up to MAX_RETRY, until one attempt finishes."""

    RETRY, MAX_RETRY = 0.1, 30.0

    def __init__(self, attempt: Callable[[Any, Sequence[str]], bool],
                 connect: Callable[[], AbstractContextManager[Any]], inline: bool):
        self._attempt, self._connect, self._inline = attempt, connect, inline
        self._tables: set[str] = set()
        self._wanted = threading.Event()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def scrub(self, raw: Any, tables: Sequence[str]) -> bool:
        """Try now on `raw` (outside a transaction) if inline, else (or if that could not
        finish) keep trying in the background. True if done now."""
        if self._inline and self._attempt(raw, tables):
            return True
        with self._lock:
            self._tables.update(tables)
            self._wanted.set()
            if self._thread is None:
                self._thread = threading.Thread(target=self._retry, daemon=True,
                                                name="ldp-survey-scrub")
                self._thread.start()
        return False

    def pending(self) -> bool:
        """A scrub is still waiting for readers to finish."""
        with self._lock:
            return self._thread is not None

    def stop(self) -> None:
        self._stopped.set()

    def _retry(self) -> None:
        wait = 0.0 if not self._inline else self.RETRY
        while not self._stopped.wait(wait):
            with self._lock:
                if not self._wanted.is_set():
                    self._thread = None
                    return
                self._wanted.clear()
                tables = sorted(self._tables)
            if self._attempt_on_own_connection(tables):
                wait = 0.0
            else:
                self._wanted.set()
                wait = min(max(2 * wait, self.RETRY), self.MAX_RETRY)

    def _attempt_on_own_connection(self, tables: Sequence[str]) -> bool:
        """One attempt on a connection of its own (from the pool on PostgreSQL). One that fails
        (the server restarted, the connection was cut) is logged and retried like one that
        could not finish; it must not end the thread, or no scrub would run again until the app
        restarts."""
        try:
            with self._connect() as raw:
                return self._attempt(raw, tables)
        except Exception as exc:
            logger.warning("scrubbing %s failed (%s: %s); retrying", ", ".join(tables),
                           type(exc).__name__, str(exc).partition("\n")[0])
            return False


def truncate_wal(raw: sqlite3.Connection, _tables: Sequence[str], wait: float = 0.1) -> bool:
    """SQLite's scrub. secure_delete has zeroed deleted rows in their pages, but the write-ahead
    log still holds the pages as they were: wal_checkpoint(TRUNCATE) copies the log into the
    database file and empties it. It cannot finish while a reader holds an older snapshot,
    and while it waits it holds off writers, so it waits at most `wait` seconds.

    The -shm index would still list the pages each earlier transaction touched; the first
    frame of a new log clears that list, so one write that touches only the header page
    (user_version, which nothing else uses) and a second truncation leave it naming page 1."""
    waited = raw.execute("PRAGMA busy_timeout").fetchone()[0]
    raw.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
    try:
        if raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:
            return False
        version = raw.execute("PRAGMA user_version").fetchone()[0]
        raw.execute(f"PRAGMA user_version = {(version + 1) % 2**31}")
        return not raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
            raise  # an I/O error, say: not a reader to wait for
        return False  # busy: the header write could not start
    finally:
        raw.execute(f"PRAGMA busy_timeout = {waited}")


class WriterLock:
    """One writer at a time among the threads and processes (gunicorn's workers) that write a
    SQLite file: a thread lock, then an exclusive flock on a file beside the database
    (<file>-writer, empty). A writer waiting here sleeps in the kernel and wakes as soon as the
    lock is free; one refused by SQLite's own lock would poll instead (busy_timeout sleeps of
    1 ms growing to 100 ms), which held durable single-response intake to a fraction of the
    disk's commit rate. Other programs writing the file still meet SQLite's lock."""

    def __init__(self, path: str):
        self.path = f"{path}-writer"
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._pid = 0

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            if self._pid != os.getpid():  # a forked child: its own open file, its own lock
                self._fd, self._pid = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600), os.getpid()
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None and self._pid == os.getpid():
                os.close(self._fd)
            self._fd, self._pid = None, 0


class _Work:
    """One caller's part of a group: its work, then its result or its exception."""

    def __init__(self, work: Callable[[Connection], Any]):
        self.work, self.done = work, False
        self.result: Any = None
        self.error: BaseException | None = None

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


class GroupCommit:
    """Group commit (as database servers do with their log): the work of concurrent callers in
    one process runs in one transaction, each part in a savepoint of its own (a part alone
    needs none), and is committed with one sync, made once the writers' lock is let go. A
    caller who finds no commit under way leads: once it holds the writers' lock (while it
    waits there, other processes commit and more parts queue here), it takes every part
    waiting, runs them on the group's own connection (`connect`: its commits are written to
    the log unsynced, synchronous=NORMAL), commits, lets go of the lock, syncs the log (`log`,
    the -wal file, open as long as that connection) and hands each caller its result or
    exception (a part that fails is undone alone: nothing half-stored); parts that arrive
    meanwhile wait for the next leader, one of them, which starts once this sync is done
    (other processes commit during it). Each caller returns only after that sync, whether its
    part succeeded or failed, so an acknowledged response is on disk, as with a transaction of
    its own, and so is what a refusal rests on (a token spent, a claim pending, by another
    process's group). A leader that fails before it takes the parts takes its own back: no
    caller is answered with an error for a part stored later."""

    def __init__(self, log: str, connect: Callable[[], "SQLiteConnection"],
                 recover: Callable[[], bool]) -> None:
        self._log, self._connect, self._recover = log, connect, recover
        self._connection: SQLiteConnection | None = None
        self._log_fd = -1
        self._closed = False
        self._changed = threading.Condition()
        self._waiting: list[_Work] = []
        self._leading = False

    def run(self, work: Callable[[Connection], T]) -> T:
        mine = _Work(work)
        with self._changed:
            if self._closed:
                raise RuntimeError("the database is closed")
            self._waiting.append(mine)
            while self._leading and not mine.done:
                self._changed.wait()
            if mine.done:
                return mine.outcome()
            self._leading = True
        try:
            self._commit(self._opened())
        except BaseException:
            if self._connection is not None and self._connection.raw.in_transaction:
                self._close_connection()  # its rollback failed: the next leader opens anew
            with self._changed:
                if not mine.done:  # failed before it took the parts
                    self._waiting.remove(mine)
            raise
        finally:
            with self._changed:
                self._leading = False
                self._changed.notify_all()
        return mine.outcome()

    def _opened(self) -> "SQLiteConnection":
        """The group's connection, and the log open beside it for its syncs: opened after
        the connection (which keeps the log's file from being deleted while it is open), so
        a failed write since then is reported to this descriptor (a descriptor opened later
        is not told of one another has been told of)."""
        if self._connection is None:
            connection = self._connect()
            try:
                self._log_fd = os.open(self._log, os.O_RDONLY)
            except BaseException:
                connection.raw.close()
                raise
            self._connection = connection
        return self._connection

    def _close_connection(self) -> None:
        if self._connection is not None:
            os.close(self._log_fd)
            self._connection.raw.close()
            self._connection, self._log_fd = None, -1

    def close(self) -> None:
        """Close the group's connection, once no group runs on it; no group runs after."""
        with self._changed:
            self._closed = True
            while self._leading:
                self._changed.wait()
            self._close_connection()

    def _commit(self, connection: "SQLiteConnection") -> None:
        """Every part waiting once the writers' lock is held, in one transaction whose commit
        is written to the log unsynced, and synced once the lock is let go (_sync), also when
        the transaction failed. A failed begin, commit or sync fails every part.

        For the length of the sync, others can read what is not yet on disk: pending groups
        and spent tokens, which only intake and releases read. Intake answers (a replay, a
        refusal) only after a sync of its own, which covers what it read; a release commits
        FULL, so what it released is on disk before anyone reads its results."""
        group: list[_Work] = []
        try:
            try:
                with connection.transaction():
                    with self._changed:
                        group, self._waiting = self._waiting, []
                    self._run(connection, group)
            finally:
                if group:  # taken under the lock: the transaction began
                    self._sync()
        except BaseException as exc:
            for part in group:
                part.error = exc
            raise
        finally:
            for part in group:
                part.done = True

    def _sync(self) -> None:
        """sync_log. After a failed sync, what was committed is readable, here and in other
        processes, but perhaps not on disk, and a later sync need not say so (the kernel may
        drop the pages it could not write; the log's frames chain, so a hole would also cut
        off every commit after it at recovery). So the log is then copied into the database
        file, synced, and emptied (`recover`: the scrub's truncate_wal on a connection of its
        own, retried in the background until it finishes); the failure stands unless that
        finishes now."""
        try:
            sync_log(self._log_fd)
        except OSError:
            logger.error("syncing the write-ahead log failed; checkpointing it into the "
                         "database file")
            if not self._recover():
                raise

    @staticmethod
    def _run(connection: "SQLiteConnection", group: list[_Work]) -> None:
        if len(group) == 1:  # its failure undoes the transaction, which is its own
            group[0].result = group[0].work(connection)
            return
        for part in group:
            try:
                with connection.transaction():  # a savepoint
                    part.result = part.work(connection)
            except Exception as exc:
                if not connection.raw.in_transaction:  # SQLite rolled it all back (I/O error)
                    raise
                part.error = exc


class SQLiteDatabase:
    """A SQLite file in WAL mode with synchronous=FULL (but for the group commit's connection,
    whose commits GroupCommit syncs itself), through a pool of open connections:
    opening one costs the PRAGMAs, and closing the last one checkpoints the WAL. A request
    takes an idle connection (or opens one) and gives it back; at most IDLE stay open, so a
    server that starts a thread per request does not keep a connection per thread it ever ran
    (the development server and the mock do)."""

    IDLE = 8
    # What SQLite keeps of the WAL's file when it starts the log over after a checkpoint
    # (journal_size_limit). Commits then overwrite the kept file in place, and each commit's
    # fdatasync flushes the data alone; a log cut to nothing is appended to, and each of those
    # syncs also commits the file system's journal (the file's new size): bare durable commits
    # ran at about half the rate, and twice the CPU (bench/HISTORY.md, "Fifth round"). What is
    # kept holds the frames since the last scrub, which empties the file (truncate_wal).
    WAL_KEPT_BYTES = 8 * 2**20

    def __init__(self, path: str, keys: StorageKeys, timeouts: Timeouts = Timeouts()):
        self.path, self.keys, self.timeouts = path, keys, timeouts
        private_database_file(Path(path))
        self._idle: list[sqlite3.Connection] = []
        self._opened: set[sqlite3.Connection] = set()
        self._closed = False
        self._lock = threading.Lock()
        # SQLite names the log after the database file's real path (a link resolved)
        self.writer = WriterLock(path)
        self.group = GroupCommit(f"{os.path.realpath(path)}-wal", self._group_connection,
                                 self._checkpoint_anew)
        self.published: dict[str, Survey] = {}
        self.scrubber = Scrubber(self._truncate_wal, self._own_connection, inline=True)

    def _truncate_wal(self, raw: sqlite3.Connection, tables: Sequence[str]) -> bool:
        """truncate_wal as one of the writers (WriterLock): writers wait for it in the lock,
        not in SQLite's polling."""
        with self.writer.held():
            return truncate_wal(raw, tables)

    def _open(self, synchronous: str) -> sqlite3.Connection:
        """A new connection to the file, used by one thread at a time, but not always the same
        one; `synchronous` FULL (every connection but the group commit's) or NORMAL."""
        raw = sqlite3.connect(self.path, isolation_level=None, timeout=self.timeouts.lock,
                              check_same_thread=False)
        for pragma in ("journal_mode = WAL", f"synchronous = {synchronous}",
                       "foreign_keys = ON", "secure_delete = ON",
                       f"journal_size_limit = {self.WAL_KEPT_BYTES}"):
            raw.execute(f"PRAGMA {pragma}")
        return raw

    def _connection(self, raw: sqlite3.Connection) -> "SQLiteConnection":
        return SQLiteConnection(raw, self.scrubber, self.keys, self.published, self.writer,
                                self.group)

    def _group_connection(self) -> "SQLiteConnection":
        """The connection group commits run on (GroupCommit): its commits are written to the
        log unsynced, and GroupCommit syncs the log once the writers' lock is let go."""
        return self._connection(self._open("NORMAL"))

    def connect(self) -> Connection:
        with self._lock:
            raw = self._idle.pop() if self._idle else None
        if raw is None:
            raw = self._open("FULL")
            with self._lock:
                self._opened.add(raw)
        return self._connection(raw)

    def release(self, connection: Connection) -> None:
        """Give the connection back: kept idle for the next request, or closed if IDLE are (or
        the database was closed meanwhile)."""
        raw = connection.raw
        if raw.in_transaction:  # never hand on a transaction left open by a failure
            raw.execute("ROLLBACK")
        with self._lock:
            if not self._closed and raw in self._opened and len(self._idle) < self.IDLE:
                self._idle.append(raw)
                return
            self._opened.discard(raw)
        raw.close()

    def _checkpoint_anew(self) -> bool:
        """The scrub (truncate_wal) on a connection opened now, whose descriptors of the files
        have been told of no failed write, and if it cannot finish, in the background: True if
        done now (GroupCommit after a failed sync)."""
        with self._own_connection() as raw:
            return self.scrubber.scrub(raw, ())

    @contextmanager
    def _own_connection(self) -> Iterator[sqlite3.Connection]:
        raw = sqlite3.connect(self.path, isolation_level=None)
        try:
            yield raw
        finally:
            raw.close()

    def close(self) -> None:
        """Close the idle connections (when the app shuts down); one still in a request's hands
        is closed when that request gives it back, never under it from another thread (a
        connection closed while it runs a query can crash the process)."""
        self.scrubber.stop()
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._opened.difference_update(idle)
        for raw in idle:
            raw.close()
        self.group.close()
        self.writer.close()


def vacuum_tables(raw: Any, tables: Sequence[str]) -> bool:
    """VACUUM removes the dead row versions that DELETEs and UPDATEs leave in a table (the old
    versions carry the transaction ids that ordered and linked them), but only those no open
    snapshot can still see: a long read or a backup holds them. Done when VACUUM's own count of
    dead versions it had to leave (the statistics it reports, pg_stat_get_dead_tuples) is 0;
    under steady intake new ones keep coming, so the scrubber keeps vacuuming, at most every
    MAX_RETRY seconds. SKIP_LOCKED: never wait behind another VACUUM of the same table (that
    one is doing the work). It runs in the background, never in a request. Bytes of a removed
    version may stay in its page until the space is reused: see the threat model in docs/privacy.md."""
    raw.execute("SET statement_timeout = 0")  # however large the tables: in the background
    try:
        raw.execute(f"VACUUM (SKIP_LOCKED) {', '.join(tables)}")
    finally:
        raw.execute("RESET statement_timeout")
    left = raw.execute("SELECT SUM(pg_stat_get_dead_tuples(relid)) FROM "
                       "UNNEST(%s::regclass[]) AS relid", (list(tables),)).fetchone()[0]
    return not left


def bounded_conninfo(url: str, timeouts: Timeouts) -> str:
    """The connection string for `url` with every session bounded by `timeouts`: the server's
    lock_timeout, statement_timeout and idle_in_transaction_session_timeout; on both ends of
    the TCP connection, keepalives (a peer silent for `network` seconds is probed every
    second, `network` times) and tcp_user_timeout (data unacknowledged for `network` seconds
    ends the connection), so a cut-off peer is noticed within seconds rather than TCP's
    hours; connect_timeout. Options already in `url` come after these, so they win."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    def ms(seconds: float) -> int:
        return max(1, round(seconds * 1000))

    network = max(1, round(timeouts.network))
    server = {"lock_timeout": ms(timeouts.lock), "statement_timeout": ms(timeouts.statement),
              "idle_in_transaction_session_timeout": ms(timeouts.idle_in_transaction),
              "tcp_keepalives_idle": network, "tcp_keepalives_interval": 1,
              "tcp_keepalives_count": network, "tcp_user_timeout": ms(timeouts.network)}
    options = " ".join([*(f"-c {name}={value}" for name, value in server.items()),
                        conninfo_to_dict(url).get("options") or ""]).strip()
    return make_conninfo(url, options=options, connect_timeout=network, keepalives=1,
                         keepalives_idle=network, keepalives_interval=1,
                         keepalives_count=network, tcp_user_timeout=ms(timeouts.network))


def check_idle(raw: Any) -> None:
    """The pool's check of an idle connection before it hands it out: a round trip to the
    server only if the connection's socket has something to read, which on an idle connection
    is only the server's goodbye (it shut down or ended the session); raises if the
    connection is dead. A round trip for every request would cost each one a wait."""
    from psycopg_pool import ConnectionPool

    if raw.closed or readable(raw.fileno()):
        ConnectionPool.check_connection(raw)


def readable(fd: int) -> bool:
    """Whether `fd` has something to read now (poll: no limit on the descriptor's number, as
    select has)."""
    waiting = select.poll()
    waiting.register(fd, select.POLLIN)
    return bool(waiting.poll(0))


class PostgresDatabase:
    """A PostgreSQL server, through a connection pool shared by the app's threads. Every
    session is bounded by `timeouts` (bounded_conninfo); a request waits at most
    `timeouts.network` seconds for a connection, and a connection the server has closed is
    never handed out (check_idle). While the server is down the pool gives up reconnecting
    after `timeouts.network` seconds, and the next request asks for a connection at once:
    no back-off stands between the server's return and the first request it serves."""

    def __init__(self, url: str, keys: StorageKeys, max_size: int = 16,
                 timeouts: Timeouts = Timeouts()):
        import psycopg
        from psycopg_pool import ConnectionPool

        conninfo = bounded_conninfo(url, timeouts)
        try:  # one direct try first: the server's own words, within seconds, not a pool timeout
            psycopg.connect(conninfo).close()
        except psycopg.Error as exc:
            reason = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
            raise ConfigurationError(f"cannot connect to PostgreSQL at "
                                     f"{display_url(url)}: {reason}") from None
        self.pool = ConnectionPool(conninfo, min_size=1, max_size=max_size, open=True,
                                   kwargs={"autocommit": True}, check=check_idle,
                                   timeout=timeouts.network,
                                   reconnect_timeout=timeouts.network)
        self.pool.wait(timeout=10)
        self.keys = keys
        self.published: dict[str, Survey] = {}
        self.scrubber = Scrubber(vacuum_tables, self.pool.connection, inline=False)

    def connect(self) -> Connection:
        return PostgresConnection(self.pool.getconn(), self.scrubber, self.keys, self.published)

    def release(self, connection: Connection) -> None:
        self.pool.putconn(connection.raw)

    def close(self) -> None:
        self.scrubber.stop()
        self.pool.close()


Database = SQLiteDatabase | PostgresDatabase


def display_url(url: str) -> str:
    """A database URL as messages show it: without the user and password before '@'."""
    return url.split("@")[-1]


def open_database(url: str, keys: StorageKeys, timeouts: Timeouts = Timeouts()) -> Database:
    """sqlite:///path/to/file or postgresql://user@host/db, its rows keyed by `keys`, its
    sessions bounded by `timeouts`."""
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresDatabase(url, keys, timeouts=timeouts)
    if url.startswith("sqlite:///"):
        return SQLiteDatabase(url.removeprefix("sqlite:///"), keys, timeouts)
    raise ValueError(f"unsupported database URL {url!r}: use sqlite:///PATH or postgresql://...")


@contextmanager
def connection_to(database: Database) -> Iterator[Connection]:
    """A connection outside any request, released afterwards."""
    connection = database.connect()
    try:
        yield connection
    finally:
        database.release(connection)


def ping(db: Connection) -> None:
    """Fails unless the database answers."""
    db.query("SELECT 1")


def today() -> str:
    """The UTC day, the only time stored with a response."""
    return datetime.now(UTC).date().isoformat()
