"""Exports by file name (`results --output FILE`): .csv and .jsonl as served, .dta, .sav,
.xlsx and .R written from the JSON lines and the codebook, for every question type,
mechanism and design (helpers.EVERY_TYPE): each read back (read_export, pyreadstat, openpyxl,
R) holds the rows the plain CSV holds, in the same random order, with the labels the codebook
gives."""

import json
import shutil
import subprocess
import zipfile

import pytest
from click.testing import CliRunner

from helpers import EVERY_TYPE, every_type_answered, require

pytest.importorskip("pyreadstat")
pytest.importorskip("openpyxl")

QUESTIONS = {q["id"]: q for q in EVERY_TYPE["questions"]}
WRITTEN = ("dta", "sav", "xlsx")


def results(live_server, *arguments: str):
    from ldpsurvey.cli import main

    return CliRunner().invoke(main, ["results", "--url", live_server, *arguments])


@pytest.fixture
def one_question(client, auth, live_server, researcher_key, monkeypatch, tmp_path, request):
    """A survey of the one question `request.param` (EVERY_TYPE's), 60 responses released;
    its plain CSV and codebook as served in tmp_path; returns (survey id, the CLI runner)."""
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    question = QUESTIONS[request.param]
    survey_id = every_type_answered(client, auth, 60, {
        "title": f"Only =HYPERLINK(\"{question['id']}\")", "release_batch": 1,
        "questions": [question]})
    for name, path in (("labels.csv", "export.csv"), ("codebook.json", "codebook.json")):
        (tmp_path / name).write_bytes(
            client.get(f"/api/surveys/{survey_id}/{path}", headers=auth).get_data())
    return survey_id, lambda *arguments: results(live_server, "--survey", survey_id,
                                                 *arguments)


@pytest.mark.parametrize("one_question", list(QUESTIONS), indirect=True)
def test_every_type_reads_back_from_every_format(one_question, tmp_path):
    """Stata, SPSS and Excel files read back by read_export into the frame the plain CSV
    gives (same rows, same order, options as categories), with the same mechanisms; the Stata
    and SPSS files carry the question's text as its variable label and the options as value
    labels, SPSS the measurement level; the workbook holds no formula. Its numbers are
    openpyxl's, to 16 significant digits (Excel keeps 15)."""
    import pyreadstat

    from ldpsurvey.analysis import read_export

    _, run = one_question
    book = json.loads((tmp_path / "codebook.json").read_text())
    question = book["questions"][0]
    names = question.get("columns", [question["id"]])
    expected, mechanisms = read_export(tmp_path / "labels.csv", tmp_path / "codebook.json")
    for kind in WRITTEN:
        path = tmp_path / f"survey.{kind}"
        written = run("--output", str(path))
        assert written.exit_code == 0, written.output
        assert written.stderr.endswith(f"60 responses written to {path}\n")
        frame, found = read_export(path, tmp_path / "codebook.json")
        assert list(frame.columns) == names, kind
        for name in names:
            assert frame[name].dtype == expected[name].dtype, (kind, name)
            if kind == "xlsx" and frame[name].dtype.kind == "f":  # openpyxl: %.16g
                assert frame[name].tolist() == pytest.approx(expected[name].tolist(),
                                                             rel=1e-15, abs=0), name
            else:
                assert frame[name].tolist() == expected[name].tolist(), (kind, name)
        assert found == mechanisms, kind
        if kind == "xlsx":
            with zipfile.ZipFile(path) as archive:
                sheets = [archive.read(n) for n in archive.namelist() if "worksheets/" in n]
            assert len(sheets) == 2 and not any(b"<f>" in sheet for sheet in sheets)
            continue
        _, meta = (pyreadstat.read_dta if kind == "dta" else pyreadstat.read_sav)(path)
        assert meta.column_names == names
        assert meta.column_names_to_labels[question["id"] if question["id"] in names
                                           else names[0]].startswith(question["text"])
        answer = question["id"] if question["id"] in names and question["options"] else None
        labels = {o["code"]: o["label"] for o in question["options"]}
        assert meta.variable_value_labels == ({answer: labels} if answer else {}), kind
        assert meta.file_label.startswith("Only =HYPERLINK")
        if kind == "sav":
            scale = question["type"] == "numeric"
            assert set(meta.variable_measure.values()) == {"scale" if scale else "nominal"}


