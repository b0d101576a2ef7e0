"""Researcher and relay API keys. A key is shown once when created; only its SHA-256 is stored.

Requests carry it as `Authorization: Bearer <key>`; the results page's login keeps the role in
a session cookie instead.
"""

import secrets
from collections.abc import Callable
from functools import wraps

from flask import request, session

from ldpsurvey.shared.protocol import ROLES

from . import store
from .database import Connection
from .db import get_db
from .exceptions import Forbidden, Unauthorized


def create_key(db: Connection, role: str = "researcher") -> str:
    """Mint a key for `role`, store its hash, return the key (the only time it exists)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    key = f"ldp_{role[:3]}_{secrets.token_urlsafe(32)}"
    store.insert_api_key(db, key, role)
    return key


def role_of_key(key: str) -> str | None:
    """The role of an API key, or None if it is unknown."""
    return store.role_of_key(get_db(), key) if key else None


def request_role() -> str | None:
    """The role of this request: its bearer key's, or, for reading (GET) only, that of the
    researcher session the results page's login set. None without either."""
    header = request.headers.get("Authorization")
    if header is None:
        return session.get("role") if request.method == "GET" else None
    scheme, _, key = header.partition(" ")
    return role_of_key(key.strip()) if scheme.lower() == "bearer" else None


def require_key(*roles: str) -> Callable:
    """Decorator: Unauthorized (401) without a key, Forbidden (403) with a key of another role."""

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(*args, **kwargs):
            role = request_role()
            if role is None:
                raise Unauthorized("a valid API key is required (Authorization: Bearer <key>)")
            if role not in roles:
                raise Forbidden(f"this needs a {' or '.join(roles)} key")
            return view(*args, **kwargs)

        return wrapped

    return decorator
