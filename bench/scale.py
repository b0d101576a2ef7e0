"""Scale on PostgreSQL or SQLite: fill a survey through the HTTP batch API under gunicorn, then
export, estimate and close it, printing each figure beside its comparison from the same run.

    pip install -e '.[server]'
    python bench/scale.py [--target 10000000] [--postgres postgresql://postgres@127.0.0.1/test]
    python bench/scale.py --database sqlite [--target 3000000] [--json sqlite.json]

Reports: the batch intake rate per tenth of the fill, beside the rate at which the same
gunicorn parses and validates the same batches without storing them (a bench-only app), and
the bytes written per response in each tenth (PostgreSQL: its write-ahead log; SQLite: what
the server's workers wrote to storage, /proc/PID/io write_bytes: log, checkpoints and file);
estimates latency at 10^3 and at each power of ten reached; the export's time, rows/s and the
workers' peak resident memory before and during it; the close's time; the database's size on
disk per response. The survey has four yes/no questions; its server's release clock releases
the pool every second. --json writes the per-tenth figures for bench/plot.py.
"""

import argparse
import contextlib
import json
import os
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from ingest import aggregator_env, call, gunicorn, median_ms, postgres_schema, released

ROOT = Path(__file__).resolve().parents[1]
BATCH = 10_000
SURVEY = {"title": "Scale", "release_batch": BATCH, "questions": [
    {"id": f"q{i}", "text": "?", "type": "yes_no", "alpha": 0.5} for i in range(4)]}
# The same parsing and validation as the aggregator's batch intake, without storing anything.
VALIDATE_APP = """
from flask import Flask, request
from ldpsurvey.aggregator.services.answers import parse_batch
from ldpsurvey.shared import parse_definition
from ldpsurvey.shared.survey import strict_json
SURVEY = parse_definition({survey})
app = Flask(__name__)
@app.post("/validate")
def validate():
    rows = parse_batch(SURVEY, strict_json.loads(request.get_data()), {batch})
    return {{"accepted": len(rows)}}, 201
"""


def batch_bodies(count: int) -> list[bytes]:
    """A few distinct batches of random answers, encoded once."""
    import random

    rng = random.Random(1)
    return [json.dumps({"responses": [
        {"answers": {f"q{i}": rng.randrange(2) for i in range(4)}} for _ in range(BATCH)]}
    ).encode() for _ in range(count)]


def post_bytes(url: str, body: bytes, key: str | None) -> None:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=300) as response:
        response.read()


def rate(url: str, key: str | None, bodies: list[bytes], batches: int, clients: int) -> float:
    """Responses per second posting `batches` batches from `clients` threads."""
    left, lock = [batches], threading.Lock()

    def worker(index: int) -> None:
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            post_bytes(url, bodies[index % len(bodies)], key)

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return batches * BATCH / (time.perf_counter() - start)


def workers(master: int) -> list[str]:
    with open(f"/proc/{master}/task/{master}/children") as children:
        return children.read().split()


def rss_of_workers(master: int) -> int:
    """The resident memory of gunicorn's workers (the master's children), bytes."""
    total = 0
    for pid in workers(master):
        with open(f"/proc/{pid}/status") as status:
            total += next(int(line.split()[1]) for line in status
                          if line.startswith("VmRSS:")) * 1024
    return total


def written_by_workers(master: int) -> int:
    """What gunicorn's workers have written to storage (SQLite's log, checkpoints, file)."""
    total = 0
    for pid in workers(master):
        with open(f"/proc/{pid}/io") as io:
            total += next(int(line.split()[1]) for line in io
                          if line.startswith("write_bytes:"))
    return total


def export(url: str, key: str, master: int) -> tuple[float, int, int, int]:
    """(seconds, rows, workers' RSS before, their peak during) for a streamed CSV export."""
    before, peak, done = rss_of_workers(master), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_of_workers(master))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    rows, start = 0, time.perf_counter()
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=3600) as response:
        for line in response:
            rows += not line.startswith(b"#")
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    return seconds, rows - 1, before, peak[0]  # less the header row


def written(database_url: str, master: int) -> int:
    """Bytes written so far: PostgreSQL's log position, or SQLite's workers' writes."""
    if database_url.startswith("sqlite"):
        return written_by_workers(master)
    return wal_position(database_url)


def wal_position(database_url: str) -> int:
    """The server's write-ahead-log position, bytes (its growth is what intake wrote)."""
    import psycopg

    with psycopg.connect(database_url) as conn:
        return conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()[0]


