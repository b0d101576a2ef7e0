"""What researchers call: create, list, share and close surveys, batch intake, invitation
tokens, exports and estimates. Which survey a key may use is the services' decision
(access.py); these check only the key's role."""

import json

from flask import (
    Blueprint,
    Response,
    current_app,
    jsonify,
    request,
    stream_with_context,
    url_for,
)

from . import access, exports, intake, settings, surveys
from .auth import PEOPLE, request_caller, require_key
from .db import get_db, release_on_close
from .http import created, idempotency_key, json_body
from .store import KeyRecord

bp = Blueprint("researchers", __name__)


@bp.post("/api/surveys")
@require_key(*PEOPLE)
def create_survey(caller: KeyRecord):
    """Validate a survey definition, publish its signed manifest, open it; the caller owns it."""
    survey = surveys.publish(get_db(), caller, json_body(),
                             current_app.extensions["ldp_signing_key"],
                             float(current_app.config["EPSILON_CAP"]),
                             settings.public_origin(current_app.config, request.host_url))
    manifest_url = url_for("respondents.manifest", survey_id=survey.survey_id)
    response = jsonify(survey_id=survey.survey_id, status="open",
                       total_epsilon=survey.total_epsilon, manifest_url=manifest_url)
    response.status_code = 201
    response.headers["Location"] = manifest_url
    return response


@bp.get("/api/surveys")
@require_key(*PEOPLE)
def list_surveys(caller: KeyRecord):
    """The caller's own and shared surveys (an admin's: all)."""
    return jsonify(surveys=surveys.listing(get_db(), caller))


@bp.post("/api/surveys/<survey_id>/close")
@require_key(*PEOPLE)
def close_survey(survey_id: str, caller: KeyRecord):
    """Close for good: the survey refuses answers from now on."""
    surveys.close(get_db(), caller, survey_id)
    return jsonify(survey_id=survey_id, status="closed")


@bp.get("/api/surveys/<survey_id>/shares")
@require_key(*PEOPLE)
def list_shares(survey_id: str, caller: KeyRecord):
    """The researchers the survey is shared with (its owner or an admin asks)."""
    return jsonify(survey_id=survey_id, shared_with=access.shares(get_db(), caller, survey_id))


@bp.put("/api/surveys/<survey_id>/shares/<name>")
@require_key(*PEOPLE)
def share(survey_id: str, name: str, caller: KeyRecord):
    """Let the researcher called `name` read the survey's results and exports."""
    names = access.share(get_db(), caller, survey_id, name)
    return jsonify(survey_id=survey_id, shared_with=names)


@bp.delete("/api/surveys/<survey_id>/shares/<name>")
@require_key(*PEOPLE)
def unshare(survey_id: str, name: str, caller: KeyRecord):
    """Stop sharing the survey with the researcher called `name`."""
    names = access.unshare(get_db(), caller, survey_id, name)
    return jsonify(survey_id=survey_id, shared_with=names)


@bp.post("/api/surveys/<survey_id>/responses/batch")
@require_key("researcher", "relay", "admin")
def submit_batch(survey_id: str, caller: KeyRecord):
    """Many responses at once: all stored or none."""
    body, key = json_body(), idempotency_key()
    return created(intake.accept_batch(get_db(), caller, survey_id, body, key,
                                       current_app.config["MAX_BATCH_RESPONSES"]))


@bp.post("/api/surveys/<survey_id>/tokens")
@require_key(*PEOPLE)
def mint_tokens(survey_id: str, caller: KeyRecord):
    """Single-use invitation tokens and links carrying them in the URL fragment."""
    tokens = surveys.mint_tokens(get_db(), caller, survey_id, json_body,
                                 current_app.config["MAX_TOKENS_PER_REQUEST"])
    link = url_for("pages.survey_form", survey_id=survey_id, _external=True)
    response = jsonify(survey_id=survey_id, tokens=tokens,
                       links=[f"{link}#t={token}" for token in tokens])
    response.status_code = 201
    return response


@bp.get("/api/surveys/<survey_id>/export.<any(csv, jsonl):kind>")
@require_key(*PEOPLE)
def export(survey_id: str, kind: str, caller: KeyRecord):
    """Every response, one per row in random order, streamed as it is read (constant memory at
    any size). Query (CSV only): format (plain or rr), codes (true: option codes, not labels)."""
    options = surveys.export_options(kind, request.args.get("format"), request.args.get("codes"))
    result = surveys.export(get_db(), caller, survey_id, options,
                            current_app.config["CENTRAL_DELTA"])
    return release_on_close(Response(stream_with_context(result.body), mimetype=result.mimetype,
                                     headers=attachment(result.filename)))


CODEBOOK_MIMETYPES = {"json": "application/json", "md": "text/markdown"}


@bp.get("/api/surveys/<survey_id>/codebook.<any(json, md):kind>")
@require_key(*PEOPLE)
def codebook(survey_id: str, kind: str, caller: KeyRecord):
    """What each export's columns and values mean (exports.codebook), as JSON or Markdown."""
    book = surveys.codebook(get_db(), caller, survey_id, current_app.config["CENTRAL_DELTA"])
    text = (json.dumps(book, indent=2, ensure_ascii=False) + "\n" if kind == "json"
            else exports.codebook_markdown(book))
    return Response(text, mimetype=CODEBOOK_MIMETYPES[kind],
                    headers=attachment(f"{survey_id}-codebook.{kind}"))


def attachment(filename: str) -> dict[str, str]:
    """The header that makes a browser save the body as `filename`."""
    return {"Content-Disposition": f'attachment; filename="{filename}"'}


@bp.get("/api/surveys/<survey_id>/estimates")
def estimates(survey_id: str):
    """Per question and option, the shared estimator applied to the stored counts.

    Query: confidence (default 0.95), method (shared.METHODS), simultaneous (true: each
    question's intervals cover together). Public-results surveys need no key; others a key of
    their owner, a researcher they are shared with, or an admin.
    """
    args = request.args
    options = surveys.estimate_options(args.get("confidence"), args.get("method"),
                                       args.get("simultaneous"))
    return jsonify(surveys.estimates(get_db(), survey_id, request_caller(),
                                     current_app.config["CENTRAL_DELTA"], options,
                                     current_app.config["RELEASE_EVERY"]))


@bp.get("/api/surveys/<survey_id>/crosstab")
def crosstab(survey_id: str):
    """Joint and conditional proportions of two questions. Query: rows, cols (question ids),
    confidence. Who may read it: as for the estimates."""
    args = request.args
    return jsonify(surveys.crosstab_document(get_db(), survey_id, request_caller(),
                                             args.get("rows"), args.get("cols"),
                                             args.get("confidence")))
