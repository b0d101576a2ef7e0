"""What researchers call: create, list, share and close surveys, batch intake, invitation
tokens, exports and estimates. Which survey a key may use is the services' decision
(access.py); these check only the key's role."""

import json

from flask import Blueprint, Response, current_app, jsonify, request, stream_with_context, url_for

from ldpsurvey.aggregator.config import settings
from ldpsurvey.aggregator.services import access, exports, intake, lifecycle, surveys
from ldpsurvey.aggregator.store.accounts import KeyRecord
from ldpsurvey.aggregator.web.assets import form_digests
from ldpsurvey.aggregator.web.auth import PEOPLE, request_caller, require_key
from ldpsurvey.aggregator.web.parsing import (
    confidence_level,
    created,
    estimate_options,
    export_options,
    flag,
    idempotency_key,
    json_body,
    token_count,
)
from ldpsurvey.aggregator.web.qr import FORMATS, qr_code
from ldpsurvey.aggregator.web.request_connection import get_db, release_on_close
from ldpsurvey.shared import Survey

bp = Blueprint("researchers", __name__)


@bp.post("/api/surveys")
@require_key(*PEOPLE)
def create_survey(caller: KeyRecord):
    """Validate a survey definition, publish its signed manifest, open it; the caller owns it.
    Query draft=true: keep it as a draft instead (edit, preview, then publish)."""
    draft = flag("draft")
    if draft:
        survey_id, survey = lifecycle.create_draft(get_db(), caller, json_body(), _cap())
        return _draft_reply(survey_id, survey, 201)
    survey = lifecycle.publish_new(get_db(), caller, json_body(),
                                   current_app.extensions["ldp_signing_key"], _cap(), _origin(),
                                   form_digests())
    return _published_reply(survey, 201)


def _cap() -> float:
    return float(current_app.config["EPSILON_CAP"])


def _origin() -> str:
    return settings.public_origin(current_app.config, request.host_url)


def _published_reply(survey: Survey, status: int) -> Response:
    """A published survey: its id, status, total epsilon and manifest's address (Location)."""
    manifest_url = url_for("respondents.manifest", survey_id=survey.survey_id)
    response = jsonify(survey_id=survey.survey_id, status="open",
                       total_epsilon=survey.total_epsilon, manifest_url=manifest_url)
    response.status_code = status
    response.headers["Location"] = manifest_url
    return response


def _draft_reply(survey_id: str, survey: Survey, status: int) -> Response:
    """A draft: its id, status and total epsilon; no manifest until it is published."""
    response = jsonify(survey_id=survey_id, status="draft", total_epsilon=survey.total_epsilon,
                       manifest_url=None)
    response.status_code = status
    return response


@bp.get("/api/surveys")
@require_key(*PEOPLE)
def list_surveys(caller: KeyRecord):
    """The caller's own and shared surveys and own drafts (an admin's: all); query
    archived=true: archived surveys too."""
    return jsonify(surveys=surveys.listing(get_db(), caller, flag("archived")))


@bp.put("/api/surveys/<survey_id>/definition")
@require_key(*PEOPLE)
def edit_draft(survey_id: str, caller: KeyRecord):
    """Replace a draft's definition (a published survey never changes: copy it)."""
    survey = lifecycle.edit(get_db(), caller, survey_id, json_body(), _cap())
    return _draft_reply(survey_id, survey, 200)


@bp.post("/api/surveys/<survey_id>/publish")
@require_key(*PEOPLE)
def publish_draft(survey_id: str, caller: KeyRecord):
    """Publish a draft under its id: sign its manifest and open it."""
    survey = lifecycle.publish(get_db(), caller, survey_id,
                               current_app.extensions["ldp_signing_key"], _cap(), _origin(),
                               form_digests())
    return _published_reply(survey, 200)


@bp.post("/api/surveys/<survey_id>/copy")
@require_key(*PEOPLE)
def copy_survey(survey_id: str, caller: KeyRecord):
    """A new draft with the survey's definition, owned by the caller."""
    new_id, survey = lifecycle.copy(get_db(), caller, survey_id, _cap())
    return _draft_reply(new_id, survey, 201)


@bp.post("/api/surveys/<survey_id>/<any(archive, unarchive):action>")
@require_key(*PEOPLE)
def archive(survey_id: str, action: str, caller: KeyRecord):
    """Hide a closed survey from listings, keeping its data (or bring it back)."""
    archived = action == "archive"
    lifecycle.archive(get_db(), caller, survey_id, archived)
    return jsonify(survey_id=survey_id, status="closed", archived=archived)


@bp.delete("/api/surveys/<survey_id>")
@require_key(*PEOPLE)
def delete_survey(survey_id: str, caller: KeyRecord):
    """Delete a survey or draft and every response, token and counter of it; query
    force=true for an open survey."""
    lifecycle.delete(get_db(), caller, survey_id, flag("force"))
    return jsonify(survey_id=survey_id, status="deleted")


@bp.post("/api/surveys/<survey_id>/close")
@require_key(*PEOPLE)
def close_survey(survey_id: str, caller: KeyRecord):
    """Close for good: the survey refuses answers from now on."""
    lifecycle.close(get_db(), caller, survey_id)
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
    limit = current_app.config["MAX_TOKENS_PER_REQUEST"]
    tokens = surveys.mint_tokens(get_db(), caller, survey_id,
                                 lambda: token_count(json_body(), limit))
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
    options = export_options(kind, request.args.get("format"), request.args.get("codes"))
    result = surveys.export(get_db(), caller, survey_id, options,
                            current_app.config["CENTRAL_DELTA"])
    return release_on_close(Response(stream_with_context(result.body), mimetype=result.mimetype,
                                     headers=attachment(result.filename)))


@bp.get("/api/surveys/<survey_id>/qr.<any(svg, png):kind>")
@require_key(*PEOPLE)
def qr(survey_id: str, kind: str, caller: KeyRecord):
    """The QR code of a published survey's respondent link, for a flyer or a slide."""
    link = surveys.respondent_link(get_db(), caller, survey_id, _origin())
    return Response(qr_code(link, kind), mimetype=FORMATS[kind],
                    headers=attachment(f"survey-{survey_id}.{kind}"))


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
    question's intervals cover together), regress (a formula: adds `regression`), weights
    (population margins as JSON: adds `weighted`, with the regression weighted too).
    Public-results surveys need no key; others a key of their owner, a researcher they are
    shared with, or an admin.
    """
    args = request.args
    options = estimate_options(args.get("confidence"), args.get("method"),
                               args.get("simultaneous"), args.get("regress"), args.get("weights"),
                               current_app.config["MIN_CELL"])
    return jsonify(surveys.estimates(get_db(), survey_id, request_caller(),
                                     current_app.config["CENTRAL_DELTA"], options,
                                     current_app.config["RELEASE_EVERY"],
                                     current_app.extensions["ldp_analyses"]))


@bp.get("/api/surveys/<survey_id>/crosstab")
def crosstab(survey_id: str):
    """Joint and conditional proportions of two questions. Query: rows, cols (question ids),
    confidence. Who may read it: as for the estimates."""
    args = request.args
    return jsonify(surveys.crosstab_document(get_db(), survey_id, request_caller(),
                                             args.get("rows"), args.get("cols"),
                                             confidence_level(args.get("confidence"))))
