"""Connections behave alike on SQLite and PostgreSQL: nested transactions, failures."""

import pytest

from ldpsurvey.aggregator.db import get_db


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
