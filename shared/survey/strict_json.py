"""JSON parsing that refuses what Python's json module lets through silently."""

import json
import re
from typing import Any

SURROGATE = re.compile("[\ud800-\udfff]")


class StrictJSONError(ValueError):
    """The text is not strict JSON (syntax, duplicate keys, NaN or Infinity)."""


class InvalidUnicode(StrictJSONError):
    """A string escapes half of a UTF-16 surrogate pair alone (\\ud800): valid JSON syntax,
    but no Unicode text (RFC 8259 section 8.2), which no database can store."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The object, unless a key repeats (then fewer entries than pairs): the first repeated
    key named."""
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise StrictJSONError(f"duplicate key {key!r}")
            seen.add(key)
    return result


def _no_constant(name: str) -> Any:
    raise StrictJSONError(f"{name} is not valid JSON")


def loads(text: str | bytes) -> Any:
    """Parse JSON, refusing duplicate object keys, the non-standard NaN/Infinity and (as
    InvalidUnicode) strings with a lone surrogate."""
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except StrictJSONError:
        raise
    except (ValueError, RecursionError) as exc:  # syntax, encoding, over-long integers
        raise StrictJSONError(f"not valid JSON: {exc}") from None
    if _may_hold_surrogate(text):
        _check_unicode(value)
    return value


def _may_hold_surrogate(text: str | bytes) -> bool:
    """Whether parsing `text` can give a string with a surrogate: only through a \\u escape
    or a character outside ASCII (json.loads decodes bytes with surrogatepass), so ASCII
    without "\\u" cannot, and the walk over every string is skipped. Bytes with a NUL may be
    UTF-16 or UTF-32 (json.detect_encoding), whose escapes are not contiguous: walked."""
    if isinstance(text, bytes):
        return not text.isascii() or b"\\u" in text or b"\0" in text
    return not text.isascii() or "\\u" in text


def _check_unicode(value: Any) -> None:
    """InvalidUnicode if a string in `value`, key or value, holds a surrogate (an iterative
    walk: a document as deep as the parser allows must not overflow the stack here)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and (found := SURROGATE.search(item)):
            raise InvalidUnicode(f"the string {item[:40]!a} holds the lone surrogate "
                                 f"U+{ord(found.group()):04X}: half of a UTF-16 pair is no "
                                 "Unicode text")


def dumps(value: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, no spaces, UTF-8; floats round-trip exactly."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode()
