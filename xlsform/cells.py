"""How survey values are spelled in an XLSForm's cells, both ways.

A parameter cell (epsilon, mechanism, beta, ...) holds a TOML value: `1.0`, `[0.4, 0.6]`,
`[{alpha = 0.6, beta = 0.7}]`, or plain text (`oue`), read as text when it is no TOML value.
A flag (disclosed, public_results, invitation_only) takes XLSForm's words for true and false
(yes/no, true/false, true()/false(), 1/0, in any case), as its `required` column does. Numbers
are written as text with every digit of their shortest repr, so that reading them back gives
the same float: pyxform reads a numeric cell to 15 significant digits, and ln 3 has 17.
"""

import json
import math
import re
import tomllib
from typing import Any

TRUE = {"yes", "true", "true()", "1"}
FALSE = {"no", "false", "false()", "0"}
FLAGS = {"disclosed", "invitation_only", "public_results"}
NUMBER = r"(-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
# `. >= A and . <= B`, either way round (what ODK's and Kobo's form builders write)
RANGE = (re.compile(rf"\.\s*>=\s*{NUMBER}\s+and\s+\.\s*<=\s*{NUMBER}"),
         re.compile(rf"\.\s*<=\s*{NUMBER}\s+and\s+\.\s*>=\s*{NUMBER}"))
COUNT_SELECTED = re.compile(r"count-selected\(\s*\.\s*\)\s*<=\s*(\d+)")


def flag(text: str) -> bool | None:
    """An XLSForm boolean cell's value, None when it is neither a true nor a false word."""
    word = text.strip().lower()
    return True if word in TRUE else False if word in FALSE else None


def value(text: str, field: str) -> Any:
    """A parameter cell's value for `field`: a flag's bool (its text if it is no flag word,
    for the survey check to refuse by name), else the TOML value the text spells, else the
    text itself."""
    if field in FLAGS:
        parsed = flag(text)
        return text if parsed is None else parsed
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def inline(item: Any) -> str:
    """`item` as a TOML inline value: lists and tables on one line, floats by their repr."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, dict):
        return "{" + ", ".join(f"{key} = {inline(v)}" for key, v in item.items()) + "}"
    if isinstance(item, list):
        return "[" + ", ".join(inline(v) for v in item) + "]"
    if isinstance(item, str):
        return json.dumps(item, ensure_ascii=False)  # a TOML basic string
    return repr(item)


def text(item: Any, field: str) -> str:
    """The cell text that `value(..., field)` reads back as `item`: text as it is unless it
    would read as another value (then quoted), everything else as a TOML inline value."""
    if isinstance(item, str) and value(item, field) == item:
        return item
    return inline(item)


def number(literal: str) -> int | float:
    """A number in a constraint: an int when written without a point or exponent."""
    return int(literal) if re.fullmatch(r"-?\d+", literal) else float(literal)


def parse_range(constraint: str) -> tuple[int | float, int | float] | None:
    """(A, B) of the constraint `. >= A and . <= B` (either way round), else None."""
    for order, pattern in enumerate(RANGE):
        match = pattern.fullmatch(constraint.strip())
        if match:
            low, high = match.groups()[::-1] if order else match.groups()
            bounds = number(low), number(high)
            return bounds if all(map(math.isfinite, bounds)) else None
    return None


def range_constraint(low: int | float, high: int | float) -> str:
    return f". >= {low!r} and . <= {high!r}"


def parse_count_selected(constraint: str) -> int | None:
    """N of the constraint `count-selected(.) <= N`, else None."""
    match = COUNT_SELECTED.fullmatch(constraint.strip())
    return int(match.group(1)) if match else None


def count_selected_constraint(most: int) -> str:
    return f"count-selected(.) <= {most}"
