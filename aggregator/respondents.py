"""What respondents call: the key, a survey's manifest and signature, answer intake."""

from flask import Blueprint, Response, current_app, jsonify

from . import store
from .answers import parse_answers
from .db import get_db
from .requests import idempotency_key, invitation_token, json_body

bp = Blueprint("respondents", __name__)


@bp.get("/healthz")
def health():
    get_db().query("SELECT 1")
    return jsonify(status="ok")


@bp.get("/api/key")
def public_key():
    """The aggregator's Ed25519 public key, for clients to pin."""
    return jsonify(current_app.extensions["ldp_signing_key"].public_json())


@bp.get("/api/surveys/<survey_id>")
def manifest(survey_id: str):
    """The signed manifest, byte for byte as signed."""
    stored = store.get_survey(get_db(), survey_id)
    return Response(stored.manifest, mimetype="application/json")


@bp.get("/api/surveys/<survey_id>/manifest.sig")
def manifest_signature(survey_id: str):
    """The 64-byte Ed25519 signature over exactly the manifest bytes."""
    stored = store.get_survey(get_db(), survey_id)
    return Response(stored.signature, mimetype="application/octet-stream")


@bp.get("/api/surveys/<survey_id>/status")
def status(survey_id: str):
    """open or closed: kept outside the signed, immutable manifest."""
    return jsonify(survey_id=survey_id, status=store.get_survey(get_db(), survey_id).status)


@bp.post("/api/surveys/<survey_id>/responses")
def submit(survey_id: str):
    """One respondent's randomized answers."""
    body = json_body("MAX_RESPONSE_BYTES")
    key = idempotency_key()
    db = get_db()
    survey = store.get_survey(db, survey_id).survey
    answers = parse_answers(survey, body)
    token = invitation_token() if survey.invitation_only else None
    result = store.store_responses(db, survey, [answers], key, token)
    return accepted(survey_id, result)


def accepted(survey_id: str, result: store.Stored):
    """201 with the count stored; a replayed idempotent request says so in a header."""
    response = jsonify(survey_id=survey_id, accepted=result.accepted)
    response.status_code = 201
    if result.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return response
