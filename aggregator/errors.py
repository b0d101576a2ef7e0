"""API errors: every failure is a 4xx/5xx with a JSON body {"error": code, "detail": text}."""

from flask import Flask, current_app, jsonify, render_template, request
from werkzeug.exceptions import HTTPException


class ApiError(Exception):
    """Raise to answer with `status` and {"error": code, "detail": detail}."""

    def __init__(self, status: int, code: str, detail: str):
        super().__init__(detail)
        self.status, self.code, self.detail = status, code, detail


def error_response(status: int, code: str, detail: str):
    return jsonify(error=code, detail=detail), status


def _api_error(exc: ApiError):
    return error_response(exc.status, exc.code, exc.detail)


def _http_error(exc: HTTPException):
    if not _wants_json():
        return render_template("unavailable.html", heading=exc.name,
                               message=exc.description), exc.code or 500
    code = (exc.name or "error").lower().replace(" ", "_")
    body, status = error_response(exc.code or 500, code, exc.description or exc.name)
    for name, value in exc.get_headers():  # e.g. Allow on a 405
        if name.lower() != "content-type":
            body.headers[name] = value
    return body, status


def _wants_json() -> bool:
    """The API and health check answer JSON; pages for people answer HTML."""
    return request.path.startswith("/api/") or request.path == "/healthz"


def _unexpected(exc: Exception):
    # The traceback goes to the server log; request bodies never do.
    current_app.logger.error("unhandled %s", type(exc).__name__, exc_info=exc)
    if not _wants_json():
        return render_template("unavailable.html", heading="Something went wrong",
                               message="The server failed. Nothing was stored."), 500
    return error_response(500, "internal_error", "the server failed; nothing was stored")


def init_app(app: Flask) -> None:
    app.register_error_handler(ApiError, _api_error)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected)
