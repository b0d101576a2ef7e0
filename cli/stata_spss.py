"""Stata (.dta) and SPSS (.sav) files, streamed in bounded memory.

pyreadstat (ReadStat) writes these formats from a whole data frame. Here it writes the file
for no rows, which holds everything but the data: variable names, types, variable labels (the
question text), value labels (the options) and, for SPSS, measurement levels. The rows are
then packed into the place the format keeps them, a chunk at a time, and the row count (and
for Stata the offsets of the sections after the data) patched in: the bytes pyreadstat writes
for the same frame, but at any number of rows in the memory of one chunk
(tests/test_export_files.py compares the two).

Layouts (uncompressed, ReadStat's byte order):
- Stata 118 (Stata's "Description of .dta file format", dta_118): `<N>` holds the row
  count (8 bytes); `<map>` 14 offsets, of which the 11th to the 14th (strls, value_labels,
  </stata_dta>, end of file) follow the data; `<data>` holds rows of fixed width, each
  variable by its `<variable_types>` code (65528 long: 4 bytes, 65526 double: 8).
- SPSS system file (the PSPP manual, "System File Format"): the header's ncases (int32 at
  offset 80) and the extended case count record (type 7, subtype 16: two int64, the second
  the count); the rows follow the dictionary termination record, 8 bytes per numeric value.
"""

import os
import struct
import tempfile
from collections.abc import Iterable

from ldpsurvey.cli.export_files import Column, WriteError

ROWS_PER_CHUNK = 4096
STATA_TYPES = {65528: "i", 65526: "d"}  # long, double: what pyreadstat writes int32, float64 as
SPSS_CASES_OFFSET = 80  # the header's int32 ncases
SPSS_CASES_RECORD = struct.pack("<4i", 7, 16, 8, 2)  # then int64 1, int64 ncases


def write_dta(path: str, book_columns: list[Column], rows: Iterable[list], label: str) -> int:
    """A Stata 14+ file (format 118) at `path`: answer columns long with value labels, every
    other column double, each variable labelled with its column's label; the rows written
    a chunk at a time. The number of rows."""
    template = dictionary("dta", book_columns, label)
    if template[template.index(b"<byteorder>") + 11:][:3] != b"LSF":
        raise WriteError("ReadStat wrote a big-endian file: not handled here")
    start = template.index(b"<data>") + len(b"<data>")
    types = template[template.index(b"<variable_types>") + 16:template.index(b"</variable_types>")]
    row_format = "<" + "".join(STATA_TYPES[code] for code, in struct.iter_unpack("<H", types))
    with open(path, "w+b") as out:
        out.write(template[:start])
        count, size = _write_rows(out, row_format, rows)
        out.write(template[start:])
        _patch(out, template.index(b"<N>") + 3, "<Q", lambda _: count)
        offsets = template.index(b"<map>") + 5
        for entry in range(10, 14):  # the sections after <data>
            _patch(out, offsets + 8 * entry, "<Q", lambda old: old + size)
    return count


def write_sav(path: str, book_columns: list[Column], rows: Iterable[list], label: str) -> int:
    """An SPSS system file at `path` (uncompressed): every variable numeric (8 bytes) with
    its column's label, value labels for answer columns and its measurement level; the rows
    written a chunk at a time. The number of rows."""
    template = dictionary("sav", book_columns, label)
    if struct.unpack_from("<i", template, 64)[0] != 2:  # layout_code: 2 little-endian
        raise WriteError("ReadStat wrote a big-endian file: not handled here")
    with open(path, "w+b") as out:
        out.write(template)
        count, _ = _write_rows(out, "<" + "d" * len(book_columns), rows)
        _patch(out, SPSS_CASES_OFFSET, "<i", lambda _: count if count < 2**31 else -1)
        _patch(out, template.index(SPSS_CASES_RECORD) + 24, "<q", lambda _: count)
    return count


def dictionary(kind: str, book_columns: list[Column], label: str) -> bytes:
    """The file pyreadstat writes for no rows (kind dta or sav): everything but the data.
    WriteError naming a column the format cannot take."""
    import pandas as pd
    import pyreadstat

    frame = pd.DataFrame({c.name: pd.Series([], dtype="int32" if c.codes else "float64")
                          for c in book_columns})
    metadata = {"column_labels": [c.label for c in book_columns],
                "variable_value_labels": {c.name: c.options for c in book_columns if c.codes},
                "file_label": label}
    if kind == "sav":
        write = pyreadstat.write_sav
        metadata["variable_measure"] = {c.name: c.measure for c in book_columns}
    else:
        write = pyreadstat.write_dta
        metadata["file_label"] = label[:80]  # Stata's dataset label: 80 characters at most
        metadata["version"] = 14  # format 118: Stata 14 and later read it (119 needs 15)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"dictionary.{kind}")
        try:
            write(frame, path, **metadata)
        except pyreadstat.ReadstatError as error:
            raise WriteError(_blame(write, frame, error, path)) from None
        with open(path, "rb") as written:
            return written.read()


def _blame(write, frame, error: Exception, scratch: str) -> str:
    """ReadStat's refusal in one line naming the column it refuses, where one alone is."""
    import pyreadstat

    for name in frame.columns:
        try:
            write(frame[[name]], scratch)
        except pyreadstat.ReadstatError as alone:
            return (f"column {name!r}: {str(alone).lower()} (rename the question to export "
                    "this format)")
    return str(error)


def _write_rows(out, row_format: str, rows: Iterable[list]) -> tuple[int, int]:
    """Rows packed by `row_format`, written ROWS_PER_CHUNK at a time: (rows, bytes)."""
    pack = struct.Struct(row_format).pack
    count = size = 0
    chunk: list[bytes] = []
    for row in rows:
        chunk.append(pack(*row))
        count += 1
        if len(chunk) == ROWS_PER_CHUNK:
            size += out.write(b"".join(chunk))
            chunk = []
    size += out.write(b"".join(chunk))
    return count, size


def _patch(out, offset: int, layout: str, change) -> None:
    """Rewrite the number at `offset` (struct `layout`) with change(old)."""
    out.seek(offset)
    old, = struct.unpack(layout, out.read(struct.calcsize(layout)))
    out.seek(offset)
    out.write(struct.pack(layout, change(old)))
