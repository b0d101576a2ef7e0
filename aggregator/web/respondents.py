"""What respondents call: the key, a survey's manifest and signature, its status. Their
submissions are served ahead of Flask (submissions.py)."""

from flask import Blueprint, Response, current_app, jsonify, request

from ldpsurvey.aggregator.services import surveys
from ldpsurvey.aggregator.store.connection import ping
from ldpsurvey.aggregator.web import cors
from ldpsurvey.aggregator.web.request_connection import get_db

bp = Blueprint("respondents", __name__)


@bp.get("/healthz")
def health():
    """Liveness: the process answers, whatever the database does (a load balancer that
    restarts on failure must not restart every replica for a database outage)."""
    return jsonify(status="ok")


@bp.get("/readyz")
def ready():
    """Readiness: the database answers, within DATABASE_NETWORK_TIMEOUT seconds; else 503
    database_unavailable with Retry-After (errors.py)."""
    ping(get_db())
    return jsonify(status="ready")


@bp.get("/api/key")
def public_key():
    """The aggregator's Ed25519 public key, for clients to pin."""
    return jsonify(current_app.extensions["ldp_signing_key"].public_json())


@bp.get("/api/surveys/<survey_id>")
def manifest(survey_id: str):
    """The signed manifest, byte for byte as signed."""
    return Response(surveys.published(get_db(), survey_id).manifest, mimetype="application/json")


@bp.get("/api/surveys/<survey_id>/manifest.sig")
def manifest_signature(survey_id: str):
    """The 64-byte Ed25519 signature over exactly the manifest bytes."""
    return Response(surveys.published(get_db(), survey_id).signature,
                    mimetype="application/octet-stream")


@bp.get("/api/surveys/<survey_id>/status")
def status(survey_id: str):
    """open or closed (kept outside the signed, immutable manifest) and release_every, the
    seconds between scheduled releases (what the form's schedule note says); a page at one of
    the survey's form_origins may read it (cors.py)."""
    origin = request.headers.get("Origin")
    found, readable = surveys.status(get_db(), survey_id, origin)
    response = jsonify(survey_id=survey_id, status=found,
                       release_every=current_app.config["RELEASE_EVERY"])
    if readable:
        response.headers.extend(cors.response_headers(origin))
    response.headers.extend(cors.VARY)
    return response

