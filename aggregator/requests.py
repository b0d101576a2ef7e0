"""Reading request bodies and headers strictly."""

import re
from typing import Any

from flask import current_app, request

from ldpsurvey.shared import strict_json

from .errors import ApiError

IDEMPOTENCY_KEY = re.compile(r"[A-Za-z0-9_.:-]{8,128}")
TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}")


def json_body(limit_config: str | None = None) -> Any:
    """The request's JSON body: 415 unless application/json, 413 over the size limit,
    400 unless strict JSON (no duplicate keys, NaN or Infinity)."""
    if request.mimetype != "application/json":
        raise ApiError(415, "unsupported_media_type", "send the body as application/json")
    limit = current_app.config[limit_config] if limit_config else None
    if limit is not None and (request.content_length or 0) > limit:
        raise ApiError(413, "body_too_large", f"the body is limited to {limit} bytes")
    raw = request.get_data(cache=False)
    if limit is not None and len(raw) > limit:
        raise ApiError(413, "body_too_large", f"the body is limited to {limit} bytes")
    try:
        return strict_json.loads(raw)
    except ValueError as exc:
        raise ApiError(400, "invalid_json", str(exc)[:200]) from None


def idempotency_key() -> str | None:
    """The optional Idempotency-Key header: 8 to 128 characters of [A-Za-z0-9_.:-]."""
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not IDEMPOTENCY_KEY.fullmatch(key):
        raise ApiError(400, "invalid_idempotency_key",
                       "Idempotency-Key must be 8 to 128 characters of A-Z a-z 0-9 _ . : -")
    return key


def invitation_token() -> str:
    """The Survey-Token header an invitation-only survey requires (sent as a header, never in
    a URL, so it cannot reach access logs)."""
    token = request.headers.get("Survey-Token")
    if token is None:
        raise ApiError(401, "token_required", "this survey is by invitation only: send the "
                       "invitation token in the Survey-Token header")
    if not TOKEN.fullmatch(token):
        raise ApiError(403, "invalid_token", "this invitation token is unknown or already used")
    return token
