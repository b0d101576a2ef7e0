"""Who is calling: the API key of `Authorization: Bearer <key>`, or, for reading (GET, HEAD)
only,
the key behind the results page's session. See accounts.py for keys and sessions, access.py
for what each may do with a survey."""

from collections.abc import Callable
from functools import wraps

from flask import request, session

from ldpsurvey.aggregator.exceptions import Forbidden, Unauthorized
from ldpsurvey.aggregator.services import accounts
from ldpsurvey.aggregator.store.accounts import KeyRecord
from ldpsurvey.aggregator.web.request_connection import get_db

PEOPLE = ("researcher", "admin")  # the roles of keys held by people rather than programs


def request_caller() -> KeyRecord | None:
    """The key this request acts with, or None without a valid one."""
    header = request.headers.get("Authorization")
    if header is None:
        return session_caller() if request.method in ("GET", "HEAD") else None
    scheme, _, key = header.partition(" ")
    return accounts.key_in_use(get_db(), key.strip()) if scheme.lower() == "bearer" else None


def session_caller() -> KeyRecord | None:
    """The key behind the results page's session, while the session lives."""
    session_id = session.get("sid")
    return accounts.session_key(get_db(), session_id) if isinstance(session_id, str) else None


def require_key(*roles: str) -> Callable:
    """Decorator: Unauthorized (401) without a key, Forbidden (403) with a key of another role;
    the view gets the key's record as its `caller` argument."""

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(*args, **kwargs):
            caller = request_caller()
            if caller is None:
                raise Unauthorized("a valid API key is required (Authorization: Bearer <key>)")
            if caller.role not in roles:
                raise Forbidden(f"this needs a {' or '.join(roles)} key")
            return view(*args, caller=caller, **kwargs)

        return wrapped

    return decorator
