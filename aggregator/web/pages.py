"""Pages for people: the landing page, the respondent form, the researcher dashboard and results
page with their login. Unknown and closed surveys get the friendly pages of `errors.py`, never a
stack trace."""

import csv
import hmac
import io
import secrets

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    flash,
    jsonify,
    redirect,
    render_template,
    request,
    session,
    url_for,
)

from ldpsurvey.aggregator.config import settings
from ldpsurvey.aggregator.exceptions import DomainError
from ldpsurvey.aggregator.services import access, accounts, lifecycle, surveys
from ldpsurvey.aggregator.services.exports import spreadsheet_safe
from ldpsurvey.aggregator.web import assets, auth, languages, preview
from ldpsurvey.aggregator.web.charts import distribution_chart, estimate_chart, timeline_chart
from ldpsurvey.aggregator.web.parsing import estimate_options, token_count
from ldpsurvey.aggregator.web.qr import FORMATS, qr_code
from ldpsurvey.aggregator.web.request_connection import get_db
from ldpsurvey.shared import METHODS
from ldpsurvey.shared.mechanisms.protocol import Settings
from ldpsurvey.shared.mechanisms.registry import WORDS
from ldpsurvey.shared.mechanisms.square_wave import distribution_rows

bp = Blueprint("pages", __name__)


# The scripts and stylesheet (assets.py), under the endpoint names the templates link to.
bp.add_url_rule("/web/<filename>", "web_asset", assets.web_asset)
bp.add_url_rule("/web/<digest>/<filename>", "asset", assets.asset)
for helper in assets.TEMPLATE_GLOBALS:
    bp.add_app_template_global(helper)


@bp.get("/s/<survey_id>")
def survey_form(survey_id: str):
    survey = surveys.open_for_answers(get_db(), survey_id)
    every = current_app.config["RELEASE_EVERY"]
    return render_template("survey.html", **languages.form_context(survey, every),
                           exposure=surveys.exposure(survey, every))


def _csrf_token() -> str:
    if "csrf" not in session:
        session["csrf"] = secrets.token_urlsafe(24)
    return session["csrf"]


@bp.get("/s/<survey_id>/results")
def results(survey_id: str):
    """The results at the chosen confidence level and interval method (query: confidence,
    method; as GET /api/surveys/<id>/estimates), or the login form."""
    options = _chosen_options()
    page = surveys.results_page(get_db(), survey_id, auth.session_caller(),
                                current_app.config["CENTRAL_DELTA"], options,
                                current_app.config["RELEASE_EVERY"],
                                request.args.get("rows"), request.args.get("cols"))
    if page.estimates is None:
        return _login_form(url_for("pages.login", survey_id=survey_id),
                           f"Results of “{page.survey.title}”", "Show results")
    charts = {q["id"]: estimate_chart(q) for q in page.estimates["questions"]}
    histograms = {q["id"]: distribution_chart(q) for q in page.estimates["questions"]
                  if q.get("distribution")}
    return render_template("results.html", body=page.estimates, charts=charts,
                           histograms=histograms,
                           exposure=page.exposure, mechanism_words=WORDS,
                           crosstab=page.crosstab, researcher=page.researcher, methods=METHODS,
                           levels=LEVELS, query=_query(options),
                           timeline=timeline_chart(page.timeline) if page.timeline else None,
                           csrf=_csrf_token() if page.researcher else None)


@bp.get("/s/<survey_id>/results/estimates.csv")
def estimates_csv(survey_id: str):
    """The results page's estimates, one row per question and option."""
    body = _estimates(survey_id, _chosen_options())
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["question_id", "question", "option", *CSV_FIELDS, "confidence",
                     "ci_method"])
    for question in body["questions"]:
        for option in [*question["options"], *distribution_rows(question)]:
            writer.writerow([question["id"], spreadsheet_safe(question["text"]),
                             spreadsheet_safe(option["option"]),
                             *(option.get(field) for field in CSV_FIELDS), body["confidence"],
                             option.get("ci_method", body["ci_method"])])
    return _download(out.getvalue(), "text/csv", f"estimates-{survey_id}.csv")


@bp.get("/s/<survey_id>/results/<question_id>.svg")
def chart_svg(survey_id: str, question_id: str):
    """One question's chart as a file of its own."""
    body = _estimates(survey_id, _chosen_options())
    question = next((q for q in body["questions"] if q["id"] == question_id), None)
    if question is None:
        abort(404)
    svg = '<?xml version="1.0" encoding="utf-8"?>\n' + str(estimate_chart(question))
    return _download(svg, "image/svg+xml", f"{survey_id}-{question_id}.svg")


LEVELS = (0.8, 0.9, 0.95, 0.99)  # the confidence levels the results page offers
CSV_FIELDS = ("n", "p_mle", "p_hat", "standard_error", "ci_low", "ci_high", "epsilon",
              "warning")


def _chosen_options() -> Settings:
    return estimate_options(request.args.get("confidence"), request.args.get("method"))


