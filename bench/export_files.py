"""The export writers at 10^6 responses: per format the seconds and the peak resident memory
of a process streaming the rows into the writer `results --output FILE` uses, beside a
do-nothing baseline (the same stream read and parsed, nothing written) and the server's CSV
writer (aggregator.services.exports.to_csv, what export.csv streams).

    pip install -e '.[all]'
    python bench/export_files.py [--rows 1000000] [--formats nothing,csv,dta,sav,xlsx,R]

The survey is the tests' every-type survey (tests/helpers.EVERY_TYPE: 17 questions, one of
each type, mechanism and design; 25 columns), published on an in-process aggregator (SQLite)
with POOL responses randomized on this side; its JSON lines export and codebook, as served,
are the input. Each measured process reads the JSON lines again and again up to --rows
(the pool's lines in their order, so every report the writer sees is a real one) and writes
the format through the CLI's own functions (export_files.read_lines, rows, and the writer),
exactly as after the HTTP stream; it runs under /usr/bin/time, whose %M is its peak RSS.
The HTTP side adds a constant: the client reads the export in pieces
(tests/test_export_streaming.py measures the server's side).
"""

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POOL = 6_000  # distinct responses: more than export_files.CACHED_REPORTS
BATCH = 2_000


def prepare(folder: Path) -> None:
    """export.jsonl and codebook.json of the every-type survey with POOL responses."""
    sys.path.insert(0, str(ROOT / "tests"))
    from ldpsurvey.aggregator import close_app, create_api_key, create_app
    from ldpsurvey.aggregator.web.limits import SETTINGS

    from helpers import EVERY_TYPE, every_type_answered

    os.environ.update(dict.fromkeys([f"LDP_SURVEY_{name}" for name in SETTINGS.values()],
                                    "1000000 per minute"))  # one client posts it all
    app = create_app({"DATABASE_URL": f"sqlite:///{folder / 'pool.db'}"},
                     instance_path=folder / "instance")
    try:
        client, key = app.test_client(), create_api_key(app).key
        auth = {"Authorization": f"Bearer {key}"}
        survey_id = every_type_answered(client, auth, POOL, EVERY_TYPE)
        for name in ("export.jsonl", "codebook.json"):
            (folder / name).write_bytes(
                client.get(f"/api/surveys/{survey_id}/{name}", headers=auth).get_data())
    finally:
        close_app(app)


def lines(folder: Path, rows: int):
    """The JSON lines export's first line, then `rows` response lines, the pool's again and
    again."""
    with open(folder / "export.jsonl", "rb") as served:
        head, *pool = served.read().splitlines()
    yield head
    yield from itertools.islice(itertools.cycle(pool), rows)


def write(kind: str, folder: Path, rows: int) -> None:
    """One measured run: the rows streamed into the writer of `kind`."""
    from ldpsurvey.cli import export_files, r_script, stata_spss, workbook

    book = json.loads((folder / "codebook.json").read_text())
    columns = export_files.columns(book)
    survey, head, answers = export_files.read_lines(lines(folder, rows))
    path = str(folder / f"out.{kind}")
    if kind == "csv":
        from ldpsurvey.aggregator.services.exports import to_csv

        stored = (json.dumps(answer, separators=(",", ":")) for answer in answers)
        with open(path, "w", encoding="utf-8") as out:
            for piece in to_csv(survey, stored):
                out.write(piece)
        return
    cells = export_files.rows(survey, columns, answers)
    if kind == "nothing":
        for _ in cells:
            pass
    elif kind in ("dta", "sav"):
        (stata_spss.write_dta if kind == "dta" else stata_spss.write_sav)(
            path, columns, cells, book["title"])
    elif kind == "xlsx":
        workbook.write_xlsx(path, book, columns, cells)
    else:
        r_script.write_r(path, book, head["parameters"], columns, cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--formats", default="nothing,csv,dta,sav,xlsx,R")
    parser.add_argument("--write", help=argparse.SUPPRESS)  # a measured run's kind
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        write(args.write, Path(args.folder), args.rows)
        return
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        prepare(folder)
        print(f"load average before: {os.getloadavg()[0]:.1f}")
        print("| rows | format | seconds | peak RSS (MiB) | file (MiB) |")
        print("|---|---|---|---|---|")
        for kind in args.formats.split(","):
            start = time.perf_counter()
            ran = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, __file__,
                                  "--write", kind, "--rows", str(args.rows), "--folder",
                                  str(folder)], capture_output=True, text=True, check=True)
            seconds = time.perf_counter() - start
            peak = int(ran.stderr.split()[-1]) * 1024
            written = list(folder.glob("out*"))  # out.R and out-data.csv for R
            size = sum(p.stat().st_size for p in written) / 2**20
            name = {"nothing": "nothing (read, parse, no writer)",
                    "csv": "csv (the server's writer)"}.get(kind, kind)
            print(f"| {args.rows:,} | {name} | {seconds:.0f} | {peak / 2**20:.0f} | "
                  f"{size:.0f} |", flush=True)
            for path in written:
                path.unlink()
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
