"""Releases: each release's number, day and size, the survey's running totals (released
responses, smallest release, last number) and its releases per day.
"""

from ldpsurvey.aggregator.store.connection import Connection


def record_release(db: Connection, survey_id: str, day: str, size: int) -> None:
    """Record the survey's next release (numbered one more than its last), and add it to the
    survey's totals and to its day's."""
    number = last_release_number(db, survey_id) + 1
    db.execute("INSERT INTO releases (survey_id, released_day, size, release_number) "
               "VALUES (?, ?, ?, ?)", (survey_id, day, size, number))
    db.execute("INSERT INTO release_totals (survey_id, released, smallest, last_number) "
               "VALUES (?, ?, ?, ?) ON CONFLICT (survey_id) DO UPDATE SET "
               "released = release_totals.released + excluded.released, "
               "smallest = CASE WHEN excluded.smallest < release_totals.smallest "
               "THEN excluded.smallest ELSE release_totals.smallest END, "
               "last_number = excluded.last_number", (survey_id, size, size, number))
    db.execute("INSERT INTO release_days (survey_id, released_day, size) VALUES (?, ?, ?) "
               "ON CONFLICT (survey_id, released_day) DO UPDATE SET "
               "size = release_days.size + excluded.size", (survey_id, day, size))


def _totals(db: Connection, survey_id: str) -> tuple[int, int | None, int]:
    """(responses released, the smallest release's size or None, the last release's number)
    from the survey's summary row (0, None, 0 before the first release)."""
    rows = db.query("SELECT released, smallest, last_number FROM release_totals "
                    "WHERE survey_id = ?", (survey_id,))
    return (int(rows[0][0]), int(rows[0][1]), int(rows[0][2])) if rows else (0, None, 0)


def last_release_number(db: Connection, survey_id: str) -> int:
    """The number of the survey's last release (1, 2, ...; 0 before the first, and for
    releases made before numbers were kept)."""
    return _totals(db, survey_id)[2]


def released_count(db: Connection, survey_id: str) -> int:
    """How many responses have been released (the sum of the releases' sizes)."""
    return _totals(db, survey_id)[0]


def smallest_release(db: Connection, survey_id: str) -> int | None:
    """The size of the survey's smallest release, None before the first."""
    return _totals(db, survey_id)[1]


def released_per_day(db: Connection, survey_id: str) -> list[tuple[str, int]]:
    """(day, responses released that day), in day order: the results page's timeline."""
    return [(day, int(size)) for day, size in db.query(
        "SELECT released_day, size FROM release_days WHERE survey_id = ? "
        "ORDER BY released_day", (survey_id,))]
