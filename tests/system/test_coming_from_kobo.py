"""docs/coming-from-kobo-odk-limesurvey.md run as written: its XLSForm (three tables) built as
an .xlsx, its commands run, the survey file it shows, the refusal it shows, and its Stata
arithmetic on results.dta."""

import re
import shlex
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from openpyxl import Workbook

from ldpsurvey.cli import main
from ldpsurvey.shared import read_definition
from ldpsurvey.xlsform import read_form

from helpers import answered, doc_blocks, doc_text, release_due

PAGE = doc_text("coming-from-kobo-odk-limesurvey")


def marked_table(marker: str) -> list[list[str]]:
    """The Markdown table after `<!-- marker ...-->`: its header and rows, cells stripped."""
    table = re.search(rf"<!-- {re.escape(marker)}\b.*?-->\n((?:\|.*\|\n)+)", PAGE).group(1)
    rows = [[cell.strip() for cell in line.strip()[1:-1].split("|")]
            for line in table.splitlines()]
    return [rows[0], *rows[2:]]  # the |---| line left out


def typed(cell: str):
    """A cell as a spreadsheet program stores what was typed: a number, text, or nothing."""
    if not cell:
        return None
    for kind in (int, float):
        try:
            return kind(cell)
        except ValueError:
            pass
    return cell


def build_form(path: Path, extra_rows: list[list[str]] = (),
               extra_header: list[str] = ()) -> Path:
    """The page's health.xlsx, with `extra_rows` (under `extra_header`'s columns) added."""
    workbook = Workbook()
    for index, name in enumerate(("survey", "choices", "settings")):
        sheet = workbook.active if index == 0 else workbook.create_sheet(name)
        sheet.title = name
        header, *rows = marked_table(f"kobo-example-{name}")
        if name == "survey" and extra_rows:
            header = header + [c for c in extra_header if c not in header]
            rows = rows + [[row[extra_header.index(c)] if c in extra_header else ""
                            for c in header] for row in extra_rows]
        sheet.append(header)
        for row in rows:
            sheet.append([typed(cell) for cell in row])
    workbook.save(path)
    return path


def commands(marker: str) -> list[list[str]]:
    (block,) = set(doc_blocks(marker))
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def test_the_example_imports_checks_and_goes_back_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    build_form(tmp_path / "health.xlsx")
    ran = []
    for command in commands("kobo-example-commands"):
        assert command[0] == "ldp-survey"
        result = CliRunner().invoke(main, command[1:])
        assert result.exit_code == 0, (command, result.output)
        ran.append(result)
    imported, checked, _ = ran
    (shown,) = doc_blocks("kobo-example-survey-file")
    assert read_definition("survey.toml") == tomllib.loads(shown)
    assert [line.split(":")[0] for line in imported.stderr.splitlines()[:2]] == ["row 2",
                                                                                 "row 3"]
    assert "start (start): not asked" in imported.stderr
    assert "end (end): not asked" in imported.stderr
    assert "respondents with default ceilings will accept it" in checked.stdout
    assert "smoked: epsilon 1.099" in checked.stdout  # alpha 0.5 is ln 3, as the page says
    assert read_form(tmp_path / "health-ldp.xlsx").definition == read_definition("survey.toml")


def test_the_refused_row_gives_the_lines_shown(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    header, row = marked_table("kobo-example-refused")
    build_form(tmp_path / "health.xlsx", [row], header)
    result = CliRunner().invoke(main, ["survey", "import", "health.xlsx", "--output",
                                       "survey.toml"])
    assert result.exit_code == 2
    shown = PAGE.split("<!-- kobo-example-refused", 1)[1].split("```\n", 2)[1]
    assert result.stderr == shown
    assert not (tmp_path / "survey.toml").exists()


def stata_commands() -> list[tuple[str | None, list[str]]]:
    """The Stata section's commands: (the variable a line assigns, as `ID=$(...)`, or None;
    the command split as a shell would)."""
    (block,) = set(doc_blocks("kobo-example-stata-commands"))
    found = []
    for line in filter(str.strip, block.splitlines()):
        assigned = re.fullmatch(r"(\w+)=\$\((.*)\)\s*(#.*)?", line.strip())
        found.append((assigned.group(1), shlex.split(assigned.group(2))) if assigned else
                     (None, shlex.split(line, comments=True)))
    return found


def test_the_example_reaches_a_stata_table_as_written(live_server, researcher_key, client, auth,
                                                      tmp_path, monkeypatch):
    """create, (respondents answer), close, results, results --output results.dta: then the
    page's Stata arithmetic on results.dta, done in pandas (Stata is not installed here), is
    the estimate `results` gives, and the file has the labels the page promises."""
    import pandas

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LDP_SURVEY_URL", live_server)
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    build_form(tmp_path / "health.xlsx")
    assert CliRunner().invoke(main, ["survey", "import", "health.xlsx", "--output",
                                     "survey.toml"]).exit_code == 0
    survey_id, n = None, 400
    for assigned, command in stata_commands():
        assert command[0] == "ldp-survey"
        result = CliRunner().invoke(main, [survey_id if a == "$ID" else a for a in command[1:]])
        assert result.exit_code == 0, (command, result.output)
        if assigned:
            survey_id = result.stdout.strip()
            answered(client, auth, survey_id, read_definition("survey.toml"), n, seed=43)
    release_due(client.application)
    data = pandas.read_stata("results.dta", convert_categoricals=False)
    assert len(data) == n
    with pandas.io.stata.StataReader("results.dta") as reader:
        labels, value_labels = reader.variable_labels(), reader.value_labels()
    definition = read_definition("survey.toml")
    assert labels == {q["id"]: q["text"] for q in definition["questions"]}
    assert {0: "No", 1: "Yes"} in value_labels.values()
    (stata,) = doc_blocks("kobo-example-do-file")
    forced, beta, alpha = map(float, re.search(
        r"display \(r\(mean\) - ([\d.]+) \* ([\d.]+)\) / ([\d.]+)", stata).groups())
    book = client.get(f"/api/surveys/{survey_id}/codebook.json", headers=auth).json
    smoked = next(q for q in book["questions"] if q["id"] == "smoked")
    assert (smoked["alpha"], 1 - smoked["alpha"], smoked["beta"][1]) == (alpha, forced, beta)
    assert "smoked" in Path("codebook.md").read_text()
    estimates = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    yes = next(q for q in estimates["questions"] if q["id"] == "smoked")["options"][1]
    assert yes["p_hat"] == pytest.approx((data["smoked"].mean() - forced * beta) / alpha,
                                         rel=1e-12, abs=1e-12)
