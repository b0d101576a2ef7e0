"""`ldp-survey mock` at 10^5, 10^6 and 10^7 respondents, side by side in one run with the raw
bound of the same batch intake (the same embedded aggregator, no simulation: one encoded batch
posted again and again, each under a new Idempotency-Key, so each is stored and released) and
with the previous pipeline at the sizes it can do.

    pip install -e '.[server,sim]'
    python bench/mock.py [--sizes 100000 1000000 10000000] [--previous-sizes 100000 1000000]
                         [--previous SRC]   # SRC: `git archive d496110` unpacked (before issue 27.4)

Each mock runs as its own process (`python -m ldpsurvey.cli mock --respondents N --seed 17
--json`); peak RSS is the largest sum of VmRSS over the mock and every process it started
(gunicorn's master and workers), sampled every 0.2 s. The previous pipeline runs from SRC with
this venv's packages. Wall time includes starting the aggregator and closing the survey.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import numpy as np

from ldpsurvey.cli import batches
from ldpsurvey.cli.embedded import embedded_aggregator, senders
from ldpsurvey.cli.mock import EXAMPLES, read_truth, simulated_rows
from ldpsurvey.shared import parse_definition, read_definition
from ldpsurvey.shared.http_contract import MAX_BATCH_RESPONSES as BATCH

SEED = 17


def tree_rss(pid: int) -> int:
    """Bytes resident in `pid` and all its descendants (/proc)."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        total += next((int(line.split()[1]) * 1024 for line in status.splitlines()
                       if line.startswith("VmRSS:")), 0)
        stack.extend(int(child) for child in children)
    return total


def measured(command: list[str], env: dict) -> tuple[float, int, dict]:
    """(wall seconds, peak RSS of the process tree, its --json output)."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.DEVNULL)
        peak = 0
        while process.poll() is None:
            peak = max(peak, tree_rss(process.pid))
            time.sleep(0.2)
        wall = time.monotonic() - start
        out.seek(0)
        text = out.read()
    if process.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode})")
    return wall, peak, json.loads(text)


def mock(respondents: int, source: Path | None) -> tuple[float, int, dict]:
    command = [sys.executable, "-m", "ldpsurvey.cli", "mock", "--respondents", str(respondents),
               "--seed", str(SEED), "--json"]
    if source is None:
        return measured(command, dict(os.environ))
    with tempfile.TemporaryDirectory(prefix="ldp-previous-") as folder:
        package = Path(folder) / "ldpsurvey"  # the previous code, with this venv's packages
        package.mkdir()
        for part in ("shared", "client", "aggregator", "cli", "analysis"):
            (package / part).symlink_to(source.resolve() / part)
        return measured(command, {**os.environ, "PYTHONPATH": folder})


def raw_intake(respondents: int) -> tuple[float, int]:
    """The same embedded aggregator and sending (as many in flight as the mock), one batch of
    BATCH simulated responses (the mock's batch size there) encoded once and posted
    respondents / BATCH times, then the close: (seconds from the first post to the close's
    answer, responses stored)."""
    with resources.as_file(EXAMPLES / "health.toml") as survey_file, \
            resources.as_file(EXAMPLES / "health_truth.toml") as truth_file, \
            embedded_aggregator() as api:
        definition = read_definition(survey_file)
        survey_id = api.post("/api/surveys", json_body=definition).json()["survey_id"]
        survey = parse_definition(definition)
        rows = next(simulated_rows(read_truth(truth_file, survey), survey, BATCH,
                                   np.random.default_rng(SEED)))
        count = respondents // BATCH
        start = time.monotonic()
        batches.send(api, f"/api/surveys/{survey_id}/responses/batch",
                     (rows for _ in range(count)), lambda n: None, senders())
        api.post(f"/api/surveys/{survey_id}/close")
        return time.monotonic() - start, count * BATCH


def coverage(document: dict) -> str:
    rows = document["results"]
    return f"{sum(bool(r['covered']) for r in rows)} of {len(rows)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**5, 10**6, 10**7])
    parser.add_argument("--previous", type=Path, help="source tree of the previous pipeline")
    parser.add_argument("--previous-sizes", type=int, nargs="+", default=[10**5, 10**6])
    parser.add_argument("--raw", type=int, default=10**6, help="responses for the raw bound")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}, cores: {os.cpu_count()}", flush=True)
    print("| pipeline | respondents | wall s | responses/s | peak RSS MB | intervals covering |")
    print("|---|---|---|---|---|---|")
    runs = [("streamed (this)", n, None) for n in args.sizes]
    if args.previous:
        runs += [("previous (all drawn first)", n, args.previous) for n in args.previous_sizes]
    for name, n, source in runs:
        wall, peak, document = mock(n, source)
        print(f"| {name} | {n:,} | {wall:.1f} | {n / wall:,.0f} | {peak / 2**20:,.0f} | "
              f"{coverage(document)} |", flush=True)
    seconds, stored = raw_intake(args.raw)
    print(f"| raw batch intake, no simulation | {stored:,} | {seconds:.1f} | "
          f"{stored / seconds:,.0f} | | |", flush=True)
    print(f"load average at end: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
