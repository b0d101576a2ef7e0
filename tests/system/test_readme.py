"""The promises of README.md and the docs site (docs/*.md), run as written."""

import ast
import re
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path

from helpers import REPOSITORY, doc_blocks, doc_pages, doc_text

README = doc_text("README.md")
README_MOST_LINES = 250  # issue 25: what it is, the Quickstart and the first real survey


def quickstart_commands() -> list[str]:
    block = README.split("## Quickstart", 1)[1].split("```", 2)[1]
    return [line for line in block.splitlines() if line.strip()]


def test_quickstart_has_exactly_two_commands():
    commands = quickstart_commands()
    assert len(commands) == 2
    assert "pytest" in commands[1]


def test_the_readme_stays_short_and_links_only_to_pages_that_exist():
    """README.md is read in one sitting; the rest lives in docs/, which it links."""
    assert len(README.splitlines()) <= README_MOST_LINES
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README)
    assert "docs/index.md" in links
    for link in links:
        assert (REPOSITORY / link).is_file(), link


def test_stdlib_client_example_runs_against_a_live_aggregator(live_server, researcher_key):
    for block in doc_blocks("stdlib-client-example"):
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", block], capture_output=True,
                              text=True, timeout=60,
                              env={"LDP_SURVEY_URL": live_server, "LDP_SURVEY_KEY": researcher_key})
        assert proc.returncode == 0, proc.stderr
        n, p_hat, low, high = proc.stdout.split()
        assert n == "10" and float(low) <= max(0.0, min(1.0, float(p_hat))) <= float(high)


def cited_tests(text: str) -> list[tuple[str, str | None]]:
    """The tests one page cites, as (file, name or None for a whole file): `file.py::name`, or
    `::name` for another test in the file named last on that page."""
    cited, current = [], None
    for file, name, bare in re.findall(r"`(?:(test_\w+\.py)(?:::(\w+))?|::(\w+))`", text):
        assert file or current, f"`::{bare}` before any test file is named"
        current = file or current
        cited.append((current, name or bare or None))
    return cited


def test_every_test_the_readme_and_the_docs_cite_exists():
    """Claims are backed by named tests (in README.md and every docs page): each must exist."""
    # Pages cite a test file by its name: each name is unique across tests/'s folders.
    paths = {path.name: path for path in Path(__file__).resolve().parents[1].rglob("test_*.py")}
    functions: dict[str, set[str]] = {}
    named = 0
    for page, text in doc_pages().items():
        for file, name in cited_tests(text):
            assert file in paths, f"{page}: {file}"
            if file not in functions:
                tree = ast.parse(paths[file].read_text())
                functions[file] = {node.name for node in tree.body
                                   if isinstance(node, ast.FunctionDef)}
            assert name is None or name in functions[file], f"{page}: {file}::{name}"
            named += name is not None
    assert named >= 100  # the threat model alone cites dozens


def test_the_performance_page_includes_all_of_bench_readme_but_its_plot():
    """docs/performance.md includes bench/README.md whole and bench/HISTORY.md by line ranges
    around the plot's image (not part of the site): adding lines above it must move the ranges."""
    page = (REPOSITORY / "docs" / "performance.md").read_text()
    assert '--8<-- "bench/README.md"' in page
    ranges = re.findall(r'--8<-- "bench/HISTORY.md:(\d+):(\d*)"', page)
    lines = (REPOSITORY / "bench" / "HISTORY.md").read_text().splitlines()
    included = {n for first, last in ranges
                for n in range(int(first), int(last or len(lines)) + 1)}
    left_out = [lines[n - 1] for n in range(1, len(lines) + 1) if n not in included]
    assert left_out == ["![intake rate and bytes written per response against rows stored]"
                        "(scale.png)"]


def test_the_docs_site_builds_strict(tmp_path):
    """`mkdocs build --strict`: every page in the navigation, every link and anchor resolves,
    and every section of README.md the pages include exists."""
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=REPOSITORY, capture_output=True,
                          text=True, timeout=300, env={"NO_MKDOCS_2_WARNING": "1",
                                                       "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    first = (tmp_path / "site" / "first-survey" / "index.html").read_text()
    assert "ldp-survey survey init survey.toml" in first  # README's section, included
    assert "--8&lt;--" not in first and "--8<--" not in first


def commands_of(marker: str) -> list[list[str]]:
    """The commands of a marked block, split as a shell would, comments dropped."""
    (block,) = set(doc_blocks(marker))
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def run_preview(args: list[str]) -> None:
    """`survey preview` started on a free port, its page fetched, then stopped."""
    process = subprocess.Popen([str(Path(sys.executable).parent / "ldp-survey"), *args,
                                "--port", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    try:
        with urllib.request.urlopen(process.stdout.readline().strip(), timeout=10) as r:
            assert b'data-preview="true"' in r.read()
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_first_survey_s_writing_commands_run_as_written(tmp_path, monkeypatch):
    """README's first step: init writes the starter, check passes it, preview serves it."""
    from click.testing import CliRunner

    from ldpsurvey.cli import main

    monkeypatch.chdir(tmp_path)
    commands = commands_of("first-survey-write")
    assert [c[:3] for c in commands] == [["ldp-survey", "survey", verb]
                                         for verb in ("init", "check", "preview")]
    for command in commands:
        if command[2] == "preview":
            run_preview(command[1:])
            continue
        result = CliRunner().invoke(main, command[1:])
        assert result.exit_code == 0, (command, result.output)
    assert "respondents with default ceilings will accept it" in result.stdout


def test_the_lifecycle_commands_run_as_written(live_server, researcher_key, client, tmp_path,
                                               monkeypatch):
    """init, check, preview (started, fetched, stopped), create --draft, edit, publish, copy,
    archive (of the survey closed meanwhile) and delete (the id typed again), in order."""
    from click.testing import CliRunner

    from ldpsurvey.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    monkeypatch.setattr("ldpsurvey.cli.survey_lifecycle.can_prompt", lambda: True)
    auth = {"Authorization": f"Bearer {researcher_key}"}
    commands = commands_of("lifecycle-commands")
    assert [c[:3] for c in commands] == [["ldp-survey", "survey", verb] for verb in (
        "init", "check", "preview", "create", "edit", "publish", "copy", "archive", "delete")]
    survey_id = None
    for command in commands:
        args = [live_server if a == "http://127.0.0.1:8000" else survey_id if a == "ID" else a
                for a in command[1:]]
        if args[1] == "preview":
            run_preview(args)
            continue
        if args[1] == "archive":
            client.post(f"/api/surveys/{survey_id}/close", headers=auth)
        result = CliRunner().invoke(main, args, input=f"{survey_id}\n")
        assert result.exit_code == 0, (args, result.output)
        if args[1] == "create":
            survey_id = result.stdout.strip()
    assert client.get(f"/api/surveys/{survey_id}/status").status_code == 404  # deleted
    surveys = client.get("/api/surveys?archived=true", headers=auth).json["surveys"]
    assert [s["status"] for s in surveys] == ["draft"]  # the copy


def test_mkdocs_serve_takes_no_port_that_ldp_survey_takes():
    """`mkdocs serve` and `ldp-survey serve` run side by side while writing docs."""
    import yaml

    from ldpsurvey.cli.serve import serve

    config = yaml.safe_load((REPOSITORY / "mkdocs.yml").read_text())
    taken = {next(p.default for p in serve.params if p.name == "port"), 8001, 8002}
    assert int(config["dev_addr"].rsplit(":", 1)[1]) not in taken
