"""The respondent's small local store: pinned aggregator keys and memoized randomized answers.

One JSON file in the user data folder, mode 0600, replaced atomically on every write. It
never holds a true answer: only what was, or will be, sent.
"""

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


def default_path() -> Path:
    """$LDP_SURVEY_CLIENT_DIR, else the platform's per-user data folder, + /state.json."""
    if "LDP_SURVEY_CLIENT_DIR" in os.environ:
        base = Path(os.environ["LDP_SURVEY_CLIENT_DIR"])
    elif sys.platform == "win32":
        base = Path(os.environ.get("APPDATA", Path.home())) / "ldp-survey"
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support" / "ldp-survey"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
        base = base / "ldp-survey"
    return base / "state.json"


class LocalState:
    """Pinned keys per aggregator URL, and per (aggregator, survey) the randomized answers and
    idempotency key of the one submission this device makes."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path else default_path()
        try:
            self._data: dict[str, Any] = json.loads(self.path.read_text())
        except FileNotFoundError:
            self._data = {}
        self._data.setdefault("pinned_keys", {})
        self._data.setdefault("surveys", {})

    def pinned_key(self, aggregator: str) -> str | None:
        """The base64 public key pinned for this aggregator URL, if any."""
        return self._data["pinned_keys"].get(aggregator)

    def pin_key(self, aggregator: str, public_key: str) -> None:
        self._data["pinned_keys"][aggregator] = public_key
        self._save()

    def memo(self, aggregator: str, survey_id: str) -> dict[str, Any]:
        """{"answers": {question id: randomized option}, "idempotency_key": str | None,
        "submitted": bool} for this survey on this aggregator (a copy)."""
        entry = self._data["surveys"].get(f"{aggregator} {survey_id}", {})
        return {"answers": dict(entry.get("answers", {})),
                "idempotency_key": entry.get("idempotency_key"),
                "submitted": bool(entry.get("submitted", False))}

    def remember(self, aggregator: str, survey_id: str, memo: dict[str, Any]) -> None:
        self._data["surveys"][f"{aggregator} {survey_id}"] = memo
        self._save()

    def _save(self) -> None:
        """Write a temporary file (0600) beside the store, fsync it, rename it over the store."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        descriptor, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".state-")
        try:
            with os.fdopen(descriptor, "w") as file:  # mkstemp creates it with mode 0600
                json.dump(self._data, file, indent=1, sort_keys=True)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
