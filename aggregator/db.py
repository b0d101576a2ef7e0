"""The database: owns the connection and hides the differences between SQLite and PostgreSQL.

SQLite (a file in the instance folder, WAL, synchronous=FULL, so a 2xx means the answer is on
disk) is the embedded default; PostgreSQL is used when DATABASE_URL starts with postgresql://.
Everything else asks `get_db()` for a `Connection` and writes SQL with `?` placeholders.
"""

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from flask import Flask, current_app, g

# Columns hold only: surveys and their signed manifests, randomized answers with the day they
# arrived, per-option counters, hashes of idempotency keys, of unspent invitation tokens and of
# researcher keys. There is no column for an IP address, user agent, cookie, token or precise
# time, and nothing links a token to a response: spending a token deletes its hash.
SCHEMA = """
CREATE TABLE IF NOT EXISTS surveys (
    survey_id TEXT PRIMARY KEY,
    manifest TEXT NOT NULL,
    signature TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('open', 'closed'))
);
CREATE TABLE IF NOT EXISTS responses (
    response_id TEXT PRIMARY KEY,
    survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
    answers TEXT NOT NULL,
    received_day TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_by_survey ON responses (survey_id);
CREATE TABLE IF NOT EXISTS counts (
    survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
    question_id TEXT NOT NULL,
    option_index INTEGER NOT NULL,
    count BIGINT NOT NULL DEFAULT 0 CHECK (count >= 0),
    PRIMARY KEY (survey_id, question_id, option_index)
);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
    key_hash TEXT NOT NULL,
    body_hash TEXT NOT NULL,
    accepted INTEGER NOT NULL,
    PRIMARY KEY (survey_id, key_hash)
);
CREATE TABLE IF NOT EXISTS invitation_tokens (
    survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
    token_hash TEXT NOT NULL,
    PRIMARY KEY (survey_id, token_hash)
);
CREATE TABLE IF NOT EXISTS api_keys (
    key_hash TEXT PRIMARY KEY,
    role TEXT NOT NULL CHECK (role IN ('researcher', 'relay'))
);
"""


class Connection:
    """One database connection with the few operations the store needs."""

    def __init__(self, raw: Any, postgres: bool):
        self.raw = raw
        self.postgres = postgres

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.postgres else sql

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; return the number of rows it changed."""
        return self.raw.execute(self._sql(sql), params).rowcount

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.raw.cursor().executemany(self._sql(sql), list(rows))

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return list(self.raw.execute(self._sql(sql), params).fetchall())

    @contextmanager
    def transaction(self) -> Iterator["Connection"]:
        """All or nothing: commit on success (durably), roll back on any exception."""
        if self.postgres:
            with self.raw.transaction():
                yield self
            return
        self.raw.execute("BEGIN IMMEDIATE")  # take the write lock now: no upgrade deadlocks
        try:
            yield self
        except BaseException:
            self.raw.execute("ROLLBACK")
            raise
        self.raw.execute("COMMIT")


class SQLiteDatabase:
    """A SQLite file in WAL mode with synchronous=FULL. Each thread keeps one open connection:
    opening one costs the PRAGMAs, and closing the last one checkpoints the WAL."""

    postgres = False

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
            connection = self._local.connection = Connection(raw, postgres=False)
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

    postgres = True

    def __init__(self, url: str, max_size: int = 16):
        from psycopg_pool import ConnectionPool

        self.pool = ConnectionPool(url, min_size=1, max_size=max_size, open=True,
                                   kwargs={"autocommit": True})
        self.pool.wait(timeout=10)

    def connect(self) -> Connection:
        return Connection(self.pool.getconn(), postgres=True)

    def release(self, connection: Connection) -> None:
        self.pool.putconn(connection.raw)

    def close(self) -> None:
        self.pool.close()


def open_database(url: str) -> SQLiteDatabase | PostgresDatabase:
    """sqlite:///path/to/file or postgresql://user@host/db."""
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresDatabase(url)
    if url.startswith("sqlite:///"):
        return SQLiteDatabase(url.removeprefix("sqlite:///"))
    raise ValueError(f"unsupported database URL {url!r}: use sqlite:///PATH or postgresql://...")


def init_schema(database: SQLiteDatabase | PostgresDatabase) -> None:
    """Create the tables if they do not exist (idempotent)."""
    connection = database.connect()
    try:
        with connection.transaction():
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    connection.execute(statement)
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
    """Open the configured database, create the schema, register the teardown."""
    database = open_database(app.config["DATABASE_URL"])
    init_schema(database)
    app.extensions["ldp_database"] = database
    app.teardown_appcontext(close_db)