@pytest.mark.parametrize("one_question", list(QUESTIONS), indirect=True)
def test_every_type_runs_in_r_with_its_design(one_question, tmp_path, client, auth):
    """The .R export runs in R: it reads its CSV (the plain CSV's rows with codes), each
    answer a factor with the option labels, and builds `design`; for forced response the
    rr and RRreg arguments give the server's unbiased estimates (P(report j) = (1 - sum p) pi_j
    + p_j: RRreg's FR model, rr's forced-known p, p1, p0), for a concept the composed layers."""
    rscript = shutil.which("Rscript")
    require(rscript is not None, "R is not installed (apt-get install r-base-core)")
    survey_id, run = one_question
    path = tmp_path / "survey.R"
    written = run("--output", str(path))
    assert written.exit_code == 0, written.output
    assert "survey-data.csv" in written.stderr and path.read_bytes().isascii()
    book = json.loads((tmp_path / "codebook.json").read_text())["questions"][0]
    qid, names = book["id"], book.get("columns", [book["id"]])
    check = tmp_path / "check.R"
    check.write_text(f"""source("survey.R", chdir = TRUE)
x <- responses[[{json.dumps(qid if qid in names else names[0])}]]
d <- design[[{json.dumps(qid)}]]
out <- list(n = nrow(responses), columns = names(responses), levels = levels(x),
            label = attr(x, "label"), design = names(design), scheme = d$scheme)
if (!is.null(d$RRreg) && d$RRreg$model == "FR") {{
  y <- codes(x)
  out$fr <- sapply(seq_along(d$RRreg$p), function(j)
    (mean(y == j - 1) - d$RRreg$p[j]) / (1 - sum(d$RRreg$p)))
}}
if (!is.null(d[["rr"]])) out$rr <- (mean(codes(x)) - d[["rr"]]$p1) / d[["rr"]]$p
if (!is.null(d$RRreg) && d$RRreg$model == "CDMsym")
  cat(sort(unique(responses[[d$RRreg$group]])), file = "groups.txt", sep = "\\n")
cat(sprintf("rr=%.15g\\n", if (is.null(out$rr)) NA else out$rr), file = "rr.txt")
cat(sprintf("%.15g\\n", if (is.null(out$fr)) numeric(0) else out$fr), file = "fr.txt", sep = "")
cat(out$levels, file = "levels.txt", sep = "\\n")
cat(out$columns, file = "columns.txt", sep = "\\n")
cat(out$n, out$scheme, out$label, file = "facts.txt", sep = "\\n")
""")
    subprocess.run([rscript, str(check)], cwd=tmp_path, check=True, timeout=120)
    question = QUESTIONS[qid]
    n, scheme, label = (tmp_path / "facts.txt").read_text().splitlines()
    assert int(n) == 60 and label.startswith(question["text"])
    assert (tmp_path / "columns.txt").read_text().split() == names
    if scheme == "cheating_detection":
        assert (tmp_path / "groups.txt").read_text().split() == ["1", "2"]
    if book["options"] and qid in names:
        assert (tmp_path / "levels.txt").read_text().splitlines() == \
            [o["label"] for o in book["options"]]
    estimates = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    if scheme == "forced_response":
        p_hat = [o["p_hat"] for o in estimates["questions"][0]["options"]]
        fr = [float(v) for v in (tmp_path / "fr.txt").read_text().split()]
        assert fr == pytest.approx(p_hat, abs=1e-12)
        if question["type"] == "yes_no":
            rr = float((tmp_path / "rr.txt").read_text().split("=")[1])
            assert rr == pytest.approx(p_hat[1], abs=1e-12)


