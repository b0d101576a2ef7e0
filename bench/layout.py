"""The released responses' storage layout alone, without HTTP or the pool: the cost of a release
of 10,000 rows into a table that already holds N rows of the survey, with the primary key of
release 0.2 (survey, random id) beside the one of schema step 8 (survey, bucket, release, random
id), on PostgreSQL and SQLite, side by side in one run.

    pip install -e '.[server]'
    python bench/layout.py [--sizes 0,1000000,3000000] [--releases 20] [--postgres URL]

For each database, layout and N: the table is filled with N rows in one sorted bulk load (its
index built as the end state of N inserts would have it), the log is checkpointed, then
`--releases` releases of 10,000 rows each are inserted in one transaction apiece, as
store.insert_released does (rows in key order, one release number each). Reported: rows/s
and bytes written per row (PostgreSQL: WAL; SQLite: this process's writes to storage, log and
checkpoints). A checkpoint begins the window, so every page a release touches for the first
time since then is written whole, as in steady intake between checkpoints. The rows are those
of bench/scale.py's survey (four yes/no questions).
"""

import argparse
import secrets
import sqlite3
import tempfile
import time
from pathlib import Path

from ingest import postgres_schema

from ldpsurvey.aggregator.config.ids import BUCKETS, bucket_of, new_ids

ROW = '{"q0":1,"q1":0,"q2":1,"q3":0}'
RELEASE = 10_000
LAYOUTS = {  # name: (extra column, primary key)
    "random id (0.2)": ("", "survey_id, response_id"),
    "bucket, release, id (step 8)": ("bucket INTEGER NOT NULL, ",
                                     "survey_id, bucket, release_number, response_id"),
}


def create(columns: str, key: str, suffix: str = "") -> str:
    return (f"CREATE TABLE responses (survey_id TEXT NOT NULL, {columns}response_id TEXT NOT "
            "NULL, answers TEXT NOT NULL, released_day TEXT NOT NULL, release_number INTEGER "
            f"NOT NULL, PRIMARY KEY ({key})){suffix}")


def column_names(bucketed: bool) -> str:
    """The columns of release_rows' tuples."""
    return ("survey_id, bucket, response_id, answers, released_day, release_number" if bucketed
            else "survey_id, response_id, answers, released_day, release_number")


def release_rows(bucketed: bool, number: int) -> list[tuple]:
    """One release's rows in key order, as store.insert_released inserts them."""
    if bucketed:
        return [("s", bucket_of(i), i, ROW, "2026-01-01", number)
                for i in sorted(new_ids(RELEASE), key=lambda i: (bucket_of(i), i))]
    return [("s", i, ROW, "2026-01-01", number) for i in sorted(new_ids(RELEASE))]


def own_writes() -> int:
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("write_bytes:"))


def sqlite_run(folder: Path, layout: str, size: int, releases: int) -> tuple[float, float]:
    columns, key = LAYOUTS[layout]
    bucketed = bool(columns)
    path = folder / f"layout-{secrets.token_hex(4)}.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    for pragma in ("journal_mode = WAL", "synchronous = FULL"):
        db.execute(f"PRAGMA {pragma}")
    db.execute(create(columns, key, " WITHOUT ROWID"))
    bucket = f"abs(random()) % {BUCKETS}, " if bucketed else ""
    db.execute("BEGIN")
    db.execute(f"WITH RECURSIVE n(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM n WHERE x < ?) "
               f"INSERT INTO responses SELECT 's', {bucket}substr(hex(randomblob(12)), 1, 16), ?, "
               f"'2026-01-01', x / {RELEASE} FROM n WHERE x < ? ORDER BY 1, 2, 3",
               (size, ROW, size))
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    names = column_names(bucketed)
    insert = (f"INSERT INTO responses ({names}) VALUES "
              f"({', '.join('?' * len(names.split(',')))})")
    written, elapsed = own_writes(), 0.0
    for r in range(releases):
        rows = release_rows(bucketed, size // RELEASE + 1 + r)
        start = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")
        db.executemany(insert, rows)
        db.execute("COMMIT")
        elapsed += time.perf_counter() - start
    written = own_writes() - written
    db.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return releases * RELEASE / elapsed, written / (releases * RELEASE)


def postgres_run(url: str, layout: str, size: int, releases: int) -> tuple[float, float]:
    import psycopg

    columns, key = LAYOUTS[layout]
    bucketed = bool(columns)
    with postgres_schema(url) as schema_url, psycopg.connect(schema_url, autocommit=True) as db:
        db.execute(create(columns, "survey_id").replace(", PRIMARY KEY (survey_id)", ""))
        bucket = f"floor(random() * {BUCKETS})::int, " if bucketed else ""
        db.execute(f"INSERT INTO responses SELECT 's', {bucket}substr(md5(random()::text), 1, 16), "
                   f"%s, '2026-01-01', g / {RELEASE} FROM generate_series(0, %s - 1) g",
                   (ROW, size))
        db.execute(f"ALTER TABLE responses ADD PRIMARY KEY ({key})")
        db.execute("VACUUM ANALYZE responses")
        db.execute("CHECKPOINT")
        names = column_names(bucketed)
        wal = db.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()[0]
        elapsed = 0.0
        for r in range(releases):
            rows = release_rows(bucketed, size // RELEASE + 1 + r)
            start = time.perf_counter()
            with db.transaction(), db.cursor().copy(f"COPY responses ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            elapsed += time.perf_counter() - start
        wal = db.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()[0] - wal
    return releases * RELEASE / elapsed, float(wal) / (releases * RELEASE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="0,1000000,3000000")
    parser.add_argument("--releases", type=int, default=20)
    parser.add_argument("--databases", default="postgresql,sqlite")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        for database in args.databases.split(","):
            for layout in LAYOUTS:
                for size in sizes:
                    rate, per_row = (postgres_run(args.postgres, layout, size, args.releases)
                                     if database == "postgresql" else
                                     sqlite_run(Path(tmp), layout, size, args.releases))
                    print(f"{database:<10} {layout:<30} N = {size:>12,}: {rate:>9,.0f} rows/s, "
                          f"{per_row:>7,.0f} bytes written per row", flush=True)


if __name__ == "__main__":
    main()
