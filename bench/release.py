"""One release (a close's, or an hourly one) of a large pending pool: its time and the memory
it takes, with this code and, given `--previous SRC`, with the code of SRC, side by side in one
run, on SQLite and PostgreSQL.

    pip install -e '.[server]'
    mkdir /tmp/previous && git archive dfa6fab | tar -x -C /tmp/previous   # before the streaming
    python bench/release.py [--sizes 100000 1000000] [--previous /tmp/previous]

Each case runs in a process of its own: it fills one survey's pool with N sealed pending
responses (groups of one since schema step 11) and N unreleased idempotency records (straight
into the tables, as N keyed single responses leave them), then times the release transaction
(store.lock_survey and releases.release_locked) and reads how far it raised the process's peak resident memory
(VmHWM, reset just before the release through /proc/self/clear_refs).
"""

import argparse
import contextlib
import json
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ingest import code_environment, postgres_schema

SURVEY = {"title": "Release", "release_batch": 1, "questions": [
    {"id": f"q{i}", "text": "?", "type": "yes_no", "alpha": 0.5} for i in range(4)]}
FILL = 100_000  # rows per filling transaction


def peak_rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 1024


def pending_has_size(db) -> bool:
    """Whether the pending pool keeps groups with their size (schema step 11)."""
    sql = ("SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND "
           "table_name = 'pending' AND column_name = 'size'" if db.dialect == "postgresql" else
           "SELECT 1 FROM pragma_table_info('pending') WHERE name = 'size'")
    return bool(db.query(sql))


def one_case(url: str, folder: str, size: int) -> dict:
    """In this process: fill a pool of `size`, release it, report seconds and memory."""
    from ldpsurvey.aggregator import close_app, create_api_key, create_app
    from ldpsurvey.aggregator.config.ids import new_ids
    from ldpsurvey.aggregator.services import releases
    from ldpsurvey.aggregator.store.responses import answers_json, longest_row
    from ldpsurvey.aggregator.store.surveys import get_survey, lock_survey
    from ldpsurvey.aggregator.web.request_connection import get_db

    app = create_app({"DATABASE_URL": url, "RELEASE_EVERY": 3600, "RATE_LIMITS_ENABLED": False},
                     instance_path=Path(folder) / "instance")
    try:
        client = app.test_client()
        auth = {"Authorization": f"Bearer {create_api_key(app).key}"}
        survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
        with app.app_context():
            db = get_db()
            survey = get_survey(db, survey_id).survey
            row = answers_json(survey, [(1, 0, 1, 0)])[0].ljust(longest_row(survey))
            groups = ["survey_id", "pending_id", "answers"] + ["size"] * pending_has_size(db)
            for start in range(0, size, FILL):
                count = min(FILL, size - start)
                with db.transaction():  # single responses: a group of one each, if groups
                    db.insert_rows("pending", groups, sorted(
                        (survey_id, pending_id, db.keys.seal(survey_id, row), 1)[:len(groups)]
                        for pending_id in new_ids(count)))
                    db.insert_rows("idempotency_keys", ("survey_id", "key_hash", "body_mac",
                                                        "accepted", "released"),
                                   sorted((survey_id, secrets.token_hex(32),
                                           secrets.token_hex(32), 1, 0) for _ in range(count)))
            if db.dialect == "postgresql":
                db.execute("VACUUM ANALYZE")
            with open("/proc/self/clear_refs", "w") as refs:
                refs.write("5")  # the peak resident memory starts again from what is resident
            before = peak_rss_mb()
            start = time.perf_counter()
            with db.transaction():
                lock_survey(db, survey_id, exclusive=True)
                released = releases.release_locked(db, survey, 1)
            seconds = time.perf_counter() - start
            peak = peak_rss_mb()
        assert released == size, released
    finally:
        close_app(app)
    return {"seconds": seconds, "rss_before_mb": before, "peak_added_mb": peak - before}


def measured(database: str, postgres: str, size: int, source: Path | None) -> dict:
    """one_case in a fresh process, with this code or the code of `source`."""
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        url = (f"sqlite:///{folder}/release.sqlite3" if database == "sqlite"
               else stack.enter_context(postgres_schema(postgres)))
        env = code_environment(source, Path(folder))
        code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import release; "
                "print(json.dumps(release.one_case(sys.argv[2], sys.argv[3], int(sys.argv[4]))))")
        out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), url,
                              folder, str(size)], env=env, capture_output=True, text=True,
                             check=True).stdout
    return json.loads(out.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**5, 10**6])
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--previous", type=Path, help="source tree of the code to compare")
    args = parser.parse_args()
    codes = [("this", None)] + [("previous", args.previous)] * (args.previous is not None)
    print(f"{'database':<11} {'code':<9} {'pool':>10} {'seconds':>8} {'rows/s':>9} "
          f"{'RSS before MB':>14} {'release added MB':>17}")
    for database in args.databases.split(","):
        for size in args.sizes:
            for name, source in codes:
                case = measured(database, args.postgres, size, source)
                print(f"{database:<11} {name:<9} {size:>10,} {case['seconds']:>8.1f} "
                      f"{size / case['seconds']:>9,.0f} {case['rss_before_mb']:>14.0f} "
                      f"{case['peak_added_mb']:>17.0f}", flush=True)


if __name__ == "__main__":
    main()