def test_the_documented_export_commands_run(client, auth, live_server, researcher_key,
                                            monkeypatch, tmp_path):
    """docs/exports.md's commands, Python and R, run as written in one folder on the
    every-type survey: the files they read are the commands' own, the Python block's frames
    hold every response, and the R block's estimates are the server's unbiased ones."""
    import shlex

    from ldpsurvey.cli import main

    from helpers import doc_blocks

    survey_id = every_type_answered(client, auth)
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    monkeypatch.setenv("LDP_SURVEY_URL", live_server)
    monkeypatch.chdir(tmp_path)
    (commands,) = doc_blocks("export-files-sh")
    for line in commands.splitlines():
        program, *arguments = shlex.split(line.replace("SURVEY_ID", survey_id))
        assert program == "ldp-survey"
        ran = CliRunner().invoke(main, arguments)
        assert ran.exit_code == 0, (line, ran.output)
        assert ran.stderr.endswith("240 responses written to " + arguments[4] + (
            " (and survey-data.csv, the rows it reads)\n" if line.endswith(".R") else "\n"))
    scope: dict = {}
    exec(doc_blocks("export-files-python")[0], scope)  # the documented snippet itself
    assert len(scope["stata"]) == len(scope["spss"]) == len(scope["sheet"]) == 240
    assert list(scope["stata"]["smoked"].cat.categories) == ["No", "Yes"]
    assert scope["question"] == QUESTIONS["smoked"]["text"]
    assert scope["options"] == {0.0: "No", 1.0: "Yes"} and scope["level"] == "nominal"
    assert len(scope["frame"]) == 240 and "smoked" in scope["mechanisms"]
    rscript = shutil.which("Rscript")
    require(rscript is not None, "R is not installed (apt-get install r-base-core)")
    (block,) = doc_blocks("export-files-r")
    (tmp_path / "docs.R").write_text(block + 'cat(sprintf("%.15g", c(yes, sleep)), sep = "\\n",'
                                             ' file = "estimates.txt")\n')
    subprocess.run([rscript, "docs.R"], cwd=tmp_path, check=True, timeout=120)
    shown = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json["questions"]
    p_hat = {q["id"]: [o["p_hat"] for o in q["options"]] for q in shown}
    estimates = [float(v) for v in (tmp_path / "estimates.txt").read_text().split()]
    assert estimates == pytest.approx([p_hat["smoked"][1], *p_hat["sleep"]], abs=1e-12)


def test_csv_and_jsonl_by_their_ending_are_the_served_exports(live_server, client, auth,
                                                              researcher_key, monkeypatch,
                                                              tmp_path):
    """`--output x.csv` and `--output x.jsonl` need no --csv or --jsonl (it was refused): the
    served bytes, --codes and --format rr too; the flags still write any name."""
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    survey_id = every_type_answered(client, auth, 30)
    served = {query: client.get(f"/api/surveys/{survey_id}/export.{query}",
                                headers=auth).get_data()
              for query in ("csv", "csv?codes=true", "csv?format=rr", "jsonl")}
    for arguments, query in ((["--output", "a.csv"], "csv"),
                             (["--output", "b.CSV", "--codes"], "csv?codes=true"),
                             (["--output", "c.csv", "--format", "rr"], "csv?format=rr"),
                             (["--output", "d.jsonl"], "jsonl"),
                             (["--jsonl", "--output", "e.txt"], "jsonl"),
                             (["--csv", "--output", "f.csv"], "csv")):
        path = tmp_path / arguments[arguments.index("--output") + 1]
        arguments[arguments.index("--output") + 1] = str(path)
        written = results(live_server, "--survey", survey_id, *arguments)
        assert written.exit_code == 0, written.output
        assert path.read_bytes() == served[query], arguments


@pytest.mark.parametrize("kind", ["dta", "sav"])
def test_the_streamed_files_are_pyreadstats_own(tmp_path, kind):
    """Written a chunk at a time (10,000 rows: chunks of 4,096 and a last short one), the
    file is byte for byte the one pyreadstat writes from the whole frame (its clock's minute
    aside), and reads back the same."""
    import random

    import pandas as pd
    import pyreadstat

    from ldpsurvey.cli import stata_spss
    from ldpsurvey.cli.export_files import Column

    columns = [Column("smoked", "smoked", "Smoked? \u00e9\u4e2d", {0: "No", 1: "Yes"}, "nominal"),
               Column("steps", "steps", "Steps", {}, "scale"),
               Column("bread_seed", "bread", "Bread [seed]", {}, "nominal")]
    rng = random.Random(5)
    rows = [[rng.randrange(2), rng.uniform(-80, 80), float(rng.randrange(2**32))]
            for _ in range(10_000)]
    write = stata_spss.write_dta if kind == "dta" else stata_spss.write_sav
    assert write(str(tmp_path / f"streamed.{kind}"), columns, iter(rows), "A title") == 10_000
    frame = pd.DataFrame(rows, columns=[c.name for c in columns]).astype({"smoked": "int32"})
    metadata = {"column_labels": [c.label for c in columns], "file_label": "A title",
                "variable_value_labels": {"smoked": {0: "No", 1: "Yes"}}}
    if kind == "sav":
        metadata["variable_measure"] = {c.name: c.measure for c in columns}
    else:
        metadata["version"] = 14  # format 118, what Stata 14 reads
    (pyreadstat.write_dta if kind == "dta" else pyreadstat.write_sav)(
        frame, tmp_path / f"whole.{kind}", **metadata)
    streamed, whole = ((tmp_path / f"{name}.{kind}").read_bytes() for name in ("streamed", "whole"))
    clock = (slice(0x71, 0x90) if kind == "dta" else slice(84, 101))  # a timestamp
    assert len(streamed) == len(whole)
    assert streamed[:clock.start] + streamed[clock.stop:] == whole[:clock.start] + whole[clock.stop:]
    back, meta = (pyreadstat.read_dta if kind == "dta" else pyreadstat.read_sav)(
        tmp_path / f"streamed.{kind}")
    assert back.to_numpy().tolist() == frame.to_numpy().tolist()
    assert meta.column_labels[0] == "Smoked? \u00e9\u4e2d" and meta.file_label == "A title"


