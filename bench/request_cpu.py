"""What one request costs the server's CPU, outside any load generator's noise: the do-nothing
Flask endpoint beside the aggregator's health check and its single-response intake, called
through WSGI in one thread, with this code and, given `--previous SRC`, with the code of SRC,
side by side in one run.

    apt-get install valgrind
    pip install -e '.[server]'
    python bench/request_cpu.py [--previous /tmp/previous]

Two figures per case, each from processes of their own:
- instructions per request: valgrind's callgrind counts the instructions run by the process in
  user space (the same count run after run, whatever else the machine does); the count after
  `--few` requests is taken from the count after `--many`, divided by the difference, so start-up
  and imports cancel out;
- CPU microseconds per request (user and system, getrusage) over `--timed` requests, without
  valgrind: this one includes the kernel's work, the durable commit's fdatasync among it (its
  CPU, not the wait for the disk; the database is in a temporary folder, so set TMPDIR to a
  disk's folder where /tmp is a tmpfs). A single run: it moves by about 10 % between runs.

The aggregator runs with production settings on SQLite (WAL, synchronous=FULL), rate limits off
as in bench/ingest.py, and once more with its intake service called from a bare WSGI function
(bare_intake.py: what the same submission costs without Flask); each submission carries an
Idempotency-Key of its own, as the Python client and the web form send, and is a transaction of
its own (one thread: no group commit to share it). A browser's submission also names its page's
Origin: the aggregator's own (browser), or one of the survey's form_origins, where a copy of
the form is hosted (hosted: this code only, as earlier code has no form_origins). The
do-nothing endpoint is bench/ingest.py's. """

import argparse
import io
import json
import re
import resource
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bare_intake import bare
from ingest import ANSWERS, NOOP_APP, code_environment
from werkzeug.test import EnvironBuilder

CASES = {
    "noop": "do-nothing Flask endpoint (POST)",
    "health": "aggregator: GET /healthz (one query)",
    "keyed": "aggregator: a response with an Idempotency-Key",
    "unkeyed": "aggregator: a response without a key",
    "browser": "aggregator: keyed, Origin its own (the web form)",
    "hosted": "aggregator: keyed, Origin a form_origins' (a copy)",
    "bare": "intake from a bare WSGI function, keyed (no Flask)",
}
BODY = json.dumps({"answers": ANSWERS}).encode()
HOSTED_AT = "https://ethics.example.edu"
ORIGINS = {"browser": "http://127.0.0.1", "hosted": HOSTED_AT}  # the survey's own: PUBLIC_URL


def wsgi_caller(case: str, folder: Path):
    """A function making one request of `case`, straight through the WSGI app."""
    if case == "noop":
        namespace: dict = {"__name__": "noop_app"}
        exec(NOOP_APP, namespace)  # nosec B102: the bench's own constant
        app, path, method, keyed = namespace["app"], "/", "POST", False
    else:
        from ldpsurvey.aggregator import create_api_key, create_app
        from ldpsurvey.aggregator.config.signing import write_key_file
        from ldpsurvey.shared import read_definition

        write_key_file(folder / "key.pem")
        app = create_app({"DEPLOYMENT": "production", "KEY_FILE": str(folder / "key.pem"),
                          "SECRET_KEY": secrets.token_hex(32),
                          "STORAGE_KEY": secrets.token_hex(32),
                          "DATABASE_URL": f"sqlite:///{folder}/bench.sqlite3",
                          "PUBLIC_URL": "http://127.0.0.1", "RATE_LIMITS_ENABLED": False,
                          "RELEASE_EVERY": 3600}, instance_path=folder)
        definition = read_definition(Path(__file__).parents[1] / "shared/examples/health.toml")
        if case == "hosted":
            definition["form_origins"] = [HOSTED_AT]
        survey_id = app.test_client().post(
            "/api/surveys", json=definition,
            headers={"Authorization": f"Bearer {create_api_key(app).key}"}).json["survey_id"]
        path, method, keyed = {"health": ("/healthz", "GET", False),
                               "keyed": (f"/api/surveys/{survey_id}/responses", "POST", True),
                               "unkeyed": (f"/api/surveys/{survey_id}/responses", "POST", False),
                               "bare": (f"/api/surveys/{survey_id}/responses", "POST", True),
                               "browser": (f"/api/surveys/{survey_id}/responses", "POST", True),
                               "hosted": (f"/api/surveys/{survey_id}/responses", "POST", True),
                               }[case]
        if case == "bare":
            app = bare(app)
    expected = "201" if method == "POST" and case != "noop" else "200"

    template = EnvironBuilder(path=path, method=method, data=BODY, base_url="http://127.0.0.1:8000",
                              content_type="application/json").get_environ()
    if case in ORIGINS:
        template["HTTP_ORIGIN"] = ORIGINS[case]

    def one() -> None:
        environ = {**template, "wsgi.input": io.BytesIO(BODY)}
        if keyed:
            environ["HTTP_IDEMPOTENCY_KEY"] = secrets.token_hex(16)
        status = []
        body = app(environ, lambda line, headers, exc_info=None: status.append(line))
        b"".join(body)
        getattr(body, "close", lambda: None)()
        if not status[0].startswith(expected):
            raise RuntimeError(f"{case}: {status[0]}")

    return one


