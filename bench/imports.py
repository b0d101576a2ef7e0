"""The house's floors, counted: modules per folder and the import cycles among ldp-survey's own
modules, imports inside functions included (an import deferred into a function still ties the
two modules together).

    python bench/imports.py [ROOT]

ROOT is a checkout (default: this one). A cycle is a strongly connected component of the
module graph (Tarjan 1972); a package's `__init__` counts as the package itself.
"""

import ast
import sys
from collections import Counter
from pathlib import Path

PACKAGES = ("shared", "client", "aggregator", "analysis", "cli", "xlsform")


def modules(root: Path) -> dict[str, Path]:
    """Every module of the six packages by dotted name (`ldpsurvey.aggregator.web.pages`)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            found[".".join(("ldpsurvey", *parts))] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The known modules `name` imports anywhere in its file, relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1 if node.level else 0):
                base = base.rpartition(".")[0]
            module = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in graph:
        if node not in index:
            visit(node)
    return found


def graph_of(root: Path) -> dict[str, set[str]]:
    """Module → the modules it imports, a package's import of its own `__init__` left out."""
    found = modules(root)
    graph = {name: imports(name, path, set(found)) for name, path in found.items()}
    # A module's import of a parent package (its __init__) is how Python loads it, not a tie.
    return {name: {t for t in targets if not name.startswith(t + ".")} for name, targets in graph.items()}


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
    per_folder = Counter(path.parent.relative_to(root).as_posix() for path in modules(root).values())
    print("modules per folder")
    for folder, count in sorted(per_folder.items()):
        print(f"  {folder:32} {count:3}")
    found = cycles(graph_of(root))
    print(f"import cycles: {len(found)}")
    for component in found:
        print("  " + " <-> ".join(name.removeprefix("ldpsurvey.") for name in component))


if __name__ == "__main__":
    main()
