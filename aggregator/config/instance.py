"""The instance folder (mode 0700) and what development keeps there: secrets created on first
start (mode 0600) and the SQLite file (0600; SQLite gives its -wal and -shm the same mode)."""

import contextlib
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
    private_folder(path.parent)
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


def private_folder(path: Path) -> None:
    """Create the folder, readable only by its owner, if it does not exist."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)


def private_database_file(path: Path) -> None:
    """Create an empty SQLite file readable only by its owner, if none exists."""
    private_folder(path.parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def exposed(path: Path) -> bool:
    """Whether the file can be read (or written) by its group or by others."""
    return bool(os.stat(path).st_mode & 0o077)
