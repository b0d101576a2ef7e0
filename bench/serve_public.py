"""Time from `ldp-survey serve --public localhost --tls internal` starting to its first HTTPS
answer (GET /healthz through Caddy, checked against Caddy's own CA), on loopback.

    python bench/serve_public.py [--runs 5]

Each run starts in a fresh instance folder (first start: secrets, schema, Caddy's CA and the
first certificate are made) and again in the same folder (a restart); then stops it with
SIGTERM and times that too. Prints one line per run and the medians.
"""

import argparse
import os
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_answer(instance: Path) -> tuple[float, float, bool]:
    """(seconds from start to the first HTTPS 200 of /healthz, seconds to stop on SIGTERM,
    whether serve restarted Caddy because its first certificate was lost)."""
    https, http = free_port(), free_port()
    root = instance / "caddy" / "caddy" / "pki" / "authorities" / "local" / "root.crt"
    log = instance.parent / "serve.log"
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "ldpsurvey.cli", "serve", "--public", "localhost", "--tls",
         "internal", "--https-port", str(https), "--http-port", str(http), "--instance",
         str(instance)], stdout=subprocess.DEVNULL, stderr=log.open("w"),
        start_new_session=True)
    try:
        while True:
            if process.poll() is not None:
                raise SystemExit(f"serve --public stopped (exit {process.returncode})")
            try:
                context = ssl.create_default_context(cafile=root)
                with socket.create_connection(("127.0.0.1", https), timeout=2) as sock, \
                        context.wrap_socket(sock, server_hostname="localhost") as tls:
                    tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n"
                                b"Connection: close\r\n\r\n")
                    if tls.recv(64).startswith(b"HTTP/1.1 200"):
                        break
            except (OSError, ssl.SSLError):
                pass
            time.sleep(0.01)
        answered = time.monotonic() - started
    finally:
        stopping = time.monotonic()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=120)
    return answered, time.monotonic() - stopping, "restarting it" in log.read_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    figures: dict[str, list[float]] = {"first start": [], "restart": [], "stop": []}
    restarted = 0
    for run in range(runs):
        with tempfile.TemporaryDirectory() as folder:
            instance = Path(folder) / "instance"
            first, stop, lost = first_answer(instance)
            again, stop_again, lost_again = first_answer(instance)
        restarted += lost + lost_again
        figures["first start"].append(first)
        figures["restart"].append(again)
        figures["stop"] += [stop, stop_again]
        print(f"run {run + 1}: first start {first:.2f} s, restart {again:.2f} s, "
              f"stop {stop:.2f} s and {stop_again:.2f} s")
    print("medians: " + ", ".join(f"{name} {statistics.median(values):.2f} s"
                                  for name, values in figures.items()))
    print(f"Caddy restarted for a lost first certificate in {restarted} of {2 * runs} starts")


if __name__ == "__main__":
    main()
