"""Analysis-ready exports: the default CSV loads with `pandas.read_csv(path)` and R's
`read.csv(path)` and no options (one header row of question ids, one row per response, option
labels or, with codes, option codes); the rr CSV keeps the design in `#` comment lines; the
codebook says what every column and value means, with the manifest's numbers."""

import csv
import io
import json
import re
import shutil
import subprocess
from collections import Counter
from datetime import datetime

import pytest
from click.testing import CliRunner
from test_accounts import log_in

from ldpsurvey.aggregator.services import exports

from helpers import doc_blocks, doc_text, release_due, require

# Labels a naive writer or reader gets wrong: a comma, quotes, a newline, a spreadsheet formula,
# a leading `#` (a comment to `comment="#"` readers), Markdown and HTML, a table's cell separator.
HOSTILE = ["a, b", 'say "hi"', "line one\nline two", "=HYPERLINK(\"x\")", "# not a comment",
           "<b>x</b> | y"]
LABELLED = {"title": "Labels <i>&</i> | pipes", "release_batch": 1, "questions": [
    {"id": "tricky", "text": "Which?\nPick | one", "type": "choice", "options": HOSTILE,
     "epsilon": 2.0},
    {"id": "smoked", "text": "Smoked?", "type": "yes_no", "alpha": 0.5},
    {"id": "digits", "text": "A digit?", "type": "choice", "options": ["0", "1", "2"],
     "alpha": 0.6}]}
# What the default CSV holds for each label: a leading = + - @ gets an apostrophe
IN_CSV = [f"'{label}" if label.startswith("=") else label for label in HOSTILE]


