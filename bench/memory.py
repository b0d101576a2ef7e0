"""Server memory under the worst requests a caller may send, side by side in one run: RSS at
idle, then under 8 concurrent worst-case requests (the largest allowed cross-tab, the biggest
estimates document, a streamed export), beside the bound on what those requests may hold.

    pip install -e '.[server]'
    python bench/memory.py [--rounds 3] [--responses 20000] [--arenas 2]

The aggregator runs under gunicorn (deploy/gunicorn.conf.py, SQLite) with one worker of 8
threads, so all 8 requests share one process; RSS is the sum over gunicorn's master and worker
(/proc/PID/status VmRSS), sampled every 20 ms while 8 requests of one kind run at once. The
survey has MAX_QUESTIONS questions: all but one with MAX_OPTIONS options and one with
MAX_CELLS / MAX_OPTIONS, declared as a cross-tab of MAX_CELLS cells with the first. Rate
limits are set out of reach (one client sends it all).

    python bench/memory.py --analyses [--previous SRC] [--timeout 120]

Analysis requests instead (issue 38): the issue's reproduction, a public-results survey of 10
yes/no questions with 3,000 responses behind gunicorn with one worker of 4 threads (as `serve
--public`), a fresh server per step: one `regress=a~b*c*d*e*f*g` anonymous and with a key, the
eight-way `a~b*c*d*e*f*g*h*i` with a key, then five six-way ones at once while /healthz and a
submission are timed. Per request its status, seconds and the peak RSS of the whole process
tree (analysis processes too); a request still running after --timeout seconds is given up
(and its server stopped). --previous SRC: the code of SRC, an earlier commit's `git archive`
(git archive 76f3f78 | tar -x -C /tmp/previous: before the analyses were bounded).
"""

import argparse
import contextlib
import itertools
import json
import secrets
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from ingest import aggregator_env, call, code_environment, gunicorn, released

from ldpsurvey.aggregator.store.responses import ANSWERS_CHUNK
from ldpsurvey.aggregator.web.limits import SETTINGS
from ldpsurvey.shared.stats.crosstab import MAX_CELLS, NUMBER_BYTES, reply_bound
from ldpsurvey.shared.survey.manifest import MAX_OPTIONS, MAX_QUESTIONS

OPTION_BYTES = 1024  # one option of the estimates document, JSON, at most (17 keys)
ANSWER_BYTES = 48  # one answer of a stored response, JSON: a 40-character id, quotes, index
MIB = 2**20


def definition() -> dict:
    narrow = MAX_CELLS // MAX_OPTIONS
    questions = [{"id": f"q{i:02d}", "text": f"Question {i}?", "type": "choice",
                  "options": [f"option {j}" for j in range(MAX_OPTIONS)], "epsilon": 1.0}
                 for i in range(MAX_QUESTIONS - 1)]
    questions.append({"id": "narrow", "text": "Narrow?", "type": "choice",
                      "options": [f"option {j}" for j in range(narrow)], "epsilon": 1.0})
    return {"title": "Worst case", "release_batch": 1, "questions": questions,
            "crosstabs": [["q00", "narrow"]]}


def estimates_bound() -> int:
    """Bytes of the biggest estimates document at most: per question its k x k covariance
    and k options, and 64 KiB for the rest."""
    return MAX_QUESTIONS * (MAX_OPTIONS**2 * NUMBER_BYTES + MAX_OPTIONS * OPTION_BYTES) + 2**16


def stream_bound() -> int:
    """Bytes of released responses one streaming read holds: ANSWERS_CHUNK rows at once."""
    return ANSWERS_CHUNK * MAX_QUESTIONS * ANSWER_BYTES


def header_bound() -> int:
    """Bytes of an export's header at most: per question its k x k report matrix."""
    return MAX_QUESTIONS * MAX_OPTIONS**2 * NUMBER_BYTES + 2**16


def rss(pid: int) -> int:
    """Resident bytes of gunicorn's master and its descendants (workers, analysis processes);
    0 for a process that has just ended."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return 0
    own = int(next(line.split()[1] for line in status.splitlines()
                   if line.startswith("VmRSS:"))) * 1024
    return own + sum(rss(int(child)) for child in children)


def fetch(url: str, key: str) -> tuple[int, int]:
    """(status, body bytes) of a GET, read in 64 KiB pieces and dropped."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            size = 0
            while piece := response.read(65536):
                size += len(piece)
            return response.status, size
    except urllib.error.HTTPError as error:
        return error.code, len(error.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--responses", type=int, default=20_000)
    parser.add_argument("--arenas", default="2", help="MALLOC_ARENA_MAX, as deploy/ sets it "
                        "(0: glibc's default, 8 per core)")
    parser.add_argument("--analyses", action="store_true", help="analysis requests instead")
    parser.add_argument("--previous", type=Path, help="with --analyses: an earlier tree's code")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="with --analyses: seconds to wait for one request")
    args = parser.parse_args()
    if args.analyses:
        return analyses(args)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env, key = aggregator_env(folder, f"sqlite:///{folder}/bench.sqlite3")
        env |= {f"LDP_SURVEY_{name}": "1000000 per minute" for name in SETTINGS.values()}
        env["LDP_SURVEY_PROXY_HOPS"] = "0"
        if args.arenas != "0":
            env["MALLOC_ARENA_MAX"] = args.arenas
        with gunicorn("ldpsurvey.aggregator:create_app()", env, folder, 1, 8) as server:
            run(server, key, args)


