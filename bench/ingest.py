"""Intake throughput and estimate latency of the aggregator under gunicorn on loopback, side by
side with a do-nothing Flask endpoint in the same run.

    apt-get install wrk            # the load generator (C, so it does not steal the server's CPU)
    pip install -e '.[server]'
    python bench/ingest.py [--seconds 10] [--postgres postgresql://postgres@127.0.0.1/test]

Reports: requests/s of a do-nothing endpoint; single-response intake responses/s (durable
commits) on SQLite and PostgreSQL, and on SQLite also through a bare WSGI function calling the
same intake service (bare_intake.py: the raw bound without Flask); batch intake responses/s;
estimates latency at 10^3 and 10^6 stored responses. The do-nothing endpoint and single
responses (with and without a key) run `--repeat` times each, and the fastest run counts (see
`fastest`), with the server's CPU milliseconds per request (gunicorn's processes' user and
system time, /proc; PostgreSQL's own processes are not counted). The survey is the bundled
example (release batch 100): every response goes through the pending pool, which the server's
release clock releases every second.
"""

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import typing
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = {"smoked": 1, "drank_and_drove": 0, "cannabis": 1, "sleep": 2}
NOOP_APP = """
from flask import Flask
app = Flask(__name__)
@app.route("/", methods=["GET", "POST"])
def noop():
    return "ok"
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server(typing.NamedTuple):
    url: str
    pid: int  # gunicorn's master; its children are the workers


@contextlib.contextmanager
def gunicorn(app: str, env: dict, folder: Path, workers: int, threads: int,
             syncs: Path | None = None):
    """gunicorn with deploy/gunicorn.conf.py on a free loopback port; yields its Server. With
    `syncs`, it runs under strace, which counts its fsync and fdatasync calls into that file."""
    port = free_port()
    env = {**os.environ, **env, "LDP_SURVEY_BIND": f"127.0.0.1:{port}",
           "LDP_SURVEY_WORKERS": str(workers), "LDP_SURVEY_THREADS": str(threads)}
    command = [shutil.which("gunicorn", path=os.path.dirname(sys.executable)), "-c",
               str(ROOT / "deploy" / "gunicorn.conf.py"), "--access-logfile", "/dev/null", app]
    if syncs:
        command = ["strace", "-f", "-c", "-o", str(syncs), "-e", "trace=fsync,fdatasync",
                   *command]
    proc = subprocess.Popen(command, env=env, cwd=folder, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(url + "/", timeout=1)
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                time.sleep(0.05)
        yield Server(url, int(children(proc.pid)[0]) if syncs else proc.pid)
    finally:
        if syncs:  # stop gunicorn; strace then writes its counts and ends
            os.kill(int(children(proc.pid)[0]), signal.SIGTERM)
        else:
            proc.terminate()
        proc.wait(timeout=60)


def children(pid: int) -> list[str]:
    with open(f"/proc/{pid}/task/{pid}/children") as found:
        return found.read().split()


def code_environment(source: Path | None, folder: Path) -> dict[str, str]:
    """os.environ for a process that runs this code (`source` None) or the code of the source
    tree `source` (an earlier commit's `git archive`) with this venv's packages: PYTHONPATH
    then names `folder`, where an `ldpsurvey` package of links to the tree's parts is made
    (once)."""
    env = dict(os.environ)
    if source is not None:
        package = folder / "ldpsurvey"
        if not package.exists():
            package.mkdir()
            for part in ("shared", "client", "aggregator", "cli", "analysis"):
                (package / part).symlink_to(source.resolve() / part)
        env["PYTHONPATH"] = str(folder)
    return env


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds that gunicorn's master `pid` and its workers have used."""
    total = 0
    for process in [pid, *map(int, children(pid))]:
        with open(f"/proc/{process}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (stat's fields 14 and 15)
    return total / os.sysconf("SC_CLK_TCK")


def fastest(server: Server, repeat: int, url: str, seconds: int, connections: int,
            **options) -> tuple[float, float, list[float]]:
    """wrk (its arguments) `repeat` times: the fastest run's requests/s, the server's CPU
    milliseconds per request in that run, and every run's requests/s. Each run opens its
    connections anew, and gunicorn's workers take them as they wake: one run may put all 16 on
    one worker, which then serves them on one core (seen here: the do-nothing endpoint at
    2,300/s and 0.50 ms, against 7,200/s and 0.25 ms spread over four workers). The fastest run
    is the server's capacity."""
    runs = []
    for _ in range(repeat):
        before = cpu_seconds(server.pid)
        rate = wrk(url, seconds, connections, **options)
        runs.append((rate, (cpu_seconds(server.pid) - before) * 1000 / (rate * seconds)))
    best, best_ms = max(runs)
    return best, best_ms, [rate for rate, _ in runs]


def rate_text(run: tuple[float, float, list[float]], noop: float | None,
              extra: str = "") -> str:
    """A `fastest` result as reported: the rate, its share of the do-nothing rate `noop` (if
    given) and `extra`, the server's CPU per request and every run's rate."""
    rate, ms, rates = run
    share = f"{rate / noop:.0%} of do-nothing{extra}; " if noop else ""
    return (f"{rate:,.0f} ({share}server CPU {ms:.2f} ms per request; runs "
            f"{', '.join(f'{r:,.0f}' for r in rates)})")


def sync_calls(strace_summary: Path) -> int:
    """fsync and fdatasync calls in an strace -c summary."""
    return sum(int(line.split()[3]) for line in strace_summary.read_text().splitlines()
               if line.split()[-1:] in (["fsync"], ["fdatasync"]))


def stored_responses(database_url: str) -> int:
    """Responses stored, pending or released (SQLite; this schema or one before step 11)."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(database_url.removeprefix("sqlite:///"))) as db:
        groups = db.execute("SELECT 1 FROM pragma_table_info('pending') WHERE name = 'size'")
        pending = "SUM(size)" if groups.fetchone() else "COUNT(*)"  # groups since schema step 11
        return db.execute(f"SELECT (SELECT COALESCE({pending}, 0) FROM pending) + "
                          "(SELECT COUNT(*) FROM responses)").fetchone()[0]


# Each request its own Idempotency-Key, as the Python client and the web form send: the run's
# random prefix, wrk's thread number and a counter.
UNIQUE_KEYS = """
local threads = 0
function setup(thread) threads = threads + 1; thread:set("tid", threads) end
function init(args) counter = 0 end
function request()
  counter = counter + 1
  wrk.headers["Idempotency-Key"] = string.format("%s-%d-%d", RUN, tid, counter)
  return wrk.format()
end
"""


def wrk(url: str, seconds: int, connections: int, body: dict | None = None,
        headers: dict | None = None, idempotency_keys: bool = False) -> float:
    """Requests per second that wrk measured (POSTing `body` as JSON when given, each request
    with an Idempotency-Key of its own if `idempotency_keys`)."""
    script = None
    args = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency"]
    if body is not None:
        lines = ['wrk.method = "POST"', f"wrk.body = {json.dumps(json.dumps(body))}",
                 'wrk.headers["Content-Type"] = "application/json"']
        lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in (headers or {}).items()]
        if idempotency_keys:
            lines += [f'RUN = "{secrets.token_hex(8)}"', UNIQUE_KEYS]
        script = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)  # noqa: SIM115
        script.write("\n".join(lines))
        script.close()
        args += ["-s", script.name]
    out = subprocess.run([*args, url], capture_output=True, text=True, check=True).stdout
    if script:
        os.unlink(script.name)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise RuntimeError(f"{errors.group(1)} failed requests:\n{out}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def call(method: str, url: str, key: str | None = None, body=None) -> dict:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


RELEASE_EVERY = 1  # seconds: the benches' servers release full pools at every second


def released(estimates: str, key: str, count: int, timeout: float = 900) -> int:
    """Wait until the survey (its estimates URL) counts at least `count` released responses,
    which its server's release clock releases at the next scheduled instant; return n."""
    deadline = time.monotonic() + timeout
    while (n := call("GET", estimates, key)["questions"][0]["n"]) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {n:,} of {count:,} responses released in {timeout:g} s")
        time.sleep(0.2)
    return n


def median_ms(url: str, key: str, repeats: int = 50) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call("GET", url, key)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def aggregator_env(folder: Path, database_url: str) -> tuple[dict, str]:
    """Production settings with a fresh key file; returns (environment, researcher key)."""
    from ldpsurvey.aggregator import close_app, create_api_key, create_app
    from ldpsurvey.aggregator.config.signing import write_key_file

    write_key_file(folder / "key.pem")
    env = {"LDP_SURVEY_KEY_FILE": str(folder / "key.pem"),
           "LDP_SURVEY_SECRET_KEY": secrets.token_hex(32),
           "LDP_SURVEY_STORAGE_KEY": secrets.token_hex(32),
           "LDP_SURVEY_DATABASE_URL": database_url,
           "LDP_SURVEY_RELEASE_EVERY": str(RELEASE_EVERY),
           "LDP_SURVEY_PUBLIC_URL": "http://127.0.0.1",  # signed into surveys; benches send raw
           "LDP_SURVEY_RATE_LIMITS_ENABLED": "false"}  # one client floods on purpose
    app = create_app({"DEPLOYMENT": "production", "KEY_FILE": env["LDP_SURVEY_KEY_FILE"],
                      "SECRET_KEY": env["LDP_SURVEY_SECRET_KEY"],
                      "STORAGE_KEY": env["LDP_SURVEY_STORAGE_KEY"], "DATABASE_URL": database_url,
                      "PUBLIC_URL": env["LDP_SURVEY_PUBLIC_URL"]},
                     instance_path=folder)
    key = create_api_key(app).key
    close_app(app)
    return env, key


def new_survey(url: str, key: str) -> str:
    from ldpsurvey.shared import read_definition

    definition = read_definition(ROOT / "shared" / "examples" / "health.toml")
    return call("POST", f"{url}/api/surveys", key, definition)["survey_id"]


@contextlib.contextmanager
def postgres_schema(base_url: str):
    import psycopg

    schema = f"bench_{secrets.token_hex(4)}"
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{base_url}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(base_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def fsyncs_per_second(folder: Path, seconds: float = 3.0) -> float:
    """Bare fdatasync calls per second after appending 4 kB to a file (a WAL frame's worth):
    the disk's own rate of durable writes."""
    fd = os.open(folder / "fsync.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    count, start, page = 0, time.perf_counter(), b"\0" * 4096
    try:
        while time.perf_counter() - start < seconds:
            os.write(fd, page)
            os.fdatasync(fd)
            count += 1
    finally:
        os.close(fd)
    return count / (time.perf_counter() - start)


def sqlite_commits_per_second(folder: Path, synchronous: str, seconds: float = 3.0) -> float:
    """One-row transactions per second on a WAL SQLite file: the ceiling that fsync puts on
    durable single-response intake."""
    import sqlite3

    db = sqlite3.connect(folder / f"commits-{synchronous}.sqlite3", isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA synchronous = {synchronous}")
    db.execute("CREATE TABLE t (x TEXT)")
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t VALUES ('{}')")
        db.execute("COMMIT")
        count += 1
    db.close()
    return count / (time.perf_counter() - start)


def bare_intake(env: dict, home: Path, args: argparse.Namespace, survey_id: str,
                noop: float) -> str:
    """Keyed single responses through bare_intake.py: the same intake service and database,
    called from a WSGI function without Flask, under the same gunicorn settings; the line
    to report."""
    env = {**env, "PYTHONPATH": str(Path(__file__).parent)}
    with gunicorn("bare_intake:create()", env, home, args.workers, args.threads) as server:
        return rate_text(fastest(server, args.repeat,
                                 f"{server.url}/api/surveys/{survey_id}/responses",
                                 args.seconds, args.connections, body={"answers": ANSWERS},
                                 idempotency_keys=True), noop)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2 * (os.cpu_count() or 1) + 1)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of the do-nothing endpoint and of single responses")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--fill", type=int, default=10**6, help="responses for the big estimate")
    parser.add_argument("--count-syncs", action="store_true",
                        help="also count SQLite's syncs per keyed single response (strace)")
    args = parser.parse_args()
    results: list[tuple[str, str]] = []

    def report(name: str, value: str) -> None:
        results.append((name, value))
        print(f"{name:<58} {value}", flush=True)

    print(f"gunicorn: {args.workers} workers x {args.threads} threads; wrk: 2 threads, "
          f"{args.connections} connections, {args.seconds} s per run\n")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "noop_app.py").write_text(NOOP_APP)
        with gunicorn("noop_app:app", {"PYTHONPATH": tmp}, folder, args.workers,
                      args.threads) as server:
            noop_run = fastest(server, args.repeat, server.url + "/", args.seconds,
                               args.connections, body={"answers": ANSWERS})
        noop = noop_run[0]
        report("do-nothing Flask endpoint (POST), requests/s (fastest run)",
               rate_text(noop_run, None))
        report("bare fdatasync of a 4 kB append, per second", f"{fsyncs_per_second(folder):,.0f}")
        commits = {synchronous: sqlite_commits_per_second(folder, synchronous)
                   for synchronous in ("FULL", "OFF")}
        for synchronous, rate in commits.items():
            report(f"bare SQLite one-row commits/s, synchronous={synchronous}", f"{rate:,.0f}")

        if args.count_syncs:
            home = folder / "syncs"
            home.mkdir()
            database_url = f"sqlite:///{home}/syncs.sqlite3"
            env, key = aggregator_env(home, database_url)
            with gunicorn("ldpsurvey.aggregator:create_app()", env, home, args.workers,
                          args.threads, syncs=home / "strace.txt") as server:
                survey_id = new_survey(server.url, key)
                time.sleep(2)  # start-up's own syncs (migrations) before the count is read
                wrk(f"{server.url}/api/surveys/{survey_id}/responses", args.seconds,
                    args.connections, body={"answers": ANSWERS}, idempotency_keys=True)
            stored = stored_responses(database_url)
            calls = sync_calls(home / "strace.txt")
            report("SQLite syncs per keyed single response (strace; start-up and releases "
                   "included)", f"{calls / stored:.2f} ({calls:,} for {stored:,})")

        with contextlib.ExitStack() as stack:
            backends = [("SQLite", f"sqlite:///{folder}/bench.sqlite3"),
                        ("PostgreSQL", stack.enter_context(postgres_schema(args.postgres)))]
            for name, database_url in backends:
                home = folder / name  # a key file and instance folder of its own per backend
                home.mkdir()
                env, key = aggregator_env(home, database_url)
                with gunicorn("ldpsurvey.aggregator:create_app()", env, home, args.workers,
                              args.threads) as server:
                    url = server.url
                    survey_id = new_survey(url, key)
                    report(f"single-response intake, {name}, responses/s (fastest run)",
                           rate_text(fastest(server, args.repeat,
                                             f"{url}/api/surveys/{survey_id}/responses",
                                             args.seconds, args.connections,
                                             body={"answers": ANSWERS}), noop))
                    keyed = fastest(server, args.repeat,
                                    f"{url}/api/surveys/{survey_id}/responses", args.seconds,
                                    args.connections, body={"answers": ANSWERS},
                                    idempotency_keys=True)
                    report(f"single-response intake with Idempotency-Keys, {name}, responses/s "
                           "(fastest run)",
                           rate_text(keyed, noop, f", {keyed[0] / commits['FULL']:.0%} of bare "
                                                  "durable commits"))
                    if name == "SQLite":
                        report("the same through a bare WSGI function (no Flask: the raw "
                               "bound; bare_intake.py)",
                               bare_intake(env, home, args, new_survey(url, key), noop))
                    batch_body = {"responses": [{"answers": ANSWERS}] * 5000}
                    batch = wrk(f"{url}/api/surveys/{survey_id}/responses/batch", args.seconds,
                                4, body=batch_body, headers={"Authorization": f"Bearer {key}"})
                    report(f"batch intake (5,000 per request), {name}, responses/s",
                           f"{batch * 5000:,.0f}")
                    fresh = new_survey(url, key)
                    call("POST", f"{url}/api/surveys/{fresh}/responses/batch", key,
                         {"responses": [{"answers": ANSWERS}] * 1000})
                    estimates = f"{url}/api/surveys/{fresh}/estimates"
                    released(estimates, key, 1000)
                    small = median_ms(estimates, key)
                    fills = (args.fill - 1000) // 5000
                    for _ in range(fills):
                        call("POST", f"{url}/api/surveys/{fresh}/responses/batch", key,
                             batch_body)
                    n = released(estimates, key, 1000 + 5000 * fills)
                    large = median_ms(estimates, key)
                    report(f"estimates latency, {name}, median ms at 10^3 / {n:,}",
                           f"{small:.2f} / {large:.2f} ({large / small:.2f}x)")


if __name__ == "__main__":
    main()
