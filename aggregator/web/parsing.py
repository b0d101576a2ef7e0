"""HTTP glue the blueprints share: reading bodies, headers and query parameters strictly into
the typed values the services take (EstimateOptions, ExportOptions, a confidence level, a
token count), and shaping the answer to an accepted submission."""

import json
from collections.abc import Callable
from typing import Any

from flask import Response, current_app, request
from gunicorn.http.errors import ParseException

from ldpsurvey.aggregator.exceptions import (
    BodyTooLarge,
    InvalidCount,
    InvalidIdempotencyKey,
    InvalidParameter,
    InvalidUnicode,
    MalformedJson,
    UnsupportedMediaType,
)
from ldpsurvey.aggregator.services.analyses import analysis_package
from ldpsurvey.aggregator.services.intake import Accepted
from ldpsurvey.aggregator.services.surveys import EstimateOptions, ExportOptions
from ldpsurvey.shared import DEFAULT_CONFIDENCE, DEFAULT_METHOD, METHODS
from ldpsurvey.shared.http_contract import EXPORT_FORMATS, IDEMPOTENCY_KEY, REPLAYED_HEADER
from ldpsurvey.shared.mechanisms.disclosed import DEFAULT_MIN_CELL
from ldpsurvey.shared.survey import strict_json

MAX_FORMULA = 1000  # characters of a regression formula
MAX_WEIGHTS = 8_000  # characters of a weights query (margins as JSON): gunicorn takes a request
# line of at most 8,190 bytes (gunicorn_config.limit_request_line) and answers a longer one 414

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


def flag(name: str) -> bool:
    """A true/false query parameter (absent: false). InvalidParameter otherwise."""
    value = request.args.get(name, "false")
    if value not in ("true", "false"):
        raise InvalidParameter(f"{name} must be true or false")
    return value == "true"


def token_count(body: Any, limit: int) -> int:
    """The N of a token request's `{"count": N}`, 1 <= N <= limit. InvalidCount."""
    count = body.get("count") if isinstance(body, dict) and set(body) == {"count"} else None
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= limit:
        raise InvalidCount(f"send {{\"count\": N}} with N from 1 to {limit}")
    return count


def estimate_options(confidence: str | None, method: str | None,
                     simultaneous: str | None = None, regress: str | None = None,
                     weights: str | None = None,
                     min_cell: int = DEFAULT_MIN_CELL) -> EstimateOptions:
    """Parse and check query values: the confidence level in (0, 1), the interval method,
    simultaneous ("true" or "false"), a regression formula and margins (JSON) to weight by;
    min_cell from the settings. InvalidParameter."""
    method = DEFAULT_METHOD if method is None else method
    if method not in METHODS:
        raise InvalidParameter(f"method must be one of {', '.join(METHODS)}")
    if simultaneous not in (None, "true", "false"):
        raise InvalidParameter("simultaneous must be true or false")
    return EstimateOptions(confidence_level(confidence), method, simultaneous == "true",
                           regression_formula(regress), weights_margins(weights), min_cell)


def confidence_level(confidence: str | None) -> float:
    """A confidence level from a query (default 0.95), in (0, 1). InvalidParameter."""
    try:
        level = DEFAULT_CONFIDENCE if confidence is None else float(confidence)
    except ValueError:
        level = -1.0
    if not 0.0 < level < 1.0:
        raise InvalidParameter("confidence must be a number in (0, 1)")
    return level


def regression_formula(value: str | None) -> str | None:
    """A `regress` query value: None, or a formula of at most MAX_FORMULA characters."""
    if value is None:
        return None
    if not value.strip() or len(value) > MAX_FORMULA:
        raise InvalidParameter(f"regress must be a formula of 1 to {MAX_FORMULA} characters, "
                               "such as smoked ~ sleep + drinks")
    return value


def weights_margins(value: str | None) -> dict | None:
    """A `weights` query value: None, or population margins as JSON {question id: {option
    label: share}} (analysis.weights.read_margins: shares normalized), at most MAX_WEIGHTS
    characters. InvalidParameter naming the problem."""
    if value is None:
        return None
    if len(value) > MAX_WEIGHTS:
        raise InvalidParameter(f"weights must be at most {MAX_WEIGHTS} characters of JSON")
    analysis = analysis_package()
    try:
        return analysis.weights.read_margins(json.loads(value))
    except ValueError as error:  # JSONDecodeError and AnalysisError are ValueErrors
        raise InvalidParameter(f"weights: {error}") from None


def export_options(kind: str, layout: str | None, codes: str | None) -> ExportOptions:
    """Parse and check the query of an export: `format` (plain or rr) and `codes` (true or
    false) for the CSV; the rr CSV always holds codes, the JSON lines take neither.
    InvalidParameter."""
    if kind == "jsonl" and (layout, codes) != (None, None):
        raise InvalidParameter("format and codes apply to export.csv only")
    if layout not in (None, *EXPORT_FORMATS):
        raise InvalidParameter(f"format must be one of {', '.join(EXPORT_FORMATS)}")
    if codes not in (None, "true", "false"):
        raise InvalidParameter("codes must be true or false")
    if layout == "rr" and codes is not None:
        raise InvalidParameter("codes applies to the plain format only: rr always holds codes")
    return ExportOptions(kind, layout or "plain", codes == "true")