def run_case(case: str, requests: int, warm: int) -> dict:
    """In this process: `warm` requests, then `requests` more, timed by getrusage."""
    with tempfile.TemporaryDirectory() as folder:
        one = wsgi_caller(case, Path(folder))
        for _ in range(warm):
            one()
        before = resource.getrusage(resource.RUSAGE_SELF)
        for _ in range(requests):
            one()
        after = resource.getrusage(resource.RUSAGE_SELF)
    return {"user_us": (after.ru_utime - before.ru_utime) / requests * 1e6,
            "system_us": (after.ru_stime - before.ru_stime) / requests * 1e6}


def child(case: str, requests: int, warm: int, source: Path | None, folder: Path,
          valgrind: bool) -> tuple[dict, str]:
    """run_case in a fresh process (under callgrind if `valgrind`), with this code or the
    code of `source`; its result and its stderr."""
    env = code_environment(source, folder)
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import request_cpu; "
            "print(json.dumps(request_cpu.run_case(sys.argv[2], int(sys.argv[3]), "
            "int(sys.argv[4]))))")
    command = [sys.executable, "-c", code, str(Path(__file__).parent), case, str(requests),
               str(warm)]
    if valgrind:
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={folder}/cg.out",
                   *command]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def instructions(case: str, few: int, many: int, source: Path | None, folder: Path) -> float:
    """callgrind's count of instructions per request: (count at many - count at few) / (many -
    few), in processes that also made the same warm-up requests."""
    counts = []
    for requests in (few, many):
        _, stderr = child(case, requests, 20, source, folder, valgrind=True)
        counts.append(int(re.search(r"Collected : (\d+)", stderr).group(1)))
    return (counts[1] - counts[0]) / (many - few)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--previous", type=Path, help="source tree of the code to compare")
    parser.add_argument("--few", type=int, default=50)
    parser.add_argument("--many", type=int, default=250)
    parser.add_argument("--timed", type=int, default=5000)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("valgrind is needed (apt-get install valgrind)")
    codes = [("this", None)] + [("previous", args.previous)] * (args.previous is not None)
    print(f"{'case':<48} {'code':<9} {'instructions':>13} {'x noop':>7} {'user us':>8} "
          f"{'system us':>10}")
    noop = None
    for case in args.cases.split(","):
        # Flask's alone, and what earlier code cannot run
        for name, source in codes[:1] if case in ("noop", "hosted") else codes:
            with tempfile.TemporaryDirectory() as folder:
                count = instructions(case, args.few, args.many, source, Path(folder))
                cpu, _ = child(case, args.timed, 300, source, Path(folder), valgrind=False)
            noop = count if case == "noop" else noop
            ratio = f"{count / noop:>7.2f}" if noop else f"{'':>7}"
            print(f"{CASES[case]:<48} {name:<9} {count:>13,.0f} {ratio} "
                  f"{cpu['user_us']:>8.0f} {cpu['system_us']:>10.0f}", flush=True)


if __name__ == "__main__":
    main()
