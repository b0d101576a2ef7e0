"""Database connections, hiding the differences between SQLite and PostgreSQL (no Flask here).

SQLite (a file in the instance folder, WAL, synchronous=FULL, so a 2xx means the answer is on
disk) is the embedded default; PostgreSQL is used when DATABASE_URL starts with postgresql://.
The store writes SQL with `?` placeholders against a `Connection`; what the two dialects spell
differently (locking reads, serializing migrations, nested transactions) is a method here.
The tables are created and changed by numbered steps in `migrations.py`; `db.py` hands each
request its connection.
"""

import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any


class Connection(ABC):
    """One database connection with the few operations the store needs."""

    dialect: str  # "sqlite" or "postgresql": for the tests that inspect raw files and catalogs

    def __init__(self, raw: Any):
        self.raw = raw

    def _sql(self, sql: str) -> str:
        return sql

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; return the number of rows it changed."""
        return self.raw.execute(self._sql(sql), params).rowcount

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.raw.cursor().executemany(self._sql(sql), list(rows))

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return list(self.raw.execute(self._sql(sql), params).fetchall())

    @abstractmethod
    def query_locked(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """A SELECT whose rows no other transaction may change until this one ends."""

    @abstractmethod
    def lock_database(self) -> None:
        """Inside a transaction: wait until no other connection runs a migration step."""

    @abstractmethod
    def transaction(self) -> AbstractContextManager["Connection"]:
        """All or nothing: commit on success (durably), roll back on any exception. Inside
        another transaction it is a savepoint: its own part is undone on an exception."""


class SQLiteConnection(Connection):
    dialect = "sqlite"

    def query_locked(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self.query(sql, params)  # BEGIN IMMEDIATE already holds the write lock

    def lock_database(self) -> None:
        pass  # BEGIN IMMEDIATE already serializes writers

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        if self.raw.in_transaction:
            with self._savepoint():
                yield self
            return
        self.raw.execute("BEGIN IMMEDIATE")  # take the write lock now: no upgrade deadlocks
        try:
            yield self
            self.raw.execute("COMMIT")
        except BaseException:
            if self.raw.in_transaction:  # also after a failed COMMIT: never leave one open
                self.raw.execute("ROLLBACK")
            raise

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
        self.raw.execute("SAVEPOINT nested")
        try:
            yield
        except BaseException:
            self.raw.execute("ROLLBACK TO nested")
            raise
        finally:
            self.raw.execute("RELEASE nested")


class PostgresConnection(Connection):
    dialect = "postgresql"
    MIGRATION_LOCK = 0x6C64705F  # any constant shared by every replica ("ldp_")

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s")

    def query_locked(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self.query(sql + " FOR SHARE", params)  # a concurrent UPDATE waits for us

    def lock_database(self) -> None:
        self.raw.execute("SELECT pg_advisory_xact_lock(%s)", (self.MIGRATION_LOCK,))

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        with self.raw.transaction():
            yield self


class SQLiteDatabase:
    """A SQLite file in WAL mode with synchronous=FULL. Each thread keeps one open connection:
    opening one costs the PRAGMAs, and closing the last one checkpoints the WAL."""

    def __init__(self, path: str):
        self.path = path
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def connect(self) -> Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            # Used by one thread at a time; close() may run on another.
            raw = sqlite3.connect(self.path, isolation_level=None, timeout=30,
                                  check_same_thread=False)
            for pragma in ("journal_mode = WAL", "synchronous = FULL", "foreign_keys = ON",
                           "secure_delete = ON"):
                raw.execute(f"PRAGMA {pragma}")
            with self._lock:
                self._opened.append(raw)
            connection = self._local.connection = SQLiteConnection(raw)
        return connection

    def release(self, connection: Connection) -> None:
        pass  # kept for this thread's next request

    def close(self) -> None:
        """Close every thread's connection (when the app shuts down)."""
        with self._lock:
            for raw in self._opened:
                raw.close()
            self._opened.clear()
        self._local = threading.local()


class PostgresDatabase:
    """A PostgreSQL server, through a connection pool shared by the app's threads."""

    def __init__(self, url: str, max_size: int = 16):
        from psycopg_pool import ConnectionPool

        self.pool = ConnectionPool(url, min_size=1, max_size=max_size, open=True,
                                   kwargs={"autocommit": True})
        self.pool.wait(timeout=10)

    def connect(self) -> Connection:
        return PostgresConnection(self.pool.getconn())

    def release(self, connection: Connection) -> None:
        self.pool.putconn(connection.raw)

    def close(self) -> None:
        self.pool.close()


Database = SQLiteDatabase | PostgresDatabase


def open_database(url: str) -> Database:
    """sqlite:///path/to/file or postgresql://user@host/db."""
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresDatabase(url)
    if url.startswith("sqlite:///"):
        return SQLiteDatabase(url.removeprefix("sqlite:///"))
    raise ValueError(f"unsupported database URL {url!r}: use sqlite:///PATH or postgresql://...")


@contextmanager
def connection_to(database: Database) -> Iterator[Connection]:
    """A connection outside any request, released afterwards."""
    connection = database.connect()
    try:
        yield connection
    finally:
        database.release(connection)
