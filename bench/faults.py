"""What the database's faults do to the service (issue 38.2 and 38.3), with this code and, given
`--previous SRC`, with the code of SRC, side by side: gunicorn replicas with the shipped
config, and the faults made as they happen.

    mkdir /tmp/previous && git archive 76f3f78 | tar -x -C /tmp/previous   # before issue 38.2-3
    python bench/faults.py [--previous /tmp/previous] [--only frozen outage restart idle full
                                                               refused]

- frozen: a session holding a survey's lock as a release does, in a process of its own,
  paused with SIGSTOP; for 45 s, four clients submit to a replica (client timeout 60 s).
- outage: a PostgreSQL cluster of its own stopped (pg_ctl stop -m fast) for 20 s under four
  clients' submissions; /healthz (and /readyz) asked once the server is down.
- restart: the server restarted at once after a busy spell: answers in the next 5 s.
- idle: the same restart with no requests: how many scheduled releases (every second) fail.
- full: SQLite on a tmpfs of 8 MiB filled to its last byte; 20 submissions; space freed.
- refused: gunicorn (2 workers) with a database it cannot reach: lines printed.
Needs root (initdb as the postgres user, mount -t tmpfs) and PostgreSQL's server programs.
"""

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

from ingest import ROOT, aggregator_env, code_environment, free_port

sys.path.insert(0, str(ROOT / "tests"))
from test_database_faults import HOLDER, OwnPostgres, fill

ANSWERS = {"answers": {"q": 1}}
SURVEY = {"title": "Faults", "release_batch": 1,
          "questions": [{"id": "q", "text": "?", "type": "yes_no", "alpha": 0.5}]}
CLIENTS = 4


def request(url: str, method: str = "GET", body=None, key: str | None = None,
            timeout: float = 120) -> tuple[int | str, float]:
    """(status, or "timeout", seconds taken)."""
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    sent = urllib.request.Request(url, method=method, headers=headers,
                                  data=None if body is None else json.dumps(body).encode())
    start = time.monotonic()
    try:
        with urllib.request.urlopen(sent, timeout=timeout) as response:
            response.read()
            status: int | str = response.status
    except urllib.error.HTTPError as error:
        status = error.code
    except OSError:
        status = "timeout"
    return status, time.monotonic() - start


