"""Requests and releases against history: a survey's estimates with no release rows of other
surveys and with 10^6 of them, and a release of 100 keyed responses with no past idempotency
records and with 10^6 released ones, side by side in one run, on SQLite and PostgreSQL.

    pip install -e '.[server]'
    python bench/history.py [--rows 1000000] [--postgres postgresql://postgres@127.0.0.1/test]

In process (the app's test client and its own release function), so the figures are the
database's work, not HTTP's. The history is written straight into the tables, as a database
migrated from release 0.1.0 holds it (one release row per response, of another survey) and as
years of single responses with Idempotency-Keys leave it (released records stay until the
close); the release summaries (schema step 7) are brought up to date the way the migration
fills them, when the schema has them.
"""

import argparse
import contextlib
import secrets
import statistics
import tempfile
import time
from pathlib import Path

from ingest import postgres_schema

SURVEY = {"title": "History", "release_batch": 1, "questions": [
    {"id": f"q{i}", "text": "?", "type": "yes_no", "alpha": 0.5} for i in range(4)]}
ANSWERS = {"answers": {f"q{i}": i % 2 for i in range(4)}}
CHUNK = 100_000


def median_ms(action, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def has_table(db, name: str) -> bool:
    sql = ("SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND "
           "table_name = ?" if db.dialect == "postgresql" else
           "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?")
    return bool(db.query(sql, (name,)))


def other_releases(db, survey_id: str, rows: int) -> None:
    """`rows` releases of one response each for `survey_id`, and its summaries if kept."""
    for start in range(0, rows, CHUNK):
        with db.transaction():
            db.insert_rows("releases", ("survey_id", "released_day", "size", "release_number"),
                           [(survey_id, "2026-01-01", 1, start + i + 1)
                            for i in range(min(CHUNK, rows - start))])
    if has_table(db, "release_totals"):
        with db.transaction():
            db.execute("DELETE FROM release_totals WHERE survey_id = ?", (survey_id,))
            db.execute("DELETE FROM release_days WHERE survey_id = ?", (survey_id,))
            db.execute("INSERT INTO release_totals (survey_id, released, smallest, last_number) "
                       "SELECT survey_id, SUM(size), MIN(size), MAX(release_number) FROM releases "
                       "WHERE survey_id = ? GROUP BY survey_id", (survey_id,))
            db.execute("INSERT INTO release_days (survey_id, released_day, size) SELECT "
                       "survey_id, released_day, SUM(size) FROM releases WHERE survey_id = ? "
                       "GROUP BY survey_id, released_day", (survey_id,))


def past_records(db, survey_id: str, rows: int) -> None:
    """`rows` released idempotency records of `survey_id` (random keyed ids, as stored)."""
    for start in range(0, rows, CHUNK):
        with db.transaction():
            db.insert_rows("idempotency_keys", ("survey_id", "key_hash", "body_mac", "accepted",
                                                "released"),
                           sorted((survey_id, secrets.token_hex(32), secrets.token_hex(32), 1, 1)
                                  for _ in range(min(CHUNK, rows - start))))


def analyze(db) -> None:
    """Statistics for the planner and the visibility map, as autovacuum (PostgreSQL) would
    make them, now rather than during the timing."""
    if db.dialect == "postgresql":
        db.execute("VACUUM ANALYZE")


def run(name: str, url: str, folder: Path, rows: int) -> list[tuple[str, str]]:
    from ldpsurvey.aggregator import close_app, create_api_key, create_app
    from ldpsurvey.aggregator.services import releases
    from ldpsurvey.aggregator.store.surveys import get_survey, lock_survey
    from ldpsurvey.aggregator.web.request_connection import get_db

    app = create_app({"DATABASE_URL": url, "RELEASE_EVERY": 3600, "RATE_LIMITS_ENABLED": False},
                     instance_path=folder / f"instance-{name}")
    results = []
    try:
        client = app.test_client()
        auth = {"Authorization": f"Bearer {create_api_key(app).key}"}

        def new_survey() -> str:
            return client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]

        def release(survey_id: str) -> float:
            """Milliseconds of one release transaction (what holds the survey's lock)."""
            with app.app_context():
                db = get_db()
                survey = get_survey(db, survey_id).survey
                start = time.perf_counter()
                with db.transaction():
                    lock_survey(db, survey_id, exclusive=True)
                    released = releases.release_locked(db, survey, 1)
                took = (time.perf_counter() - start) * 1000
                db.scrub(releases.SCRUBBED)
            assert released > 0
            return took

        def keyed_responses(survey_id: str, count: int) -> None:
            for _ in range(count):
                assert client.post(f"/api/surveys/{survey_id}/responses", json=ANSWERS,
                                   headers={"Idempotency-Key": secrets.token_urlsafe(16)}
                                   ).status_code == 201

        # Estimates, with 0 and then `rows` release rows of another survey.
        mine, other = new_survey(), new_survey()
        client.post(f"/api/surveys/{mine}/responses/batch", json={"responses": [ANSWERS] * 1000},
                    headers=auth)
        release(mine)
        estimates = f"/api/surveys/{mine}/estimates"

        def estimate() -> None:
            assert client.get(estimates, headers=auth).status_code == 200

        estimate()
        empty = median_ms(estimate, 50)
        with app.app_context():
            other_releases(get_db(), other, rows)
            analyze(get_db())
        estimate()
        full = median_ms(estimate, 50)
        results.append((f"estimates, {name}, median ms, 0 / {rows:,} release rows of another "
                        "survey", f"{empty:.2f} / {full:.2f} ({full / empty:.2f}x)"))

        # A release of 100 keyed responses, with 0 and then `rows` past idempotency records.
        keyed = new_survey()
        times = []
        for _ in range(5):
            keyed_responses(keyed, 100)
            times.append(release(keyed))
        before = statistics.median(times)
        with app.app_context():
            past_records(get_db(), keyed, rows)
            analyze(get_db())
        times = []
        for _ in range(5):
            keyed_responses(keyed, 100)
            times.append(release(keyed))
        after = statistics.median(times)
        results.append((f"release of 100 keyed responses, {name}, median ms, 0 / {rows:,} past "
                        "idempotency records", f"{before:.2f} / {after:.2f} ({after / before:.2f}x)"))
    finally:
        close_app(app)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10**6)
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--databases", default="sqlite,postgresql")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        folder = Path(tmp)
        chosen = args.databases.split(",")
        backends = [("SQLite", f"sqlite:///{folder}/history.sqlite3")] * ("sqlite" in chosen)
        if "postgresql" in chosen:
            backends.append(("PostgreSQL", stack.enter_context(postgres_schema(args.postgres))))
        for name, url in backends:
            for label, value in run(name, url, folder, args.rows):
                print(f"{label:<88} {value}", flush=True)


if __name__ == "__main__":
    main()