@pytest.mark.parametrize("kind", ["dta", "sav", "xlsx", "R"])
def test_a_writer_holds_a_chunk_not_the_rows(tmp_path, kind):
    """50,000 rows of 25 columns streamed into each writer: the Python memory it allocates
    (tracemalloc's peak, once pandas and ReadStat have loaded what they load on first use)
    stays under 6 MB, where the rows as a list would take over 30 MB; the file holds every
    row."""
    import tracemalloc

    from ldpsurvey.cli import r_script, stata_spss, workbook
    from ldpsurvey.cli.export_files import Column

    columns = [Column("q0", "q0", "Q?", {0: "No", 1: "Yes"}, "nominal")] + [
        Column(f"q0_{i}", "q0", f"Q? [{i}]", {}, "scale") for i in range(24)]
    book = {"title": "T", "survey_id": "s", "key_id": "k", "release_batch": 1,
            "total_epsilon": 1.0, "released": 50_000, "last_release": 1, "values": "v",
            "central": {"epsilon_per_release": 1.0}, "questions": [
                {"id": "q0", "text": "Q?", "type": "yes_no", "cells": "c", "columns": [
                    c.name for c in columns], "options": [
                    {"code": 0, "label": "No", "csv_value": "No"},
                    {"code": 1, "label": "Yes", "csv_value": "Yes"}]}]}
    rows = ([n % 2, *(float(n + i) / 7 for i in range(24))] for n in range(50_000))
    path = str(tmp_path / f"big.{kind}")
    write = {"dta": lambda: stata_spss.write_dta(path, columns, rows, "T"),
             "sav": lambda: stata_spss.write_sav(path, columns, rows, "T"),
             "xlsx": lambda: workbook.write_xlsx(path, book, columns, rows),
             "R": lambda: r_script.write_r(path, book, {"q0": {"alpha": 0.5, "beta": [0.5, 0.5]}},
                                           columns, rows)}[kind]
    if kind in ("dta", "sav"):  # what pandas and ReadStat load on first use: not per row
        stata_spss.dictionary(kind, columns, "T")
    tracemalloc.start()
    try:
        assert write() == 50_000
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 6 * 2**20, peak


def test_a_name_stata_cannot_take_is_refused_in_one_line(live_server, client, auth,
                                                         researcher_key, monkeypatch, tmp_path):
    """A question id that is a Stata reserved word (`in`) or longer than its 32 characters:
    .dta is refused in one line naming the column, and no file is left; SPSS takes both, and
    the R script names them where R would not take them bare (`in`)."""
    monkeypatch.setenv("LDP_SURVEY_KEY", researcher_key)
    long_id = "a" * 40
    survey_id = every_type_answered(client, auth, 20, {
        "title": "Names", "release_batch": 1, "questions": [
            {"id": "in", "text": "In?", "type": "yes_no", "alpha": 0.5},
            {"id": long_id, "text": "Long?", "type": "yes_no", "alpha": 0.5}]})
    refused = results(live_server, "--survey", survey_id, "--output", str(tmp_path / "x.dta"))
    assert refused.exit_code == 1 and refused.stderr.count("\n") == 1, refused.output
    assert "column 'in': a provided name is a reserved word" in refused.stderr
    assert not (tmp_path / "x.dta").exists()
    for name in ("x.sav", "x.R"):
        written = results(live_server, "--survey", survey_id, "--output", str(tmp_path / name))
        assert written.exit_code == 0, written.output
    rscript = shutil.which("Rscript")
    require(rscript is not None, "R is not installed (apt-get install r-base-core)")
    out = subprocess.run([rscript, "-e", 'source("x.R"); cat(levels(responses[["in"]]), '
                          'names(design), design$`in`$rr$design)'], cwd=tmp_path, check=True,
                         capture_output=True, text=True, timeout=120).stdout
    assert out.split() == ["No", "Yes", "in", long_id, "forced-known"]