def run(server, key: str, args) -> None:
    url = server.url
    started = rss(server.pid)
    survey = definition()
    survey_id = call("POST", f"{url}/api/surveys", key, survey)["survey_id"]
    wide = {"crosstabs": [["q00", "q01"]], **{k: v for k, v in survey.items() if k != "crosstabs"}}
    status, size = fetch_post(url, key, wide)
    print(f"a {MAX_OPTIONS} x {MAX_OPTIONS} cross-tab declared at publish: {status}, "
          f"{size} bytes")
    ids = [q["id"] for q in survey["questions"]]
    sizes = {q["id"]: len(q["options"]) for q in survey["questions"]}
    for start in range(0, args.responses, 2000):
        batch = [{"answers": {qid: secrets.randbelow(sizes[qid]) for qid in ids}}
                 for _ in range(min(2000, args.responses - start))]
        call("POST", f"{url}/api/surveys/{survey_id}/responses/batch", key, {"responses": batch})
    base = f"{url}/api/surveys/{survey_id}"
    released(f"{base}/estimates", key, args.responses)  # at the server's next release instant
    levels = (f"{0.5 + i / 2e6:.7f}" for i in itertools.count(1))  # never the same: no cache
    work = {
        "cross-tab (declared, 256 cells)": lambda: fetch(f"{base}/crosstab?rows=q00&cols=narrow", key),
        "cross-tab (tallied, 256 cells)": lambda: fetch(f"{base}/crosstab?rows=narrow&cols=q01", key),
        "cross-tab 64 x 64 (refused)": lambda: fetch(f"{base}/crosstab?rows=q00&cols=q01", key),
        "estimates (clopper-pearson, simultaneous)": lambda: fetch(
            f"{base}/estimates?method=clopper-pearson&simultaneous=true&confidence={next(levels)}",
            key),
        "export.csv (streamed)": lambda: fetch(f"{base}/export.csv", key),
    }
    largest = {name: 0 for name in work}
    for name, request in work.items():
        status, size = request()
        largest[name] = size
        print(f"{name:<44} {status}  {size / MIB:8.2f} MiB reply")
    time.sleep(1.0)
    idle = rss(server.pid)
    print(f"\n{args.responses:,} responses of {MAX_QUESTIONS} answers; gunicorn 1 worker x 8 "
          f"threads, MALLOC_ARENA_MAX={args.arenas if args.arenas != '0' else 'unset'}; "
          f"RSS at start {started / MIB:.1f} MiB, idle after one request of each kind "
          f"{idle / MIB:.1f} MiB\n")
    cross, estimates = reply_bound(MAX_CELLS), estimates_bound()
    stream = stream_bound()
    bounds = {"cross-tab (declared, 256 cells)": cross, "cross-tab (tallied, 256 cells)":
              cross + stream, "cross-tab 64 x 64 (refused)": 1024,
              "estimates (clopper-pearson, simultaneous)": estimates,
              "export.csv (streamed)": header_bound() + stream}
    rounds = "".join(f"{f'round {r}':>9}" for r in range(1, args.rounds + 1))
    print(f"{'8 at once: RSS MiB':<42}{'before':>8}{rounds}{'8 x bound':>11}")
    for name, request in work.items():
        before = rss(server.pid)
        peaks = [load(server.pid, request) / MIB for _ in range(args.rounds)]
        print(f"{name:<42}{before / MIB:>8.1f}" + "".join(f"{peak:>9.1f}" for peak in peaks)
              + f"{8 * bounds[name] / MIB:>11.1f}")
    time.sleep(1.0)
    print(f"\nidle again: {rss(server.pid) / MIB:.1f} MiB")
    print(f"bounds per request: a cross-tab's reply, reply_bound({MAX_CELLS}) = {cross / MIB:.2f} "
          f"MiB (largest seen {largest['cross-tab (declared, 256 cells)'] / MIB:.2f}); the "
          f"estimates document {estimates / MIB:.2f} MiB (seen "
          f"{largest['estimates (clopper-pearson, simultaneous)'] / MIB:.2f}); an export's "
          f"header {header_bound() / MIB:.2f} MiB; a streaming read (export, tallied cross-tab) "
          f"{ANSWERS_CHUNK:,} rows, {stream / MIB:.2f} MiB. Before this change one "
          f"{MAX_OPTIONS} x {MAX_OPTIONS} cross-tab reply alone was 367 MiB.")


