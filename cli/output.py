"""Printing results: a plain table for people, exact JSON for machines."""

import json
from collections.abc import Mapping, Sequence
from typing import Any

import click


def format_value(value: Any) -> str:
    """Numbers to 6 significant digits, None as '-', the rest as text."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def table(rows: Sequence[Sequence[Any]], header: Sequence[str] | None = None) -> str:
    """Left-aligned columns separated by two spaces."""
    cells = [[format_value(v) for v in row] for row in rows]
    if header:
        cells.insert(0, list(header))
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in cells]
    if header:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2))


def emit(record: Mapping[str, Any], as_json: bool) -> None:
    """Print one record: JSON with exactly its keys, or a key/value table."""
    if as_json:
        emit_json(record)
    else:
        click.echo(table(list(record.items())))