def publish_and_answer(client, auth, survey=LABELLED) -> tuple[str, list[dict]]:
    """The survey published, 36 responses (every option of every question) released; its id
    and the answers sent."""
    survey_id = client.post("/api/surveys", json=survey, headers=auth).json["survey_id"]
    sent = [{"tricky": i % 6, "smoked": i // 6 % 2, "digits": i % 3} for i in range(36)]
    response = client.post(f"/api/surveys/{survey_id}/responses/batch", headers=auth,
                           json={"responses": [{"answers": a} for a in sent]})
    assert response.status_code == 201
    assert release_due(client.application) == 36
    return survey_id, sent


def export(client, auth, survey_id: str, query: str = "") -> bytes:
    response = client.get(f"/api/surveys/{survey_id}/export.csv{query}", headers=auth)
    assert response.status_code == 200, response.data
    return response.get_data()


def test_the_default_csv_loads_in_pandas_with_no_options(client, auth, tmp_path):
    """What a user does first: `pandas.read_csv(path)`. Exactly one row per response, the
    question ids as columns, the labels (with commas, quotes, newlines, `#`) intact, a formula
    defused. On the old export this raised a ParserError (the `#` comment lines)."""
    pandas = pytest.importorskip("pandas")
    survey_id, sent = publish_and_answer(client, auth)
    path = tmp_path / "export.csv"
    path.write_bytes(export(client, auth, survey_id))
    frame = pandas.read_csv(path)
    assert list(frame.columns) == ["tricky", "smoked", "digits"]
    assert len(frame) == len(sent)
    labels = ["No", "Yes"]
    assert Counter(zip(frame["tricky"], frame["smoked"], frame["digits"], strict=True)) == \
        Counter((IN_CSV[a["tricky"]], labels[a["smoked"]], a["digits"]) for a in sent)
    assert not any(str(value).startswith("=") for value in frame["tricky"])


def test_codes_give_option_numbers_in_the_same_order(client, auth, tmp_path):
    """codes=true: the same rows in the same order, option codes instead of labels; codes=false
    and format=plain are the default."""
    pandas = pytest.importorskip("pandas")
    survey_id, sent = publish_and_answer(client, auth)
    labelled = export(client, auth, survey_id)
    assert export(client, auth, survey_id, "?codes=false") == labelled
    assert export(client, auth, survey_id, "?format=plain") == labelled
    coded = export(client, auth, survey_id, "?codes=true")
    (tmp_path / "coded.csv").write_bytes(coded)
    frame = pandas.read_csv(tmp_path / "coded.csv")
    assert frame.dtypes.map(str).tolist() == ["int64"] * 3
    assert Counter(map(tuple, frame.to_numpy().tolist())) == \
        Counter((a["tricky"], a["smoked"], a["digits"]) for a in sent)
    rows = list(csv.reader(io.StringIO(labelled.decode())))[1:]
    assert [[IN_CSV[t], ["No", "Yes"][s], str(d)] for t, s, d in frame.to_numpy()] == rows


def test_the_rr_format_keeps_the_design_in_comment_lines(client, auth):
    """format=rr: the old layout, unchanged: `#` lines with the manifest (its signed bytes),
    the design parameters and the central epsilon, then question ids and codes."""
    survey_id, _ = publish_and_answer(client, auth)
    text = export(client, auth, survey_id, "?format=rr").decode()
    lines = text.splitlines()
    assert lines[0].startswith(f"# ldp-survey export of survey {survey_id}: ")
    manifest = client.get(f"/api/surveys/{survey_id}").get_data(as_text=True)
    assert lines[1] == f"# manifest: {manifest}"
    assert lines[2].startswith("# parameters: ") and lines[3].startswith("# central: ")
    coded = export(client, auth, survey_id, "?codes=true").decode()
    assert "\n".join(lines[4:]) + "\n" == coded


def test_the_rr_csv_reads_as_documented(client, auth, tmp_path):
    """docs/exports.md's read of the rr CSV gives one row per response with its codes; read
    as the default CSV is (pandas.read_csv(path) alone), its comment lines are no rows of it."""
    import pandas

    survey_id, sent = publish_and_answer(client, auth)
    path = tmp_path / "rr.csv"
    path.write_bytes(export(client, auth, survey_id, "?format=rr"))
    [documented] = doc_blocks("rr-read")
    frame = eval(documented.strip(), {"pandas": pandas, "path": path})
    assert list(frame.columns) == ["tricky", "smoked", "digits"] and len(frame) == len(sent)
    assert Counter(map(tuple, frame.to_numpy().tolist())) == Counter(
        (a["tricky"], a["smoked"], a["digits"]) for a in sent)
    with pytest.raises(pandas.errors.ParserError):  # without the option: no table at all
        pandas.read_csv(path)


@pytest.mark.parametrize("path, detail", [
    ("export.csv?format=spss", "format must be one of plain, rr"),
    ("export.csv?codes=1", "codes must be true or false"),
    ("export.csv?format=rr&codes=true", "rr always holds codes"),
    ("export.jsonl?codes=true", "apply to export.csv only"),
    ("export.jsonl?format=rr", "apply to export.csv only")])
def test_a_bad_export_option_is_a_400_naming_it(client, auth, survey_id, path, detail):
    response = client.get(f"/api/surveys/{survey_id}/{path}", headers=auth)
    assert response.status_code == 400
    assert response.json["error"] == "invalid_parameter" and detail in response.json["detail"]


def test_the_codebook_holds_the_manifests_numbers(client, auth):
    """Per question its id, text, type, options with codes, alpha, beta and epsilon exactly as
    the signed manifest has them; the survey's id, title, key id and release batch likewise;
    the central epsilon and released count as the estimates have them."""
    survey_id, sent = publish_and_answer(client, auth)
    manifest = json.loads(client.get(f"/api/surveys/{survey_id}").data)
    response = client.get(f"/api/surveys/{survey_id}/codebook.json", headers=auth)
    assert response.status_code == 200 and response.mimetype == "application/json"
    assert f'filename="{survey_id}-codebook.json"' in response.headers["Content-Disposition"]
    book = response.json
    for field in ("survey_id", "title", "key_id", "release_batch", "total_epsilon"):
        assert book[field] == manifest[field]
    for question, signed in zip(book["questions"], manifest["questions"], strict=True):
        options = question.pop("options")
        assert question.pop("report") and question.pop("cells")  # in words (test_every_surface)
        assert question == {k: v for k, v in signed.items() if k != "options"}
        assert [o["label"] for o in options] == signed["options"]
        assert [o["code"] for o in options] == list(range(len(signed["options"])))
    assert [o["csv_value"] for o in response.json["questions"][0]["options"]] == IN_CSV
    estimates = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    assert book["central"] == estimates["central"] and "assumes" in book["central"]
    assert book["released"] == len(sent) == estimates["questions"][0]["n"]
    assert book["last_release"] == 1
    assert datetime.fromisoformat(book["exported_at"]).utcoffset().total_seconds() == 0


def test_the_markdown_codebook_keeps_hostile_labels_inside_their_cells(client, auth):
    """A label with a pipe, a newline, HTML or a link stays one cell of one row: every table
    row has as many unescaped cell separators as its header, and no raw tag remains."""
    survey_id, _ = publish_and_answer(client, auth)
    response = client.get(f"/api/surveys/{survey_id}/codebook.md", headers=auth)
    assert response.status_code == 200 and response.mimetype == "text/markdown"
    text = response.get_data(as_text=True)
    assert "<b>" not in text and "<i>" not in text and "\\<b\\>x\\</b\\> \\| y" in text
    assert "line one<br>line two" in text and "Which?<br>Pick \\| one" in text
    assert f"\n\n{exports.VALUES}\n\n" in text  # the codebook's own words: their code spans kept
    tables, width = [], None
    for line in text.splitlines():
        cells = len(re.findall(r"(?<!\\)\|", line))
        if line.startswith("| "):
            width = cells if width is None else width
            tables.append((line, cells == width))
        else:
            width = None
    assert tables and all(ok for _, ok in tables), [line for line, ok in tables if not ok]
    options = [line for line in text.splitlines() if re.match(r"\| tricky \| \d \|", line)]
    assert len(options) == len(HOSTILE)  # one row per option, none split by a newline


def test_the_codebook_needs_a_reader(client, auth, survey_id):
    for kind in ("json", "md"):
        assert client.get(f"/api/surveys/{survey_id}/codebook.{kind}").status_code == 401
        assert client.get(f"/api/surveys/nope/codebook.{kind}", headers=auth).status_code == 404
    assert client.get(f"/api/surveys/{survey_id}/codebook.txt", headers=auth).status_code == 404


def test_both_databases_export_the_same_layout(client, auth):
    """(Run on SQLite and PostgreSQL by the fixtures.) Header, quoting and row count."""
    survey_id, sent = publish_and_answer(client, auth)
    rows = list(csv.reader(io.StringIO(export(client, auth, survey_id).decode())))
    assert rows[0] == ["tricky", "smoked", "digits"] and len(rows) == len(sent) + 1
    assert sorted(Counter(row[0] for row in rows[1:]).values()) == [6] * 6


def test_the_results_page_links_every_export_and_the_codebook(app, auth, survey_id):
    browser = app.test_client()
    log_in(browser, survey_id, auth)
    page = browser.get(f"/s/{survey_id}/results").get_data(as_text=True)
    for href in ("export.csv", "export.csv?codes=true", "export.csv?format=rr", "export.jsonl",
                 "codebook.md", "codebook.json"):
        assert f'href="/api/surveys/{survey_id}/{href}"' in page
        assert browser.get(f"/api/surveys/{survey_id}/{href}").status_code == 200


# --- the CLI ----------------------------------------------------------------------------------

def results(live_server, *arguments: str):
    from ldpsurvey.cli import main

    return CliRunner().invoke(main, ["results", "--url", live_server, *arguments])


def test_the_cli_writes_the_export_and_its_codebook(live_server, client, auth, researcher_key,
                                                     tmp_path, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    survey_id, _ = publish_and_answer(client, auth)
    path, book = tmp_path / "export.csv", tmp_path / "codebook.md"
    written = results(live_server, "--survey", survey_id, "--csv", "--output", str(path),
                      "--codebook", str(book))
    assert written.exit_code == 0, written.output
    assert path.read_bytes() == export(client, auth, survey_id)
    assert book.read_text().startswith("# Codebook: Labels \\<i\\>\\&\\</i\\> \\| pipes")
    as_json = tmp_path / "codebook.json"
    coded = results(live_server, "--survey", survey_id, "--csv", "--codes", "--codebook",
                    str(as_json))
    assert coded.exit_code == 0, coded.output
    assert coded.stdout.encode() == export(client, auth, survey_id, "?codes=true")
    api = client.get(f"/api/surveys/{survey_id}/codebook.json", headers=auth).json
    assert {**json.loads(as_json.read_text()), "exported_at": None} == \
        {**api, "exported_at": None}
    rr = results(live_server, "--survey", survey_id, "--csv", "--format", "rr")
    assert rr.exit_code == 0 and rr.stdout.startswith("# ldp-survey export of survey ")
    plain = results(live_server, "--survey", survey_id, "--csv", "--format", "plain")
    assert plain.stdout.encode() == export(client, auth, survey_id)


def test_the_codebook_alone_is_written_in_the_format_of_its_extension(
        live_server, client, auth, researcher_key, tmp_path, monkeypatch):
    """`--codebook x.md` without an export was refused: it writes the codebook alone, Markdown
    for .md and JSON otherwise, and prints nothing on stdout."""
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    survey_id, _ = publish_and_answer(client, auth)
    for name, start in (("book.md", "# Codebook: "), ("book.json", '{\n  "format"')):
        written = results(live_server, "--survey", survey_id, "--codebook", str(tmp_path / name))
        assert written.exit_code == 0 and written.stdout == "", written.output
        assert (tmp_path / name).read_text().startswith(start)


@pytest.mark.parametrize("arguments", [
    ["--codes"], ["--format", "rr"], ["--output", "x.txt"], ["--csv", "--output", "x.dta"],
    ["--output", "x.sav", "--codes"], ["--output", "x.xlsx", "--format", "rr"],
    ["--output", "x.R", "--json"], ["--output", "x"], ["--codebook", "x.md", "--json"],
    ["--codebook", "x.md", "--regress", "a ~ b"], ["--jsonl", "--codes"],
    ["--jsonl", "--format", "rr"], ["--csv", "--format", "rr", "--codes"],
    ["--csv", "--format", "spss"], ["--csv", "--json"], ["--jsonl", "--json"],
    ["--csv", "--regress", "a ~ b"], ["--csv", "--crosstab", "a,b"],
    ["--jsonl", "--difference", "a:0,a:1"], ["--csv", "--simultaneous"]])
def test_export_options_out_of_place_are_one_line_and_exit_2(arguments):
    """Refused before any request (no server listens at the URL)."""
    result = results("http://127.0.0.1:9", "--survey", "a" * 21, *arguments)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("ldp-survey: error: ") and result.stderr.count("\n") == 1


# --- the documented snippets ------------------------------------------------------------------

EXPORTS_PAGE = doc_text("exports")  # docs/exports.md
# The pandas snippet the exports page shows (its only Python block).
PANDAS_SNIPPET = EXPORTS_PAGE.split("```python\n", 1)[1].split("```", 1)[0]
# The R line the exports page shows, e.g. `d <- read.csv("SURVEY.csv")`.
R_SNIPPET = re.search(r"In R: `([^`]+)`", EXPORTS_PAGE).group(1)


def test_the_documented_pandas_snippet_runs(client, auth, tmp_path, monkeypatch):
    """The snippet the docs show, run as is on the files the API serves."""
    pytest.importorskip("pandas")
    survey_id, _ = publish_and_answer(client, auth)
    files = {"SURVEY.csv": "export.csv", "SURVEY-codes.csv": "export.csv?codes=true",
             "SURVEY-codebook.json": "codebook.json", "SURVEY.jsonl": "export.jsonl"}
    for name, path in files.items():
        response = client.get(f"/api/surveys/{survey_id}/{path}", headers=auth)
        assert response.status_code == 200
        (tmp_path / name).write_bytes(response.get_data())
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(PANDAS_SNIPPET, scope)  # the documented snippet itself
    assert scope["responses"].shape == scope["codes"].shape == scope["jsonl"].shape == (36, 3)
    assert scope["alpha"]["smoked"] == 0.5 and scope["beta"]["smoked"] == [0.5, 0.5]
    codes = scope["codes"]
    assert scope["jsonl"][list(codes.columns)].to_numpy().tolist() == codes.to_numpy().tolist()
    assert set(scope["header"]) == {"manifest", "parameters", "central"}


# --- R ----------------------------------------------------------------------------------------

def test_the_default_csv_loads_in_r_with_no_options(client, auth, tmp_path):
    """The exports page's R line, `read.csv(path)` with no options, run on an export: what R read,
    written back, is what was exported. CI installs R (r-base-core); elsewhere `require`."""
    rscript = shutil.which("Rscript")
    require(rscript is not None, "R is not installed (apt-get install r-base-core)")
    assert R_SNIPPET.startswith('d <- read.csv("SURVEY.csv")')
    survey_id, _ = publish_and_answer(client, auth)
    path, out = tmp_path / "export.csv", tmp_path / "back.csv"
    path.write_bytes(export(client, auth, survey_id))
    script = f'{R_SNIPPET.replace("SURVEY.csv", str(path))}; write.csv(d, "{out}", row.names = FALSE)'
    subprocess.run([rscript, "-e", script], check=True, timeout=120)
    assert list(csv.reader(out.open(newline=""))) == list(csv.reader(path.open(newline="")))
