"""The raw bound of single-response intake without Flask: the aggregator's own intake service
(`intake.accept_one`, the same validation, sealing, idempotency claim and grouped durable
commit) called from a bare WSGI function, for bench/ingest.py and bench/request_cpu.py.

It serves the happy path only, a response to an open survey with or without an
Idempotency-Key (anything else is answered 500), and none of what Flask does around it: no
request or application context, routing, hooks, Response object, body-size and media-type
checks, rate limits or error shapes. It is not a server to deploy; it measures what Flask's
per-request machinery costs a submission.

    gunicorn -c deploy/gunicorn.conf.py 'bare_intake:create()'   # with PYTHONPATH=bench
"""

from typing import Any

from flask import Flask

from ldpsurvey.aggregator import create_app
from ldpsurvey.aggregator.services import intake
from ldpsurvey.aggregator.web.parsing import accepted_reply
from ldpsurvey.aggregator.web.security import HEADERS
from ldpsurvey.shared.survey import strict_json


def bare(flask_app: Flask) -> Any:
    """A WSGI app answering POST /api/surveys/<id>/responses through the intake service of
    `flask_app`'s database."""
    database = flask_app.extensions["ldp_database"]
    headers = [("Content-Type", "application/json"), *HEADERS.items()]

    def app(environ: dict, start_response: Any) -> list[bytes]:
        survey_id = environ["PATH_INFO"].split("/")[3]
        body = environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"]))
        db = database.connect()
        try:
            result = intake.accept_one(db, survey_id, strict_json.loads(body),
                                       environ.get("HTTP_IDEMPOTENCY_KEY"), None)
        finally:
            database.release(db)
        reply, _ = accepted_reply(result)
        start_response("201 CREATED", [*headers, ("Content-Length", str(len(reply)))])
        return [reply]

    return app


def create() -> Any:
    """For gunicorn: the aggregator configured from LDP_SURVEY_* as `create_app()` is."""
    return bare(create_app())
