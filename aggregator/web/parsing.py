"""HTTP glue the blueprints share: reading bodies, headers and query parameters strictly, and
shaping the answer to an accepted submission."""

import json
from collections.abc import Callable
from typing import Any

from flask import Response, current_app, request
from gunicorn.http.errors import ParseException

from ldpsurvey.aggregator.exceptions import (
    BodyTooLarge,
    InvalidIdempotencyKey,
    InvalidUnicode,
    MalformedJson,
    UnsupportedMediaType,
)
from ldpsurvey.aggregator.services.intake import Accepted
from ldpsurvey.shared.http_contract import IDEMPOTENCY_KEY, REPLAYED_HEADER
from ldpsurvey.shared.survey import strict_json

# A body the server cannot read as sent: gunicorn's bad chunking (ParseException) or its end
# before the length sent (NoMoreData, an OSError).
UNREADABLE = (OSError, ParseException)


def json_body(limit_config: str | None = None) -> Any:
    """The request's JSON body, as parse_json_body, under the size limit the setting
    `limit_config` names (none if None)."""
    limit = current_app.config[limit_config] if limit_config else None
    return parse_json_body(request.mimetype, request.content_length,
                           lambda: request.get_data(cache=False), limit)


def parse_json_body(mimetype: str, content_length: int | None, read: Callable[[], bytes],
                    limit: int | None) -> Any:
    """A body read by `read`: UnsupportedMediaType unless application/json, BodyTooLarge over
    `limit` bytes (declared or read), MalformedJson unless it can be read and is strict JSON (no
    duplicate keys, NaN or Infinity), InvalidUnicode for a string with a lone surrogate."""
    if mimetype != "application/json":
        raise UnsupportedMediaType()
    if limit is not None and (content_length or 0) > limit:
        raise BodyTooLarge(limit)
    try:
        raw = read()
    except UNREADABLE as exc:
        raise MalformedJson(f"the body could not be read as sent ({type(exc).__name__})") from None
    if limit is not None and len(raw) > limit:
        raise BodyTooLarge(limit)
    try:
        return strict_json.loads(raw)
    except strict_json.InvalidUnicode as exc:
        raise InvalidUnicode(str(exc)) from None
    except ValueError as exc:
        raise MalformedJson(str(exc)[:200]) from None


def idempotency_key() -> str | None:
    """The optional Idempotency-Key header, as checked_idempotency_key."""
    return checked_idempotency_key(request.headers.get("Idempotency-Key"))


def checked_idempotency_key(key: str | None) -> str | None:
    """An Idempotency-Key header's value, None if not sent; InvalidIdempotencyKey unless it
    is one (shared.protocol.IDEMPOTENCY_KEY)."""
    if key is not None and not IDEMPOTENCY_KEY.fullmatch(key):
        raise InvalidIdempotencyKey()
    return key


def created(result: Accepted) -> Response:
    """201 with accepted_reply's body and headers."""
    body, headers = accepted_reply(result)
    return Response(body, 201, headers, mimetype="application/json")


def accepted_reply(result: Accepted) -> tuple[bytes, list[tuple[str, str]]]:
    """The body of a 201 to accepted responses, the count stored as compact JSON with sorted
    keys, as jsonify writes it (built without it: it is every submission's reply); and its
    headers beyond the content type: a replayed idempotent request says so."""
    body = f'{{"accepted":{result.accepted:d},"survey_id":{json.dumps(result.survey_id)}}}\n'
    return body.encode(), [(REPLAYED_HEADER, "true")] * result.replayed
