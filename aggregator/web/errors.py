"""How failures reach clients: the API answers {"error": code, "detail": text} with a 4xx/5xx
status, pages for people answer a friendly HTML page. One table maps each domain exception."""

import json
import logging
from dataclasses import dataclass

from flask import Flask, current_app, jsonify, make_response, render_template, request
from flask_limiter import RateLimitExceeded
from werkzeug.exceptions import HTTPException

from ldpsurvey.aggregator import exceptions as ex
from ldpsurvey.aggregator.store.connection import unavailable
from ldpsurvey.aggregator.web.limits import RateLimited, breach


@dataclass(frozen=True)
class Page:
    """What a person sees instead of JSON: status, heading and message (None: the detail)."""

    status: int
    heading: str
    message: str | None = None


@dataclass(frozen=True)
class Answer:
    status: int
    code: str
    page: Page | None = None  # default: the API status with a generic heading and the detail


NOT_FOUND_PAGE = Page(404, "Survey not found", "There is no survey at this address. Please "
                                               "check the link you were given.")
CLOSED_PAGE = Page(410, "This survey is closed", "It no longer takes answers. Thank you for "
                                                 "your interest.")

UNAVAILABLE_PAGE = Page(503, "Please try again in a moment", "The service cannot reach its "
                                                              "database just now.")

ANSWERS: dict[type[ex.DomainError], Answer] = {
    ex.MalformedJson: Answer(400, "invalid_json"),
    ex.InvalidIdempotencyKey: Answer(400, "invalid_idempotency_key"),
    ex.InvalidParameter: Answer(400, "invalid_parameter"),
    ex.Unauthorized: Answer(401, "unauthorized"),
    ex.TokenRequired: Answer(401, "token_required"),
    ex.Forbidden: Answer(403, "forbidden"),
    ex.TokenRejected: Answer(403, "invalid_token"),
    ex.OriginNotAllowed: Answer(403, "origin_not_allowed"),
    ex.BatchOnInvitationOnly: Answer(403, "invitation_only"),
    ex.SurveyNotFound: Answer(404, "unknown_survey", NOT_FOUND_PAGE),
    ex.ResearcherNotFound: Answer(404, "unknown_researcher"),
    ex.KeyNotFound: Answer(404, "unknown_key"),
    ex.SurveyClosed: Answer(409, "survey_closed", CLOSED_PAGE),
    ex.IdempotencyConflict: Answer(409, "idempotency_conflict"),
    ex.NotInvitationOnly: Answer(409, "not_invitation_only"),
    ex.AlreadyPublished: Answer(409, "already_published"),
    ex.SurveyIsDraft: Answer(409, "survey_draft"),
    ex.SurveyOpen: Answer(409, "survey_open"),
    ex.ArchiveConflict: Answer(409, "archive_conflict"),
    ex.BodyTooLarge: Answer(413, "body_too_large"),
    ex.UnsupportedMediaType: Answer(415, "unsupported_media_type"),
    ex.InvalidSurvey: Answer(422, "invalid_survey"),
    ex.EpsilonAboveCap: Answer(422, "epsilon_above_cap"),
    ex.InvalidAnswers: Answer(422, "invalid_answers"),
    ex.InvalidUnicode: Answer(422, "invalid_unicode"),
    ex.BatchTooLarge: Answer(422, "batch_too_large"),
    ex.InvalidCount: Answer(422, "invalid_count"),
    ex.InvalidKeyRequest: Answer(422, "invalid_key_request"),
    ex.InvalidShare: Answer(422, "invalid_share"),
    ex.RegressionFailed: Answer(422, "regression_failed"),
    ex.AnalysisTooLarge: Answer(422, "analysis_too_large"),
    ex.AnalysisStopped: Answer(422, "analysis_stopped"),
    ex.AnalysisUnavailable: Answer(501, "analysis_unavailable"),
    ex.AnalysisBusy: Answer(503, "analyses_busy"),
    ex.DatabaseUnavailable: Answer(503, "database_unavailable", UNAVAILABLE_PAGE),
    RateLimited: Answer(429, "rate_limited", Page(429, "Too many requests", None)),
}


def error_response(status: int, code: str, detail: str):
    return jsonify(error=code, detail=detail), status


def _wants_json() -> bool:
    """The API and health check answer JSON; pages for people answer HTML."""
    return request.path.startswith("/api/") or request.path in ("/healthz", "/readyz")


def _page(page: Page, detail: str):
    return render_template("unavailable.html", heading=page.heading,
                           message=page.message or detail), page.status


