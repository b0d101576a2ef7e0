"""The README's promises, run as written."""

import re
import subprocess
import sys
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def quickstart_commands() -> list[str]:
    block = README.split("## Quickstart", 1)[1].split("```", 2)[1]
    return [line for line in block.splitlines() if line.strip()]


def test_quickstart_has_exactly_two_commands():
    commands = quickstart_commands()
    assert len(commands) == 2
    assert "pytest" in commands[1]


def test_stdlib_client_example_runs_against_a_live_aggregator(live_server, researcher_key):
    match = re.search(r"<!-- stdlib-client-example.*?-->\n```python\n(.*?)```", README, re.S)
    assert match, "the README lost its standard-library client example"
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", match.group(1)], capture_output=True,
                          text=True, timeout=60,
                          env={"LDP_SURVEY_URL": live_server, "LDP_SURVEY_KEY": researcher_key})
    assert proc.returncode == 0, proc.stderr
    n, p_hat, low, high = proc.stdout.split()
    assert n == "10" and float(low) <= max(0.0, min(1.0, float(p_hat))) <= float(high)
