"""Keyed single responses under gunicorn (SQLite) in interleaved rounds, beside the do-nothing
endpoint and, given `--previous SRC`, the code of SRC (an earlier commit's `git archive`).

    apt-get install wrk
    pip install -e '.[server]'
    git archive <commit> | (mkdir -p /tmp/previous && tar -x -C /tmp/previous)
    python bench/rounds.py [--previous /tmp/previous] [--rounds 4] [--unsynced]

A round runs the do-nothing endpoint, then this code's aggregator, then the previous code's,
each on a server of its own, one after the other. On a machine whose speed drifts (seen here:
the do-nothing endpoint's rate doubling within an hour), a comparison within a round holds
where one between runs of bench/ingest.py minutes apart does not. Each figure is the fastest
of `--repeat` wrk runs, with the server's CPU per request in that run (ingest.fastest). The
last line sums each code's rounds.

With `--unsynced`, each round also runs this code with the group commit's sync of the log
removed (UNSYNCED_APP): an experiment, never a setting, since what it acknowledges may be
lost. It bounds what syncing costs: what keyed responses would reach if the disk's flush
were free.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from ingest import (
    ANSWERS,
    NOOP_APP,
    aggregator_env,
    code_environment,
    fastest,
    gunicorn,
    new_survey,
)

APP = "ldpsurvey.aggregator:create_app()"
UNSYNCED_APP = '''"""The aggregator without the group commit's sync of the log (an experiment)."""
from ldpsurvey.aggregator import create_app
from ldpsurvey.aggregator.store import connection

connection.sync_log = lambda fd: None  # GroupCommit._sync's call: commits stay in the page cache
app = create_app()
'''


def keyed_rate(home: Path, source: Path | None, args: argparse.Namespace,
               app: str = APP) -> tuple:
    """`fastest` for keyed single responses to a fresh aggregator running the code of
    `source` (None: this code) as the WSGI app `app` (gunicorn's form)."""
    home.mkdir()
    url = f"sqlite:///{home}/bench.sqlite3"
    if source is None:
        env, key = aggregator_env(home, url)
    else:  # the database made by the code that serves it (its schema may be older)
        code_env = code_environment(source, home.parent)
        made = subprocess.run(
            [sys.executable, "-c", "import json, sys; from pathlib import Path; "
             "sys.path.insert(0, sys.argv[1]); from ingest import aggregator_env; "
             "print(json.dumps(aggregator_env(Path(sys.argv[2]), sys.argv[3])))",
             str(Path(__file__).parent), str(home), url],
            env=code_env, capture_output=True, text=True, check=True)
        env, key = json.loads(made.stdout.splitlines()[-1])
        env["PYTHONPATH"] = code_env["PYTHONPATH"]
    if app != APP:  # its module, in a folder of its own (--previous links its package beside)
        env["PYTHONPATH"] = str(home.parent / "unsynced")
    with gunicorn(app, env, home, args.workers, args.threads) as server:
        survey_id = new_survey(server.url, key)
        return fastest(server, args.repeat, f"{server.url}/api/surveys/{survey_id}/responses",
                       args.seconds, args.connections, body={"answers": ANSWERS},
                       idempotency_keys=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--previous", type=Path, help="source tree of the code to compare")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2, help="wrk runs per figure")
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=5)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--unsynced", action="store_true",
                        help="also this code without the group commit's sync (an experiment)")
    args = parser.parse_args()
    codes = [("this", None, APP)] + [("previous", args.previous, APP)] * (args.previous is not None)
    codes += [("unsynced", None, "unsynced_app:app")] * args.unsynced
    sums = dict.fromkeys([name for name, *_ in codes], 0.0)
    print(f"gunicorn: {args.workers} workers x {args.threads} threads; wrk: 2 threads, "
          f"{args.connections} connections, fastest of {args.repeat} runs of {args.seconds} s")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "noop_app.py").write_text(NOOP_APP)
        (folder / "unsynced").mkdir()
        (folder / "unsynced" / "unsynced_app.py").write_text(UNSYNCED_APP)
        for number in range(args.rounds):
            with gunicorn("noop_app:app", {"PYTHONPATH": tmp}, folder, args.workers,
                          args.threads) as server:
                noop, noop_ms, _ = fastest(server, args.repeat, server.url + "/", args.seconds,
                                           args.connections, body={"answers": ANSWERS})
            line = f"round {number + 1}: do-nothing {noop:,.0f}/s ({noop_ms:.2f} ms)"
            for name, source, app in codes:
                rate, ms, _ = keyed_rate(folder / f"{name}-{number}", source, args, app)
                sums[name] += rate
                line += f" | {name}: keyed {rate:,.0f}/s ({rate / noop:.0%}, {ms:.2f} ms)"
            print(line, flush=True)
    print("sum of rounds: " + ", ".join(f"{name} {rate:,.0f}" for name, rate in sums.items()))


if __name__ == "__main__":
    main()