def fetch_post(url: str, key: str, body: dict) -> tuple[int, int]:
    try:
        return 201, len(str(call("POST", f"{url}/api/surveys", key, body)))
    except urllib.error.HTTPError as error:
        return error.code, len(error.read())


def load(pid: int, request) -> int:
    """The peak RSS while 8 threads send `request` at once (released together)."""
    gate = threading.Barrier(8)

    def worker() -> None:
        gate.wait()
        request()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    peak = 0
    while any(thread.is_alive() for thread in threads):
        peak = max(peak, rss(pid))
        time.sleep(0.02)
    return peak


YES_NO = "abcdefghij"
PROBES = 5
SIX_WAY = "a~b*c*d*e*f*g"
EIGHT_WAY = "a~b*c*d*e*f*g*h*i"


def analyses(args) -> None:
    """The issue's reproduction (module docstring), one fresh server per step."""
    print(f"3,000 responses of 10 yes/no questions, public results; gunicorn 1 worker x 4 "
          f"threads; {'code of ' + str(args.previous) if args.previous else 'this code'}\n")
    print(f"{'request':<46}{'status':>8}{'seconds':>9}{'peak RSS MiB':>14}  error")
    for name, formula, keyed in (("anonymous " + SIX_WAY, SIX_WAY, False),
                                 ("keyed " + SIX_WAY, SIX_WAY, True),
                                 ("keyed " + EIGHT_WAY, EIGHT_WAY, True)):
        with analysis_server(args) as (server, key, base):
            status, seconds, peak, error = timed(server.pid, get,
                                                 f"{base}/estimates?regress={formula}",
                                                 key if keyed else None, args.timeout)
            print(f"{name:<46}{status:>8}{seconds:>9.1f}{peak / MIB:>14.1f}  {error}")
    with analysis_server(args) as (server, key, base):
        answers: list[tuple[int, str]] = []
        five = [threading.Thread(target=lambda: answers.append(get(
            f"{base}/estimates?regress={SIX_WAY}", key, args.timeout))) for _ in range(5)]
        for thread in five:
            thread.start()
        time.sleep(2.0)  # all five started
        print(f"\nwhile five keyed {SIX_WAY} are sent at once (60 s timeout; 0: timed out):")
        for name, request, request_args in (
                ("GET /healthz", get, (base.split("/api/")[0] + "/healthz", None, 60)),
                ("a submission", post, (f"{base}/responses", {"answers": {
                    q: 1 for q in YES_NO}}, 60))):
            probes = [timed(server.pid, request, *request_args) for _ in range(PROBES)]
            seconds = sorted(probe[1] for probe in probes)
            print(f"{name}: {', '.join(sorted({str(probe[0]) for probe in probes}))} in "
                  f"{statistics.median(seconds):.2f} s median, {seconds[-1]:.2f} s at most "
                  f"({PROBES} in turn)")
        for thread in five:
            thread.join()
        print("the five answered: " + ", ".join(f"{status} {error}".strip()
                                                for status, error in sorted(answers)))


@contextlib.contextmanager
def analysis_server(args):
    """A fresh server (--previous: of that code) with the survey; (Server, key, survey URL)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env, key = aggregator_env(folder, f"sqlite:///{folder}/bench.sqlite3")
        if args.previous:
            env["PYTHONPATH"] = code_environment(args.previous, folder)["PYTHONPATH"]
        with gunicorn("ldpsurvey.aggregator:create_app()", env, folder, 1, 4) as server:
            definition = {"title": "Ten", "public_results": True, "release_batch": 1,
                          "questions": [{"id": q, "text": f"{q}?", "type": "yes_no",
                                         "epsilon": 1.0} for q in YES_NO]}
            survey_id = call("POST", f"{server.url}/api/surveys", key, definition)["survey_id"]
            base = f"{server.url}/api/surveys/{survey_id}"
            call("POST", f"{base}/responses/batch", key, {"responses": [
                {"answers": {q: secrets.randbelow(2) for q in YES_NO}} for _ in range(3000)]})
            released(f"{base}/estimates", key, 3000)
            yield server, key, base


def get(url: str, key: str | None, timeout: float) -> tuple[int, str]:
    """(status, error code) of a GET; status 0 when it timed out."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return answer(urllib.request.Request(url, headers=headers), timeout)


def post(url: str, body: dict, timeout: float) -> tuple[int, str]:
    return answer(urllib.request.Request(url, data=json.dumps(body).encode(), headers={
        "Content-Type": "application/json"}, method="POST"), timeout)


def answer(request, timeout: float) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
            return response.status, ""
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()).get("error", "")
    except TimeoutError:
        return 0, "timed out"


def timed(pid: int, request, *args) -> tuple[int, float, int, str]:
    """(status, seconds, peak RSS of the server's tree, error code) of request(*args)."""
    done, peak = threading.Event(), [rss(pid)]

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss(pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.monotonic()
    status, error = request(*args)
    seconds = time.monotonic() - started
    done.set()
    sampler.join()
    return status, seconds, peak[0], error


if __name__ == "__main__":
    sys.exit(main())
