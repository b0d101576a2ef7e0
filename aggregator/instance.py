"""Secrets that development keeps in the instance folder, created on first start (mode 0600)."""

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def private_file(path: Path, make: Callable[[], bytes]) -> bytes:
    """The file's bytes; if it does not exist, write make() to it, readable only by its owner.

    Written to a temporary file of its own, fsynced, then hard-linked into place: atomic, and a
    file that another worker or thread created first is never replaced (its content wins).
    """
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    temporary = Path(name)
    with os.fdopen(descriptor, "wb") as file:
        file.write(make())
        file.flush()
        os.fsync(file.fileno())
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass
    finally:
        temporary.unlink()
    return path.read_bytes()
