"""ruff keeps the code base clean; it is part of the test suite so CI cannot forget it."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_is_clean():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", str(ROOT)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_bandit_finds_nothing_unexplained():
    """Every finding bandit would report carries a `# nosec BXXX` with its reason beside it."""
    proc = subprocess.run([sys.executable, "-m", "bandit", "-q", "-r", "shared", "client",
                           "aggregator", "cli"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
