"""JSON parsing that refuses what Python's json module lets through silently."""

import json
from typing import Any


class StrictJSONError(ValueError):
    """The text is not strict JSON (syntax, duplicate keys, NaN or Infinity)."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise StrictJSONError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    raise StrictJSONError(f"{name} is not valid JSON")


def loads(text: str | bytes) -> Any:
    """Parse JSON, refusing duplicate object keys and the non-standard NaN/Infinity."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except StrictJSONError:
        raise
    except (ValueError, RecursionError) as exc:  # syntax, encoding, over-long integers
        raise StrictJSONError(f"not valid JSON: {exc}") from None


def dumps(value: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, no spaces, UTF-8; floats round-trip exactly."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode()