def _estimates(survey_id: str, options: Settings) -> dict:
    return surveys.estimates(get_db(), survey_id, auth.session_caller(),
                             current_app.config["CENTRAL_DELTA"], options,
                             current_app.config["RELEASE_EVERY"])


def _query(options: Settings) -> dict:
    """The download links' query: the options shown."""
    return {"confidence": f"{options.confidence:g}", "method": options.method}


def _download(text: str, mimetype: str, filename: str) -> Response:
    return Response(text, mimetype=mimetype,
                    headers={"Content-Disposition": f'attachment; filename="{filename}"'})


@bp.get("/")
def landing():
    return render_template("landing.html")


@bp.get("/researcher")
def dashboard():
    """The caller's surveys (an admin's: all), or the login form without a session."""
    caller = _researcher()
    if caller is None:
        return _login_form(url_for("pages.dashboard_login"), "Researcher dashboard", "Log in")
    return _dashboard(caller)


def _dashboard(caller, upload_error: str | None = None, status: int = 200):
    """The dashboard page; `upload_error`, shown next to the file field, with `status`."""
    return render_template("dashboard.html", surveys=surveys.listing(get_db(), caller),
                           caller=caller, csrf=_csrf_token(), upload_error=upload_error,
                           origin=_origin(),
                           max_tokens=current_app.config["MAX_TOKENS_PER_REQUEST"]), status


def _researcher():
    """The session's researcher or admin, or None."""
    caller = auth.session_caller()
    return caller if caller is not None and caller.role in auth.PEOPLE else None


def _origin() -> str:
    return settings.public_origin(current_app.config, request.host_url)


@bp.post("/researcher/surveys")
def dashboard_upload():
    """A survey file uploaded on the dashboard becomes a draft, checked as `survey check`
    checks it (lifecycle.upload_draft); a refusal is shown next to the file field (422)."""
    _check_csrf()
    caller = _researcher()
    if caller is None:
        return redirect(url_for("pages.dashboard"))
    upload = request.files.get("file")
    if upload is None or not upload.filename:
        return _dashboard(caller, "Choose a survey file (.toml or .json) to upload.", 422)
    try:
        survey_id, survey = lifecycle.upload_draft(
            get_db(), caller, upload.filename, upload.read(),
            request.form.get("above_default_ceilings") == "yes",
            float(current_app.config["EPSILON_CAP"]))
    except DomainError as exc:
        return _dashboard(caller, str(exc), 422)
    flash(f"Saved “{survey.title}” as a draft ({survey_id}): preview it, then publish it.")
    return redirect(url_for("pages.dashboard"), 303)


def _publish(db, caller, survey_id: str) -> None:
    lifecycle.publish(db, caller, survey_id, current_app.extensions["ldp_signing_key"],
                      float(current_app.config["EPSILON_CAP"]), _origin(), assets.form_digests())


# The dashboard's buttons: the service each calls, and what it says once done.
ACTIONS = {
    "publish": (_publish, "Published: respondents can answer it now."),
    "close": (lifecycle.close, "Closed: it takes no more answers."),
    "archive": (lifecycle.archive, "Archived: hidden from the list, its data kept "
                                   "(ldp-survey survey list --archived shows it)."),
}


@bp.post("/researcher/surveys/<survey_id>/<action>")
def dashboard_action(survey_id: str, action: str):
    """Publish, close or archive from the dashboard (as the API and the CLI do); a refusal
    is the friendly error page of errors.py, naming the problem."""
    if action not in ACTIONS:
        abort(404)
    _check_csrf()
    caller = _researcher()
    if caller is None:
        return redirect(url_for("pages.dashboard"))
    if action == "close" and request.form.get("confirm") != "yes":  # final: asked first
        flash(f"{survey_id}: not closed. Closing is final: confirm it under Close for good.")
        return redirect(url_for("pages.dashboard"), 303)
    service, done = ACTIONS[action]
    service(get_db(), caller, survey_id)
    flash(f"{survey_id}: {done}")
    return redirect(url_for("pages.dashboard"), 303)


@bp.post("/researcher/surveys/<survey_id>/shares")
def dashboard_share(survey_id: str):
    """Share with another researcher by name (access.share, as PUT /api/.../shares/NAME)."""
    _check_csrf()
    caller = _researcher()
    if caller is None:
        return redirect(url_for("pages.dashboard"))
    shared = access.share(get_db(), caller, survey_id, request.form.get("name", "").strip())
    flash(f"{survey_id}: shared with {', '.join(shared)}.")
    return redirect(url_for("pages.dashboard"), 303)


@bp.get("/researcher/surveys/<survey_id>/qr.<kind>")
def dashboard_qr(survey_id: str, kind: str):
    """The QR code of a published survey's respondent link (SVG or PNG), for its readers."""
    caller = _researcher()
    if caller is None or kind not in FORMATS:
        abort(404)
    link = surveys.respondent_link(get_db(), caller, survey_id, _origin())
    return Response(qr_code(link, kind), mimetype=FORMATS[kind],
                    headers={"Content-Disposition":
                             f'inline; filename="survey-{survey_id}.{kind}"'})


