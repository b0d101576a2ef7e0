"""Secrets that development keeps in the instance folder, created on first start (mode 0600)."""

import os
from collections.abc import Callable
from pathlib import Path


def private_file(path: Path, make: Callable[[], bytes]) -> bytes:
    """The file's bytes; if it does not exist, write make() to it, readable only by its owner.

    Written to a temporary file, fsynced, then hard-linked into place: atomic, and a file that
    another worker created first is never replaced (its content wins).
    """
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
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
