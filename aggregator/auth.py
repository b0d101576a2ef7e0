"""Researcher and relay API keys. A key is shown once when created; only its SHA-256 is stored.

Requests carry it as `Authorization: Bearer <key>`.
"""

import secrets
from collections.abc import Callable
from functools import wraps

from flask import request, session

from .db import Connection, get_db
from .errors import ApiError
from .store import hash_text  # keys are 256-bit random: no salt or stretching needed

ROLES = ("researcher", "relay")


def create_key(db: Connection, role: str = "researcher") -> str:
    """Mint a key for `role`, store its hash, return the key (the only time it exists)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    key = f"ldp_{role[:3]}_{secrets.token_urlsafe(32)}"
    with db.transaction():
        db.execute("INSERT INTO api_keys (key_hash, role) VALUES (?, ?)", (hash_text(key), role))
    return key


def role_of_key(key: str) -> str | None:
    """The role of an API key, or None if it is unknown."""
    if not key:
        return None
    rows = get_db().query("SELECT role FROM api_keys WHERE key_hash = ?", (hash_text(key),))
    return rows[0][0] if rows else None


def request_role() -> str | None:
    """The role of this request: its bearer key's, or, for reading (GET) only, that of the
    researcher session the results page's login set. None without either."""
    header = request.headers.get("Authorization")
    if header is None:
        return session.get("role") if request.method == "GET" else None
    scheme, _, key = header.partition(" ")
    return role_of_key(key.strip()) if scheme.lower() == "bearer" else None


def require_key(*roles: str) -> Callable:
    """Decorator: 401 without a key, 403 with a key of another role."""

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(*args, **kwargs):
            role = request_role()
            if role is None:
                raise ApiError(401, "unauthorized", "a valid API key is required "
                               "(Authorization: Bearer <key>)")
            if role not in roles:
                raise ApiError(403, "forbidden", f"this needs a {' or '.join(roles)} key")
            return view(*args, **kwargs)

        return wrapped

    return decorator
