"""HTTP glue the blueprints share: reading bodies, headers and query parameters strictly, and
shaping the answer to an accepted submission."""

import json
from typing import Any

from flask import Response, current_app, request

from ldpsurvey.shared import strict_json
from ldpsurvey.shared.protocol import IDEMPOTENCY_KEY, REPLAYED_HEADER

from .exceptions import (
    BodyTooLarge,
    InvalidIdempotencyKey,
    InvalidUnicode,
    MalformedJson,
    UnsupportedMediaType,
)
from .intake import Accepted


def json_body(limit_config: str | None = None) -> Any:
    """The request's JSON body: UnsupportedMediaType unless application/json, BodyTooLarge
    over the size limit, MalformedJson unless strict JSON (no duplicate keys, NaN or Infinity),
    InvalidUnicode for a string with a lone surrogate."""
    if request.mimetype != "application/json":
        raise UnsupportedMediaType()
    limit = current_app.config[limit_config] if limit_config else None
    if limit is not None and (request.content_length or 0) > limit:
        raise BodyTooLarge(limit)
    raw = request.get_data(cache=False)
    if limit is not None and len(raw) > limit:
        raise BodyTooLarge(limit)
    try:
        return strict_json.loads(raw)
    except strict_json.InvalidUnicode as exc:
        raise InvalidUnicode(str(exc)) from None
    except ValueError as exc:
        raise MalformedJson(str(exc)[:200]) from None


def idempotency_key() -> str | None:
    """The optional Idempotency-Key header (shared.protocol.IDEMPOTENCY_KEY)."""
    key = request.headers.get("Idempotency-Key")
    if key is not None and not IDEMPOTENCY_KEY.fullmatch(key):
        raise InvalidIdempotencyKey()
    return key


def survey_token() -> str | None:
    """The Survey-Token header, if sent (a header, never a URL, so it cannot reach access
    logs); intake checks it against the survey."""
    return request.headers.get("Survey-Token")


def created(result: Accepted) -> Response:
    """201 with the count stored, as compact JSON with sorted keys, as jsonify writes it
    (built here without jsonify's machinery: it is every submission's reply); a replayed
    idempotent request says so in a header."""
    body = json.dumps({"accepted": result.accepted, "survey_id": result.survey_id},
                      separators=(",", ":"))
    response = Response(body + "\n", 201, mimetype="application/json")
    if result.replayed:
        response.headers[REPLAYED_HEADER] = "true"
    return response