@contextlib.contextmanager
def replica(env: dict, folder: Path, log: Path, workers: int = 2):
    """gunicorn with the shipped config on a free port, its output in `log`; its URL."""
    port = free_port()
    full = {**env, "LDP_SURVEY_BIND": f"127.0.0.1:{port}", "LDP_SURVEY_WORKERS": str(workers),
            "LDP_SURVEY_THREADS": "4"}
    command = [shutil.which("gunicorn", path=os.path.dirname(sys.executable)), "-c",
               str(ROOT / "deploy" / "gunicorn.conf.py")]
    with open(log, "ab") as out:
        proc = subprocess.Popen(command, env=full, cwd=folder, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        while request(url + "/api/key", timeout=2)[0] != 200:
            time.sleep(0.1)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def publish(url: str, key: str) -> str:
    sent = urllib.request.Request(url + "/api/surveys", method="POST",
                                  data=json.dumps(SURVEY).encode(),
                                  headers={"Content-Type": "application/json",
                                           "Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(sent, timeout=60) as response:
        return json.loads(response.read())["survey_id"]


def submitting(url: str, seconds: float, timeout: float) -> list[tuple[float, float, object]]:
    """CLIENTS threads submitting back to back for `seconds`: (start, end, status) each, on
    time.monotonic()."""
    done: list[tuple[float, float, object]] = []
    stop = time.monotonic() + seconds

    def client():
        while time.monotonic() < stop:
            start = time.monotonic()
            status, _ = request(url, "POST", ANSWERS, timeout=timeout)
            done.append((start, time.monotonic(), status))

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done


def frozen(env: dict, folder: Path, cluster: OwnPostgres, key: str) -> dict:
    with replica(env, folder, folder / "frozen.log") as url:
        survey_id = publish(url, key)
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, cluster.url,
                                   env["LDP_SURVEY_STORAGE_KEY"], str(folder / "holder"),
                                   survey_id], env=env, stdout=subprocess.PIPE, text=True,
                                  start_new_session=True)
        try:
            assert holder.stdout.readline() == "locked\n"
            os.killpg(holder.pid, signal.SIGSTOP)
            paused = time.monotonic()
            health = request(url + "/healthz")
            done = submitting(f"{url}/api/surveys/{survey_id}/responses", 45, 60)
        finally:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait()
    accepted = sorted(end - paused for _, end, status in done if status == 201)
    return {"accepted in 45 s": len([t for t in accepted if t <= 45]),
            "first 201 after the pause, s": round(accepted[0], 1) if accepted else None,
            "answers": dict(Counter(str(status) for *_, status in done)),
            "/healthz": f"{health[0]} in {health[1]:.1f} s"}


def restart(env: dict, folder: Path, cluster: OwnPostgres, key: str, idle: bool) -> dict:
    """The server restarted (stopped and started again at once) after a busy spell left the
    pool many connections: 500s among the next 5 s of submissions, or, on an idle server,
    scheduled releases (every second) failed in the 30 s after."""
    log = folder / ("idle.log" if idle else "restart.log")
    with replica(env, folder, log) as url:
        target = f"{url}/api/surveys/{publish(url, key)}/responses"
        submitting(target, 3, 60)  # the pool holds several connections
        offset = log.stat().st_size
        cluster.stop()
        cluster.start()
        done = submitting(target, 5, 60) if not idle else time.sleep(30) or []
    failed = [line for line in log.read_bytes()[offset:].decode().splitlines()
              if "scheduled release failed" in line]
    if idle:
        return {"scheduled releases failed in 30 s": len(failed),
                "why": dict(Counter(line.partition("(")[2].partition(")")[0]
                                    for line in failed))}
    return {"answers in 5 s": dict(Counter(str(status) for *_, status in done))}


def outage(env: dict, folder: Path, cluster: OwnPostgres, key: str) -> dict:
    log = folder / "outage.log"
    with replica(env, folder, log) as url:
        survey_id = publish(url, key)
        target = f"{url}/api/surveys/{survey_id}/responses"
        submitting(target, 3, 60)  # the pool holds several connections
        results: dict = {}

        def during():
            time.sleep(2)
            cluster.stop()
            results["down"] = time.monotonic()
            for path in ("/healthz", "/readyz"):
                status, took = request(url + path)
                results[path] = f"{status} in {took:.1f} s"
            time.sleep(20)
            offset = log.stat().st_size
            cluster.start()
            results["back"], results["offset"] = time.monotonic(), offset

        fault = threading.Thread(target=during)
        fault.start()
        done = submitting(target, 45, 120)
        fault.join()
    down, back = results["down"], results["back"]
    outage_answers = [(end - start, status) for start, end, status in done
                      if down <= start < back]
    return {"answers to submissions sent while down": dict(Counter(
                str(status) for _, status in outage_answers)),
            "longest wait while down, s": round(max(t for t, _ in outage_answers), 1),
            "/healthz": results["/healthz"], "/readyz": results["/readyz"],
            "first 201 after the return, s": round(min(
                end - back for start, end, status in done if status == 201 and end > back), 1),
            "500s after the return": sum(status == 500 for start, _, status in done
                                         if start >= back)}


def full(env: dict, folder: Path) -> dict:
    disk = folder / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(disk)],
                   check=True)
    try:
        instance = folder / "sqlite"
        instance.mkdir()
        own, key = aggregator_env(instance, f"sqlite:///{disk / 'db.sqlite3'}")
        with replica({**env, **own}, folder, folder / "full.log") as url:
            survey_id = publish(url, key)
            fill(disk / "filler")
            answers = [request(f"{url}/api/surveys/{survey_id}/responses", "POST", ANSWERS,
                               timeout=60) for _ in range(20)]
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)
    return {"answers while full": dict(Counter(str(s) for s, _ in answers)),
            "longest, s": round(max(t for _, t in answers), 1)}


def refused(env: dict, folder: Path) -> dict:
    bad = {**env, "LDP_SURVEY_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/none",
           "LDP_SURVEY_BIND": f"127.0.0.1:{free_port()}", "LDP_SURVEY_WORKERS": "2"}
    result = subprocess.run([shutil.which("gunicorn", path=os.path.dirname(sys.executable)),
                             "-c", str(ROOT / "deploy" / "gunicorn.conf.py")], env=bad,
                            cwd=folder, capture_output=True, text=True, timeout=300)
    lines = (result.stdout + result.stderr).splitlines()
    return {"lines printed (2 workers)": len(lines),
            "of them not gunicorn's own": sum(not line.startswith("[") for line in lines),
            "with a traceback": "Traceback" in result.stdout + result.stderr}


def run(source: Path | None, only: list[str]) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="ldp-faults-"))
    cluster = OwnPostgres()
    try:
        env = code_environment(source, folder)
        own, key = aggregator_env(folder, cluster.url)
        env.update(own)
        found = {}
        for name in only:
            print(f"{source or 'this'}: {name}", file=sys.stderr, flush=True)
            if name == "frozen":
                found[name] = frozen(env, folder, cluster, key)
            elif name == "outage":
                found[name] = outage(env, folder, cluster, key)
            elif name in ("restart", "idle"):
                found[name] = restart(env, folder, cluster, key, idle=name == "idle")
            elif name == "full":
                found[name] = full(env, folder)
            else:
                found[name] = refused(env, folder)
        return found
    finally:
        cluster.remove()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--previous", type=Path, help="source tree of the code to compare")
    parser.add_argument("--only", nargs="+", default=["frozen", "outage", "restart", "idle",
                                                      "full", "refused"])
    args = parser.parse_args()
    codes = [("this", None)] + [("previous", args.previous)] * (args.previous is not None)
    for name, source in codes:
        for fault, figures in run(source, args.only).items():
            print(f"| {name} | {fault} | " + "; ".join(f"{k}: {v}" for k, v in figures.items())
                  + " |", flush=True)


if __name__ == "__main__":
    main()
