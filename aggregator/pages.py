"""Pages for people: the respondent form, and the researcher results page with its login."""

import hmac
import secrets
from importlib import resources

from flask import (
    Blueprint,
    Response,
    abort,
    redirect,
    render_template,
    request,
    session,
    url_for,
)

from ldpsurvey.shared import DEFAULT_CONFIDENCE, DEFAULT_METHOD

from . import store
from .auth import role_of_key
from .charts import estimate_chart
from .db import get_db
from .errors import ApiError
from .researchers import estimates_body

bp = Blueprint("pages", __name__)
WEB_ASSETS = {"form.js", "randomizer.js"}


@bp.get("/web/<filename>")
def web_asset(filename: str):
    """The form's JavaScript, shipped as package data of ldpsurvey.shared."""
    if filename not in WEB_ASSETS:
        abort(404)
    source = (resources.files("ldpsurvey.shared") / "web" / filename).read_bytes()
    return Response(source, mimetype="text/javascript")


def _stored_or_page(survey_id: str):
    """The stored survey, or a friendly page (never a stack trace) for unknown ones."""
    try:
        return store.get_survey(get_db(), survey_id), None
    except ApiError:
        return None, (render_template(
            "unavailable.html", heading="Survey not found",
            message="There is no survey at this address. Please check the link you were "
                    "given."), 404)


@bp.get("/s/<survey_id>")
def survey_form(survey_id: str):
    stored, page = _stored_or_page(survey_id)
    if page:
        return page
    if stored.status != "open":
        return render_template("unavailable.html", heading="This survey is closed",
                               message="It no longer takes answers. Thank you for your "
                                       "interest."), 410
    return render_template("survey.html", survey=stored.survey)


def _csrf_token() -> str:
    if "csrf" not in session:
        session["csrf"] = secrets.token_urlsafe(24)
    return session["csrf"]


@bp.get("/s/<survey_id>/results")
def results(survey_id: str):
    stored, page = _stored_or_page(survey_id)
    if page:
        return page
    researcher = session.get("role") == "researcher"
    if not (stored.survey.public_results or researcher):
        return render_template("login.html", survey=stored.survey, csrf=_csrf_token(),
                               error=request.args.get("error"))
    body = estimates_body(get_db(), stored, DEFAULT_CONFIDENCE, DEFAULT_METHOD)
    charts = {q["id"]: estimate_chart(q) for q in body["questions"]}
    return render_template("results.html", survey=stored.survey, body=body, charts=charts,
                           researcher=researcher, csrf=_csrf_token() if researcher else None)


@bp.post("/s/<survey_id>/login")
def login(survey_id: str):
    """Exchange a researcher key for a session cookie (HttpOnly, SameSite=Strict)."""
    _check_csrf()
    if role_of_key(request.form.get("key", "").strip()) != "researcher":
        return redirect(url_for("pages.results", survey_id=survey_id, error="1"))
    session.clear()
    session["role"] = "researcher"
    return redirect(url_for("pages.results", survey_id=survey_id))


@bp.post("/s/<survey_id>/logout")
def logout(survey_id: str):
    _check_csrf()
    session.clear()
    return redirect(url_for("pages.results", survey_id=survey_id))


def _check_csrf() -> None:
    sent, expected = request.form.get("csrf", ""), session.get("csrf", "")
    if not expected or not hmac.compare_digest(sent, expected):
        abort(400, "the form expired; reload the page and try again")
