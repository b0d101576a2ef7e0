"""The respondent form as a preview: the real template and the real in-page randomizer, marked
as a preview, for a survey read from a manifest that is never published; the form keeps
nothing (its memory lives in the page) and sends nothing (form.js, data-preview). The
dashboard serves it for a draft (pages.draft_preview); `ldp-survey survey preview FILE` serves
it for a survey file with preview_app, a server of its own that has no database at all."""

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from flask import Flask, Response, render_template, request, url_for

from ldpsurvey.aggregator.config.settings import DEFAULTS
from ldpsurvey.aggregator.services import surveys
from ldpsurvey.aggregator.web import assets, languages, security
from ldpsurvey.shared import Survey, SurveyError
from ldpsurvey.shared.survey.manifest import web_origin

PREVIEW_ID = "preview"  # the survey id and key id of a survey file's preview


def render(survey: Survey, manifest_url: str, release_every: float) -> str:
    """survey.html in preview mode, its manifest read from `manifest_url`."""
    return render_template("survey.html", **languages.form_context(survey, release_every),
                           preview=True,
                           manifest_url=manifest_url,
                           exposure=surveys.exposure(survey, release_every))


def manifest(survey: Survey) -> Response:
    """The preview's manifest: the bytes a publish would sign (never signed, never stored)."""
    return Response(survey.manifest_bytes(), mimetype="application/json")


def preview_app(load: Callable[[], Survey]) -> Flask:
    """A Flask app serving the preview of the survey `load()` returns, read again at every
    request (edit the file, reload the page), at `/`, its manifest signed for the address it is
    opened at, and the form's scripts and style, with the aggregator's security headers. A
    survey that no longer reads (SurveyError) answers 422 with the problem."""
    # the aggregator's folder, for its templates and static files
    app = Flask(__name__, root_path=str(Path(__file__).resolve().parents[1]))

    def survey() -> Survey:
        return replace(load(), survey_id=PREVIEW_ID, key_id=PREVIEW_ID,
                       origin=web_origin(request.host_url))

    def form():
        return render(survey(), url_for("pages.preview_manifest"), DEFAULTS["RELEASE_EVERY"])

    # under the endpoint names the templates link to
    app.add_url_rule("/", "pages.form", form)
    app.add_url_rule("/preview/manifest.json", "pages.preview_manifest",
                     lambda: manifest(survey()))
    app.add_url_rule("/web/<filename>", "pages.web_asset", assets.web_asset)
    app.add_url_rule("/web/<digest>/<filename>", "pages.asset", assets.asset)
    for helper in assets.TEMPLATE_GLOBALS:
        app.add_template_global(helper)
    app.register_error_handler(SurveyError, lambda exc: (render_template(
        "unavailable.html", heading="This survey file has a problem", message=str(exc)), 422))
    app.after_request(security.add_headers)
    return app
