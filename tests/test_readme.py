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


def test_every_test_the_readme_cites_exists():
    """The threat model backs its claims with named tests: each must exist (`file.py::name`,
    or `::name` for another test in the file named last)."""
    import ast

    tests = Path(__file__).resolve().parent
    cited, current = [], None
    for file, name, bare in re.findall(r"`(?:(test_\w+\.py)(?:::(\w+))?|::(\w+))`", README):
        current = file or current
        if name or bare:
            cited.append((current, name or bare))
        elif file:
            assert (tests / file).exists(), file
    assert len(cited) >= 8
    for file, name in cited:
        tree = ast.parse((tests / file).read_text())
        assert name in {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}, \
            f"{file}::{name}"
