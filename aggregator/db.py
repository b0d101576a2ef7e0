"""The database: owns the connection and hides the differences between SQLite and PostgreSQL.

SQLite (a file in the instance folder, WAL, synchronous=FULL, so a 2xx means the answer is on
disk) is the embedded default; PostgreSQL is used when DATABASE_URL starts with postgresql://.
Everything else asks `get_db()` for a `Connection` and writes SQL with `?` placeholders; what
the two dialects spell differently (locking reads, serializing migrations) is a method here.
The tables are created and changed by numbered steps in `migrations.py`.
"""

import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from flask import Flask, current_app, g

from . import migrations


class Connection(ABC):
    """One database connection with the few operations the store needs."""

    dialect: str  # "sqlite" or "postgresql", for tools that inspect the files or catalog

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
        """All or nothing: commit on success (durably), roll back on any exception."""


class SQLiteConnection(Connection):
    dialect = "sqlite"

    def query_locked(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self.query(sql, params)  # BEGIN IMMEDIATE already holds the write lock

    def lock_database(self) -> None:
        pass  # BEGIN IMMEDIATE already serializes writers

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        self.raw.execute("BEGIN IMMEDIATE")  # take the write lock now: no upgrade deadlocks
        try:
            yield self
        except BaseException:
            self.raw.execute("ROLLBACK")
            raise
        self.raw.execute("COMMIT")


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

    def connect(self) -> Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            raw = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            for pragma in ("journal_mode = WAL", "synchronous = FULL", "foreign_keys = ON",
                           "secure_delete = ON"):
                raw.execute(f"PRAGMA {pragma}")
            connection = self._local.connection = SQLiteConnection(raw)
        return connection

    def release(self, connection: Connection) -> None:
        pass  # kept for this thread's next request

    def close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.raw.close()
            self._local.connection = None


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


def get_db() -> Connection:
    """This request's connection, opened on first use and released at teardown."""
    if "db" not in g:
        g.db = current_app.extensions["ldp_database"].connect()
    return g.db


def close_db(_exc: BaseException | None = None) -> None:
    connection = g.pop("db", None)
    if connection is not None:
        current_app.extensions["ldp_database"].release(connection)


def init_app(app: Flask) -> None:
    """Open the configured database, bring its schema up to date, register the teardown."""
    database = open_database(app.config["DATABASE_URL"])
    try:
        with connection_to(database) as connection:
            migrations.migrate(connection)
    except BaseException:
        database.close()
        raise
    app.extensions["ldp_database"] = database
    app.teardown_appcontext(close_db)


def close_app(app: Flask) -> None:
    """Close the app's database: its connections (SQLite) or its pool (PostgreSQL)."""
    app.extensions["ldp_database"].close()
