"""The layout rules: shared loads nothing heavy, the client nothing of the server."""

import subprocess
import sys

import pytest


def loaded_modules(statement: str) -> set[str]:
    code = f"{statement}\nimport sys\nprint('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize("statement, forbidden", [
    ("import ldpsurvey.shared", {"numpy", "flask", "cryptography", "click",
                                 "ldpsurvey.client", "ldpsurvey.aggregator"}),
    ("import ldpsurvey.cli", {"numpy", "flask", "ldpsurvey.aggregator"}),
])
def test_import_does_not_load(statement, forbidden):
    assert not loaded_modules(statement) & forbidden


def test_client_loads_no_server_or_simulation_code():
    loaded = loaded_modules("import ldpsurvey.client")
    assert not loaded & {"numpy", "flask", "werkzeug", "ldpsurvey.aggregator", "click"}


@pytest.mark.parametrize("blocked, args, extra", [
    ("flask", ["serve"], "server"),
    ("numpy", ["mock", "--respondents", "10"], "sim"),
])
def test_a_missing_extra_is_named(blocked, args, extra):
    """With the extra's package unimportable, the command says which extra to install."""
    code = (f"import sys; sys.modules[{blocked!r}] = None\n"
            f"from ldpsurvey.cli import main\nmain({args!r})")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 1
    assert f"pip install 'ldp-survey[{extra}]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_respondent_code_uses_only_a_csprng():
    """No `random` module in the packages and no Math.random in the browser code."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for folder in ("shared", "client", "aggregator"):
        for path in (root / folder).rglob("*.py"):
            text = path.read_text()
            assert "import random" not in text and "from random" not in text, path
    for path in (root / "shared" / "web").glob("*.js"):
        assert "Math.random" not in path.read_text(), path
        assert "crypto.getRandomValues" in (root / "shared" / "web" / "randomizer.js").read_text()
