"""What researchers call: create, list and close surveys, batch intake, invitation tokens,
exports and estimates."""

from flask import Blueprint, Response, current_app, jsonify, request, url_for

from . import intake, surveys
from .auth import request_role, require_key
from .db import get_db
from .http import created, idempotency_key, json_body

bp = Blueprint("researchers", __name__)


@bp.post("/api/surveys")
@require_key("researcher")
def create_survey():
    """Validate a survey definition, publish its signed manifest, open it."""
    survey = surveys.publish(get_db(), json_body(), current_app.extensions["ldp_signing_key"],
                             float(current_app.config["EPSILON_CAP"]))
    manifest_url = url_for("respondents.manifest", survey_id=survey.survey_id)
    response = jsonify(survey_id=survey.survey_id, status="open",
                       total_epsilon=survey.total_epsilon, manifest_url=manifest_url)
    response.status_code = 201
    response.headers["Location"] = manifest_url
    return response


@bp.get("/api/surveys")
@require_key("researcher")
def list_surveys():
    return jsonify(surveys=surveys.listing(get_db()))


@bp.post("/api/surveys/<survey_id>/close")
@require_key("researcher")
def close_survey(survey_id: str):
    """Close for good: the survey refuses answers from now on."""
    surveys.close(get_db(), survey_id)
    return jsonify(survey_id=survey_id, status="closed")


@bp.post("/api/surveys/<survey_id>/responses/batch")
@require_key("researcher", "relay")
def submit_batch(survey_id: str):
    """Many responses at once: all stored or none."""
    body, key = json_body(), idempotency_key()
    return created(intake.accept_batch(get_db(), survey_id, body, key,
                                       current_app.config["MAX_BATCH_RESPONSES"]))


@bp.post("/api/surveys/<survey_id>/tokens")
@require_key("researcher")
def mint_tokens(survey_id: str):
    """Single-use invitation tokens and links carrying them in the URL fragment."""
    tokens = surveys.mint_tokens(get_db(), survey_id, json_body,
                                 current_app.config["MAX_TOKENS_PER_REQUEST"])
    link = url_for("pages.survey_form", survey_id=survey_id, _external=True)
    response = jsonify(survey_id=survey_id, tokens=tokens,
                       links=[f"{link}#t={token}" for token in tokens])
    response.status_code = 201
    return response


@bp.get("/api/surveys/<survey_id>/export.<any(csv, jsonl):kind>")
@require_key("researcher")
def export(survey_id: str, kind: str):
    """Every response, one per row in random order, with the manifest and design parameters."""
    result = surveys.export(get_db(), survey_id, kind, current_app.config["CENTRAL_DELTA"])
    return Response(result.body, mimetype=result.mimetype, headers={
        "Content-Disposition": f'attachment; filename="{result.filename}"'})


@bp.get("/api/surveys/<survey_id>/estimates")
def estimates(survey_id: str):
    """Per question and option, the shared estimator applied to the stored counts.

    Query: confidence (default 0.95), method (default wilson; clopper-pearson, wald).
    Public-results surveys need no key; others need a researcher key.
    """
    return jsonify(surveys.estimates(get_db(), survey_id, request_role(),
                                     current_app.config["CENTRAL_DELTA"],
                                     request.args.get("confidence"), request.args.get("method")))
