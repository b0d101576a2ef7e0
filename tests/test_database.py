"""Connections behave alike on SQLite and PostgreSQL: nested transactions, failures."""

import pytest

from ldpsurvey.aggregator.db import get_db


def names(db) -> list[str]:
    return sorted(name for (name,) in db.query("SELECT key_hash FROM api_keys"))


def test_a_nested_transaction_is_undone_alone(app):
    with app.app_context():
        db = get_db()
        with db.transaction():
            db.execute("INSERT INTO api_keys (key_hash, role) VALUES ('outer', 'relay')")
            with pytest.raises(RuntimeError), db.transaction():
                db.execute("INSERT INTO api_keys (key_hash, role) VALUES ('inner', 'relay')")
                raise RuntimeError
        assert names(db) == ["outer"]


def test_a_failed_transaction_leaves_the_connection_usable(app):
    with app.app_context():
        db = get_db()
        with pytest.raises(Exception, match=r"(?i)unique|constraint"), db.transaction():
            db.execute("INSERT INTO api_keys (key_hash, role) VALUES ('same', 'relay')")
            db.execute("INSERT INTO api_keys (key_hash, role) VALUES ('same', 'relay')")
        with db.transaction():
            db.execute("INSERT INTO api_keys (key_hash, role) VALUES ('after', 'relay')")
        assert names(db) == ["after"]
