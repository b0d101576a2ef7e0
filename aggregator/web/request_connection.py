"""Each request's database connection (the Flask glue, after the tutorial's db.py): opened on
first use through `get_db()`, released at teardown, or by a streamed response when it closes
(`release_on_close`); the database itself is opened, and its schema brought up to date, when
the app is created, which also starts the app's release clock (releases.ReleaseClock)."""

from flask import Flask, Response, current_app, g

from ldpsurvey.aggregator.services import releases
from ldpsurvey.aggregator.store import migrations
from ldpsurvey.aggregator.store.connection import Connection, Timeouts, connection_to, open_database
from ldpsurvey.aggregator.store.storage_key import StorageKeys


def get_db() -> Connection:
    """This request's connection, opened on first use and released at teardown."""
    if "db" not in g:
        g.db = current_app.extensions["ldp_database"].connect()
    return g.db


def release_on_close(response: Response) -> Response:
    """Keep this request's connection from teardown and release it when `response` closes.
    Flask tears a request down before its streamed body is read, and the body still reads
    that connection: released at teardown, it went to the next request mid-stream."""
    connection = g.pop("db")
    database = current_app.extensions["ldp_database"]
    response.call_on_close(lambda: database.release(connection))
    return response


def close_db(_exc: BaseException | None = None) -> None:
    connection = g.pop("db", None)
    if connection is not None:
        current_app.extensions["ldp_database"].release(connection)


def init_app(app: Flask) -> None:
    """Open the configured database under the storage key, its sessions bounded by the
    DATABASE_*_TIMEOUT settings, bring its schema up to date (one
    written under another storage key is refused: migrations.check_key), scrub what deleted
    rows left, start the release clock (every RELEASE_EVERY seconds), register the teardown."""
    keys = StorageKeys.from_secret(app.config["STORAGE_KEY"].encode())
    config = app.config
    timeouts = Timeouts(config["DATABASE_LOCK_TIMEOUT"], config["DATABASE_STATEMENT_TIMEOUT"],
                        config["DATABASE_IDLE_IN_TRANSACTION_TIMEOUT"],
                        config["DATABASE_NETWORK_TIMEOUT"])
    database = open_database(config["DATABASE_URL"], keys, timeouts)
    try:
        with connection_to(database) as connection:
            migrations.migrate(connection)
            releases.recover(connection)
    except BaseException:
        database.close()
        raise
    app.extensions["ldp_database"] = database
    clock = releases.ReleaseClock(database, app.config["RELEASE_EVERY"],
                                  app.config["IDEMPOTENCY_DAYS"])
    app.extensions["ldp_release_clock"] = clock
    clock.start()
    app.teardown_appcontext(close_db)


def close_app(app: Flask) -> None:
    """Stop the release clock (a release under way finishes), then close the app's database:
    its connections (SQLite) or its pool (PostgreSQL)."""
    app.extensions["ldp_release_clock"].stop()
    app.extensions["ldp_database"].close()
