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