def database_bytes(database_url: str) -> int:
    if database_url.startswith("sqlite"):
        path = database_url.removeprefix("sqlite:///")
        return sum(os.path.getsize(f"{path}{suffix}") for suffix in ("", "-wal")
                   if os.path.exists(f"{path}{suffix}"))
    import psycopg

    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'"
        ).fetchone()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", type=int, default=10**7, help="responses to store")
    parser.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--json", help="write the per-tenth figures to this file")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--clients", type=int, default=3, help="concurrent batch posters")
    args = parser.parse_args()
    batches = max(10, args.target // BATCH)
    bodies = batch_bodies(4)
    print(f"gunicorn {args.workers} workers x {args.threads} threads, {args.clients} clients, "
          f"{batches:,} batches of {BATCH:,}\n", flush=True)
    tenths = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        folder = Path(tmp)
        database_url = (f"sqlite:///{folder}/scale.sqlite3" if args.database == "sqlite" else
                        stack.enter_context(postgres_schema(args.postgres)))
        (folder / "validate_app.py").write_text(VALIDATE_APP.format(survey=repr(SURVEY),
                                                                    batch=BATCH))
        with gunicorn("validate_app:app", {"PYTHONPATH": tmp}, folder, args.workers,
                      args.threads) as server:
            validated = rate(f"{server.url}/validate", None, bodies, 40, args.clients)
        print(f"{'parse and validate only (bench app), responses/s':<52} {validated:,.0f}")
        env, key = aggregator_env(folder, database_url)
        with gunicorn("ldpsurvey.aggregator:create_app()", env, folder, args.workers,
                      args.threads) as server:
            url = server.url
            small = call("POST", f"{url}/api/surveys", key, {**SURVEY, "release_batch": 1000})
            call("POST", f"{url}/api/surveys/{small['survey_id']}/responses/batch", key,
                 {"responses": [{"answers": {f"q{i}": 1 for i in range(4)}}] * 1000})
            released(f"{url}/api/surveys/{small['survey_id']}/estimates", key, 1000)
            latency = {1000: median_ms(f"{url}/api/surveys/{small['survey_id']}/estimates",
                                       key)}
            survey_id = call("POST", f"{url}/api/surveys", key, SURVEY)["survey_id"]
            intake = f"{url}/api/surveys/{survey_id}/responses/batch"
            estimates = f"{url}/api/surveys/{survey_id}/estimates"
            stored, milestone = 0, 10**6
            for tenth in range(10):
                count = batches // 10 + (tenth < batches % 10)
                wal = written(database_url, server.pid)
                got = rate(intake, key, bodies, count, args.clients)
                wal = float(written(database_url, server.pid) - wal) / (count * BATCH)
                stored += count * BATCH
                tenths.append({"stored": stored, "rate": got, "bytes_per_response": wal})
                print(f"intake, tenth {tenth + 1} (to {stored:,}), responses/s{'':<14} "
                      f"{got:,.0f} ({got / validated:.0%} of parse-and-validate), "
                      f"{wal:,.0f} {'WAL' if args.database == 'postgresql' else 'written'} "
                      "bytes per response", flush=True)
                while stored >= milestone:
                    released(estimates, key, milestone)
                    latency[milestone] = median_ms(estimates, key)
                    milestone *= 10
            released(estimates, key, stored)
            latency[stored] = median_ms(estimates, key)
            print("estimates latency, median ms: " + ", ".join(
                f"{n:,}: {ms:.2f}" for n, ms in sorted(latency.items())))
            seconds, rows, before, peak = export(f"{url}/api/surveys/{survey_id}/export.csv",
                                                 key, server.pid)
            print(f"export of {rows:,} rows: {seconds:.1f} s ({rows / seconds:,.0f} rows/s); "
                  f"workers' RSS {before / 2**20:.0f} MB before, peak {peak / 2**20:.0f} MB "
                  f"(+{(peak - before) / 2**20:.0f} MB)")
            start = time.perf_counter()
            call("POST", f"{url}/api/surveys/{survey_id}/close", key)
            print(f"close: {time.perf_counter() - start:.2f} s")
        size = database_bytes(database_url)
        print(f"database on disk: {size / 2**20:,.0f} MB, {size / stored:.0f} bytes per response")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "database": args.database, "validated": validated, "tenths": tenths,
            "bytes_per_stored_response": float(size) / stored}, indent=1))


if __name__ == "__main__":
    main()
