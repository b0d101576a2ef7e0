"""The layout rules: shared loads nothing heavy, the client nothing of the server."""

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

STARTER = Path(__file__).resolve().parents[2] / "shared" / "examples" / "starter.toml"


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

    root = Path(__file__).resolve().parents[2]
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


ROOT = Path(__file__).resolve().parents[2]
AGGREGATOR = ROOT / "aggregator"
# bench/imports.py counts the floors and cycles for people; the rules below read the same graph.
_spec = importlib.util.spec_from_file_location("bench_imports", ROOT / "bench" / "imports.py")
IMPORTS = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(IMPORTS)
GRAPH = IMPORTS.graph_of(ROOT)
# The aggregator's floors, lowest first: a module imports only from its own floor or below.
FLOORS = ("exceptions", "config", "store", "services", "web")


def floor(module: str) -> int | None:
    """The floor of an aggregator module (the package itself, create_app, is the roof)."""
    parts = module.split(".")
    if parts[:2] != ["ldpsurvey", "aggregator"]:
        return None
    return FLOORS.index(parts[2]) if len(parts) > 2 else len(FLOORS)


def all_imports(path: Path) -> set[str]:
    """Every module `path` imports, at the top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_every_aggregator_module_sits_on_a_floor():
    """A module outside the floors' folders would escape the rules below."""
    loose = {m for m in GRAPH if floor(m) is None and m.startswith("ldpsurvey.aggregator")}
    assert not loose
    assert {path.name for path in AGGREGATOR.glob("*.py")} == {"__init__.py", "exceptions.py"}


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m.startswith("ldpsurvey.aggregator.")))
def test_no_import_runs_up_a_floor(module):
    """exceptions < config < store < services < web: nothing imports from a floor above it."""
    above = {target for target in GRAPH[module] if (floor(target) or 0) > floor(module)}
    assert not above


@pytest.mark.parametrize("folder", ["store", "services"])
def test_store_and_services_know_nothing_of_http(folder):
    """Nothing under store/ or services/ imports Flask or Werkzeug, so none raises an HTTP error."""
    for path in (AGGREGATOR / folder).glob("*.py"):
        web = {m for m in all_imports(path) if m.split(".")[0] in ("flask", "werkzeug", "flask_limiter")}
        assert not web, path.name
    assert not {m for m in all_imports(AGGREGATOR / "exceptions.py") if m.split(".")[0] == "flask"}


def blueprints() -> list[Path]:
    return [path for path in (AGGREGATOR / "web").glob("*.py") if "Blueprint(" in path.read_text()]


def test_no_blueprint_imports_another():
    names = {f"ldpsurvey.aggregator.web.{path.stem}" for path in blueprints()}
    assert {name.rpartition(".")[2] for name in names} == {"respondents", "researchers", "pages", "openapi"}
    for name in names:
        assert not GRAPH[name] & (names - {name}), name


@pytest.mark.parametrize("path", sorted(p.name for p in (AGGREGATOR / "store").glob("*.py")
                                       if p.name not in ("connection.py", "migrations.py")))
def test_store_never_branches_on_the_database_kind(path):
    """Dialect differences (locking reads, migration locks) live in store/connection.py."""
    source = (AGGREGATOR / "store" / path).read_text()
    attributes = {node.attr for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Attribute)}
    assert not attributes & {"dialect", "postgres"}
    for word in ("for share", "for update", "sqlite", "postgres", "pg_"):
        assert word not in source.lower(), word


# shared's floors, lowest first: the NumPy simulation and the statistics import nothing else of
# shared; the mechanisms stand on them (the simulation only inside `simulate`, so importing
# shared never loads NumPy); the survey format stands on the mechanisms.
SHARED_FLOORS = {"sim": 0, "stats": 0, "mechanisms": 1, "survey": 2}


def shared_floor(module: str) -> tuple[str, int] | None:
    """A shared module's (or sub-package's) folder and floor (None for the package itself and
    its loose modules, the roof)."""
    parts = module.split(".")
    if parts[:2] != ["ldpsurvey", "shared"] or len(parts) < 3 or parts[2] not in SHARED_FLOORS:
        return None
    return parts[2], SHARED_FLOORS[parts[2]]


def test_every_shared_module_sits_on_a_floor():
    folders = {path.name for path in (ROOT / "shared").iterdir()
               if path.is_dir() and (path / "__init__.py").exists()}
    assert folders == set(SHARED_FLOORS)


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if shared_floor(m)))
def test_no_shared_import_runs_up_a_floor_or_sideways(module):
    """sim, stats < mechanisms < survey: a module imports from its own folder or a lower
    floor (sim and stats, on one floor, not from each other), never from shared's roof."""
    folder, level = shared_floor(module)
    for target in GRAPH[module]:
        if target.startswith("ldpsurvey.shared"):
            placed = shared_floor(target)
            assert placed is not None and (placed[0] == folder or placed[1] < level), target


def test_no_import_cycle_anywhere():
    """No chain of imports, imports inside functions included, leads back to the module it
    started from (bench/imports.py's cycles), in any package."""
    assert not IMPORTS.cycles(GRAPH)
