"""The mock's embedded aggregator: SQLite in a temporary folder, served over real HTTP on a
free loopback port by gunicorn with one worker process per core and one more, so that the mock
(simulating and encoding) and the aggregator (validating, sealing, storing, releasing) use every
core, and a worker parses a batch while another waits for the writers' lock. The mock sends it
batches of MAX_BATCH_RESPONSES, SENDERS at once (bench/mock.py measured these settings).

It differs from a development server in two settings only, both for one local user: pools are
released every RELEASE_EVERY seconds (the pending pool stays a few batches, however many
respondents are simulated; every response is counted at the close either way), and there are
no rate limits (the mock is the only client).
"""

import contextlib
import json
import os
import socket
import subprocess  # nosec B404: runs gunicorn, this Python, with arguments of our own
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator

import click

from ldpsurvey.cli.api import Api
from ldpsurvey.cli.extras import load

RELEASE_EVERY = 1  # seconds between the embedded aggregator's scheduled releases
THREADS = 2  # per worker: one request parsed while another waits for the writers' lock
EXTRA_WORKERS = 1  # beyond one per core: keeps the cores busy while the mock encodes
START_SECONDS = 60  # for every worker to answer
STOP_SECONDS = 30  # for a graceful stop (SIGTERM), before SIGKILL


def settings(folder: str) -> dict:
    """The embedded aggregator's configuration (the instance folder is `folder`)."""
    return {"DATABASE_URL": f"sqlite:///{folder}/mock.sqlite3", "KEY_FILE": None,
            "DEPLOYMENT": "development", "RELEASE_EVERY": RELEASE_EVERY,
            "RATE_LIMITS_ENABLED": False}


def worker_environment(config: dict) -> dict[str, str]:
    """This environment with `config` as LDP_SURVEY_ variables (a None setting left unset, so
    it takes its default, as create_app(config) does), for the workers to make the same app."""
    env = {name: value for name, value in os.environ.items()
           if name.removeprefix("LDP_SURVEY_") not in config}
    env.update({f"LDP_SURVEY_{name}": json.dumps(value) if not isinstance(value, str) else value
                for name, value in config.items() if value is not None})
    return env


def workers() -> int:
    """One gunicorn worker per core this process may use, and EXTRA_WORKERS more."""
    return max(len(os.sched_getaffinity(0)), 1) + EXTRA_WORKERS


def senders() -> int:
    """Batches the mock keeps in flight to it: one per thread of every worker."""
    return workers() * THREADS


@contextlib.contextmanager
def embedded_aggregator() -> Iterator[Api]:
    """An aggregator on SQLite in a temporary folder, served on a free loopback port, with a
    researcher key. The app is created here first (schema, signing key, secrets, the key);
    gunicorn's workers then open the same folder, on a socket bound here (no port race)."""
    aggregator = load("ldpsurvey.aggregator")
    load("gunicorn")
    with tempfile.TemporaryDirectory(prefix="ldp-survey-mock-") as folder:
        config = settings(folder)
        app = aggregator.create_app(config, instance_path=folder)
        key = aggregator.create_api_key(app).key
        aggregator.close_app(app)
        env = {**worker_environment(config), "LDP_SURVEY_INSTANCE": folder}
        with socket.create_server(("127.0.0.1", 0)) as listener:
            url = f"http://127.0.0.1:{listener.getsockname()[1]}"
            server = subprocess.Popen(  # noqa: S603  # nosec B603: this Python, our arguments
                [sys.executable, "-m", "gunicorn", "--bind", f"fd://{listener.fileno()}",
                 "--workers", str(workers()), "--worker-class", "gthread", "--threads",
                 str(THREADS), "--log-level", "warning", "--timeout", "300",
                 "--logger-class", "ldpsurvey.aggregator.web.gunicorn.PrivateLogger",
                 "ldpsurvey.aggregator:create_app()"],
                env=env, cwd=folder, pass_fds=(listener.fileno(),), stdout=subprocess.DEVNULL)
            try:
                wait_until_answering(url, server)
                yield Api(url, key)
            finally:
                stop(server)


def wait_until_answering(url: str, server: subprocess.Popen) -> None:
    """Until GET /healthz answers 200; a one-line error if gunicorn stops or takes too long."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise click.ClickException(f"the embedded aggregator stopped (exit {server.returncode})")
        with contextlib.suppress(OSError), urllib.request.urlopen(  # noqa: S310  # nosec B310
                f"{url}/healthz", timeout=5) as answer:
            if answer.status == 200:
                return
        time.sleep(0.05)
    raise click.ClickException(f"the embedded aggregator did not answer in {START_SECONDS} s")


def stop(server: subprocess.Popen) -> None:
    """SIGTERM (gunicorn stops its workers gracefully), SIGKILL if it takes too long."""
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