def answer_for(exc: ex.DomainError) -> Answer | None:
    """The answer for the exception's class, or for the nearest of its bases that has one."""
    return next((ANSWERS[cls] for cls in type(exc).__mro__ if cls in ANSWERS), None)


def _domain_error(exc: ex.DomainError):
    answer = answer_for(exc)
    if answer is None:
        return _unexpected(exc)
    if _wants_json():
        response = make_response(error_response(answer.status, answer.code, str(exc)))
    else:
        page = answer.page or Page(answer.status, answer.code.replace("_", " ").capitalize())
        response = make_response(_page(page, str(exc)))
    response.headers.extend(error_headers(exc))
    return response


def _http_error(exc: HTTPException):
    if not _wants_json():
        return _page(Page(exc.code or 500, exc.name), exc.description)
    body, status = error_response(*http_answer(exc))
    body.headers.extend(error_headers(exc))
    return body, status


def http_answer(exc: HTTPException) -> tuple[int, str, str]:
    """The API's (status, code, detail) for werkzeug's HTTP errors (a 405, a client that
    disconnected mid-body, a body over MAX_CONTENT_LENGTH): the code is the status's name."""
    code = (exc.name or "error").lower().replace(" ", "_")
    return exc.code or 500, code, exc.description or exc.name


def error_headers(exc: Exception) -> list[tuple[str, str]]:
    """The headers an error's answer carries: Retry-After in seconds on a 429 and a 503 (a
    database unavailable, analyses busy), an
    HTTP error's own but its content type (e.g. Allow on a 405)."""
    if isinstance(exc, RateLimited):
        return [("Retry-After", str(exc.seconds))]
    busy = unavailable(exc) or exc  # also a database's own exception, as api_error answers it
    if isinstance(busy, ex.DomainError) and hasattr(busy, "retry_after"):
        return [("Retry-After", str(busy.retry_after))]
    if isinstance(exc, HTTPException):
        return [(name, value) for name, value in exc.get_headers()
                if name.lower() != "content-type"]
    return []


def _rate_limited(exc: RateLimitExceeded):
    """429 through the table, with Retry-After in seconds."""
    limited = breach(exc)
    response = make_response(_domain_error(limited))
    response.headers.extend(error_headers(limited))
    return response


def _unexpected(exc: Exception):
    busy = database_unavailable(exc, current_app.logger)
    if busy is not None:
        return _domain_error(busy)
    status, code, detail = unexpected(exc, current_app.logger)
    if not _wants_json():
        return _page(Page(500, "Something went wrong", "The server failed. Nothing was stored."),
                     "")
    return error_response(status, code, detail)


def database_unavailable(exc: BaseException,
                         logger: logging.Logger) -> ex.DatabaseUnavailable | None:
    """The DatabaseUnavailable (503) an exception stands for (database.unavailable), logged in
    one line (the database's own first line, no traceback: it is no bug), or None."""
    busy = unavailable(exc)
    if busy is not None and busy is not exc:
        logger.warning("database unavailable (%s: %s)", type(exc).__name__,
                       str(exc).partition("\n")[0])
    return busy


def unexpected(exc: BaseException, logger: logging.Logger) -> tuple[int, str, str]:
    """Log an exception nothing expected, its type and traceback (request bodies never reach
    a log); the API's answer: (status, code, detail)."""
    logger.error("unhandled %s", type(exc).__name__, exc_info=exc)
    return 500, "internal_error", "the server failed; nothing was stored"


def api_error(exc: Exception, logger: logging.Logger) -> tuple[int, str, str]:
    """The API's answer to an exception outside Flask's handlers (submissions.py): a
    DomainError's from the table (ANSWERS), an HTTP error's (http_answer), anything else as
    unexpected."""
    if isinstance(exc, HTTPException):
        return http_answer(exc)
    exc = database_unavailable(exc, logger) or exc
    answer = answer_for(exc) if isinstance(exc, ex.DomainError) else None
    if answer is None:
        return unexpected(exc, logger)
    return answer.status, answer.code, str(exc)


def error_json(code: str, detail: str) -> bytes:
    """An API error's body as jsonify writes it in production: compact, keys sorted."""
    return json.dumps({"detail": detail, "error": code}, separators=(",", ":")).encode() + b"\n"


def init_app(app: Flask) -> None:
    app.register_error_handler(ex.DomainError, _domain_error)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(RateLimitExceeded, _rate_limited)
    app.register_error_handler(Exception, _unexpected)