@bp.get("/researcher/counts")
def dashboard_counts():
    """What the dashboard refreshes on its own: each listed survey's status and released
    responses (never how many wait for release; see surveys.listing)."""
    caller = _researcher()
    if caller is None:
        abort(401)
    return jsonify({s["survey_id"]: {"status": s["status"], "n": s["n"]}
                    for s in surveys.listing(get_db(), caller)})


@bp.get("/researcher/surveys/<survey_id>/preview")
def draft_preview(survey_id: str):
    """A draft's respondent form, exactly as respondents will see it once published, marked as
    a preview, storing and sending nothing (preview.py); its owner or an admin only."""
    survey = _draft_survey(survey_id)
    if survey is None:
        return redirect(url_for("pages.dashboard"))
    return preview.render(survey, url_for("pages.draft_preview_manifest", survey_id=survey_id),
                          current_app.config["RELEASE_EVERY"])


@bp.get("/researcher/surveys/<survey_id>/preview/manifest.json")
def draft_preview_manifest(survey_id: str):
    survey = _draft_survey(survey_id)
    if survey is None:
        abort(401)
    return preview.manifest(survey)


def _draft_survey(survey_id: str):
    """The session's draft as publishing it now would make it (lifecycle.preview); None
    without a session."""
    caller = auth.session_caller()
    if caller is None or caller.role not in auth.PEOPLE:
        return None
    return lifecycle.preview(get_db(), caller, survey_id,
                             float(current_app.config["EPSILON_CAP"]),
                             current_app.extensions["ldp_signing_key"].key_id,
                             _origin(), assets.form_digests())


@bp.post("/researcher/login")
def dashboard_login():
    return _log_in("pages.dashboard")


@bp.post("/researcher/logout")
def dashboard_logout():
    return _log_out("pages.dashboard")


@bp.post("/researcher/surveys/<survey_id>/tokens")
def dashboard_tokens(survey_id: str):
    """Mint invitation links from the dashboard (as POST /api/surveys/<id>/tokens does)."""
    _check_csrf()
    caller = auth.session_caller()
    if caller is None:
        return redirect(url_for("pages.dashboard"))
    limit = current_app.config["MAX_TOKENS_PER_REQUEST"]
    tokens = surveys.mint_tokens(get_db(), caller, survey_id,
                                 lambda: token_count(_token_form(), limit))
    link = url_for("pages.survey_form", survey_id=survey_id, _external=True)
    return render_template("tokens.html", survey_id=survey_id,
                           links=[f"{link}#t={token}" for token in tokens])


def _token_form() -> dict:
    """The minting form's count, as the API's body; token_count checks it. Only ASCII digits
    make a number, and at most 9 of them: str.isdigit() also takes '²', which int() refuses,
    and int() refuses more than 4,300 digits (each was a 500). Anything else stays text, which
    token_count refuses as the API does."""
    count = request.form.get("count", "")
    return {"count": int(count) if count.isascii() and count.isdigit() and len(count) <= 9
            else count}


@bp.post("/s/<survey_id>/login")
def login(survey_id: str):
    return _log_in("pages.results", survey_id=survey_id)


@bp.post("/s/<survey_id>/logout")
def logout(survey_id: str):
    return _log_out("pages.results", survey_id=survey_id)


def _login_form(action: str, heading: str, button: str) -> str:
    """The key form that posts to `action` (a failed attempt came back with error=1)."""
    return render_template("login.html", csrf=_csrf_token(), error=request.args.get("error"),
                           action=action, heading=heading, button=button)


def _log_in(page: str, **values: str) -> Response:
    """Exchange the form's researcher or admin key for a session (accounts.open_session)
    whose id the signed cookie carries (HttpOnly, SameSite=Strict), then back to `page`
    (with error=1 if the key was not accepted)."""
    _check_csrf()
    session_id = accounts.open_session(get_db(), request.form.get("key", "").strip(),
                                       current_app.config["SESSION_HOURS"])
    if session_id is None:
        return redirect(url_for(page, error="1", **values))
    _end_session()
    session["sid"] = session_id
    return redirect(url_for(page, **values))


def _log_out(page: str, **values: str) -> Response:
    """End the session on the server too (a copy of the cookie no longer works), then back
    to `page`."""
    _check_csrf()
    _end_session()
    return redirect(url_for(page, **values))


def _end_session() -> None:
    """End this browser's session on the server, so no copy of its cookie works, and forget
    it here."""
    if isinstance(session.get("sid"), str):
        accounts.close_session(get_db(), session["sid"])
    session.clear()


def _check_csrf() -> None:
    sent, expected = request.form.get("csrf", ""), session.get("csrf", "")
    if not expected or not hmac.compare_digest(sent, expected):
        abort(400, "the form expired; reload the page and try again")
