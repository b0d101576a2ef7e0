"""The layout rules: shared loads nothing heavy, the client nothing of the server."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

STARTER = Path(__file__).resolve().parents[1] / "shared" / "examples" / "starter.toml"


def loaded_modules(statement: str) -> set[str]:
    code = f"{statement}\nimport sys\nprint('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize("statement, forbidden", [
    ("import ldpsurvey.shared", {"numpy", "flask", "cryptography", "click",
                                 "ldpsurvey.client", "ldpsurvey.aggregator"}),
    ("import ldpsurvey.cli", {"numpy", "flask", "ldpsurvey.aggregator", "pyxform", "openpyxl",
                              "ldpsurvey.xlsform"}),
    # (openpyxl loads numpy when it is installed, to write its number types)
    ("import ldpsurvey.xlsform", {"flask", "click", "ldpsurvey.client", "ldpsurvey.aggregator",
                                  "ldpsurvey.cli"}),
    ("import ldpsurvey.analysis", {"flask", "click", "ldpsurvey.client", "ldpsurvey.aggregator",
                                  "ldpsurvey.cli"}),
    # The server starts without the analysis extra: it loads ldpsurvey.analysis on first use.
    ("import ldpsurvey.aggregator", {"ldpsurvey.analysis", "numpy", "scipy", "formulaic"}),
])
def test_import_does_not_load(statement, forbidden):
    assert not loaded_modules(statement) & forbidden


def test_client_loads_no_server_or_simulation_code():
    loaded = loaded_modules("import ldpsurvey.client")
    assert not loaded & {"numpy", "flask", "werkzeug", "ldpsurvey.aggregator", "click"}


@pytest.mark.parametrize("blocked, args, extra", [
    ("flask", ["serve"], "server"),
    ("numpy", ["mock", "--respondents", "10"], "sim"),
    ("pyxform", ["survey", "import", str(STARTER), "-o", "/nonexistent/s.toml"], "xlsform"),
    ("openpyxl", ["survey", "export-xlsform", str(STARTER), "-o", "/nonexistent/s.xlsx"],
     "xlsform"),
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


def test_the_aggregator_loads_no_client_or_cli_code():
    loaded = loaded_modules("import ldpsurvey.aggregator")
    assert not {m for m in loaded if m.startswith(("ldpsurvey.client", "ldpsurvey.cli"))}


AGGREGATOR = Path(__file__).resolve().parents[1] / "aggregator"


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, with the package's own as '.name'."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names.add(base)
            if node.module is None:  # from . import a, b
                names.update(f".{alias.name}" for alias in node.names)
    return names


def blueprints() -> list[Path]:
    return [path for path in AGGREGATOR.glob("*.py") if "Blueprint(" in path.read_text()]


def test_no_blueprint_imports_another():
    names = {f".{path.stem}" for path in blueprints()}
    assert names == {".respondents", ".researchers", ".pages", ".openapi"}
    for path in blueprints():
        assert not imported_modules(path) & (names - {f".{path.stem}"}), path.name


def test_store_never_branches_on_the_database_kind():
    """Dialect differences (locking reads, migration locks) live in db.py's Connection."""
    source = (AGGREGATOR / "store.py").read_text()
    attributes = {node.attr for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Attribute)}
    assert not attributes & {"dialect", "postgres"}
    for word in ("for share", "for update", "sqlite", "postgres", "pg_"):
        assert word not in source.lower(), word


def test_services_raise_plain_exceptions_only():
    """Services and store import nothing of Flask, so they cannot raise an HTTP error."""
    for name in ("store", "surveys", "intake", "answers", "exceptions", "migrations", "ids",
                 "database", "lifecycle"):
        modules = imported_modules(AGGREGATOR / f"{name}.py")
        assert not {m for m in modules if m.split(".")[0] in ("flask", "werkzeug")}, name
        assert not modules & {".errors", ".http", ".auth"}, name
