"""What researchers call: create and close surveys, batch intake, estimates."""

from dataclasses import fields, replace

from flask import Blueprint, Response, current_app, jsonify, request, url_for

from ldpsurvey.shared import (
    DEFAULT_CONFIDENCE,
    DEFAULT_METHOD,
    METHODS,
    Estimate,
    SurveyError,
    estimate,
    parse_definition,
)
from ldpsurvey.shared.budget import exceeds

from . import exports, store
from .answers import parse_batch
from .auth import request_role, require_key
from .db import get_db
from .errors import ApiError
from .requests import idempotency_key, json_body
from .respondents import accepted

bp = Blueprint("researchers", __name__)
ESTIMATE_KEYS = [field.name for field in fields(Estimate)]


@bp.post("/api/surveys")
@require_key("researcher")
def create_survey():
    """Validate a survey definition, publish its signed manifest, open it."""
    try:
        survey = parse_definition(json_body())
    except SurveyError as exc:
        raise ApiError(422, "invalid_survey", str(exc)) from None
    cap = float(current_app.config["EPSILON_CAP"])
    for question in survey.questions:
        if exceeds(question.epsilon, cap):
            raise ApiError(422, "epsilon_above_cap", f"question {question.id!r}: epsilon "
                           f"{question.epsilon:.6g} is above this server's cap {cap:g}")
    key = current_app.extensions["ldp_signing_key"]
    survey = replace(survey, survey_id=store.new_ids(1)[0], key_id=key.key_id)
    store.create_survey(get_db(), survey, key.sign(survey.manifest_bytes()))
    response = jsonify(survey_id=survey.survey_id, status="open",
                       total_epsilon=survey.total_epsilon,
                       manifest_url=url_for("respondents.manifest", survey_id=survey.survey_id))
    response.status_code = 201
    response.headers["Location"] = response.json["manifest_url"]
    return response


@bp.get("/api/surveys")
@require_key("researcher")
def list_surveys():
    surveys = store.list_surveys(get_db())
    return jsonify(surveys=[{"survey_id": sid, "status": status} for sid, status in surveys])


@bp.post("/api/surveys/<survey_id>/close")
@require_key("researcher")
def close_survey(survey_id: str):
    """Close for good: the survey refuses answers from now on."""
    store.close_survey(get_db(), survey_id)
    return jsonify(survey_id=survey_id, status="closed")


@bp.post("/api/surveys/<survey_id>/responses/batch")
@require_key("researcher", "relay")
def submit_batch(survey_id: str):
    """Many responses at once: all stored or none."""
    body = json_body()
    key = idempotency_key()
    db = get_db()
    survey = store.get_survey(db, survey_id).survey
    responses = parse_batch(survey, body, current_app.config["MAX_BATCH_RESPONSES"])
    return accepted(survey_id, store.store_responses(db, survey, responses, key))


@bp.post("/api/surveys/<survey_id>/tokens")
@require_key("researcher")
def mint_tokens(survey_id: str):
    """Single-use invitation tokens and links carrying them in the URL fragment."""
    db = get_db()
    stored = store.get_survey(db, survey_id)
    if not stored.survey.invitation_only:
        raise ApiError(409, "not_invitation_only", "this survey is open to anyone; tokens are "
                       "for invitation-only surveys")
    if stored.status != "open":
        raise ApiError(409, "survey_closed", "this survey is closed")
    body = json_body()
    count = body.get("count") if isinstance(body, dict) and set(body) == {"count"} else None
    limit = current_app.config["MAX_TOKENS_PER_REQUEST"]
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= limit:
        raise ApiError(422, "invalid_count", f"send {{\"count\": N}} with N from 1 to {limit}")
    tokens = store.mint_tokens(db, survey_id, count)
    link = url_for("pages.survey_form", survey_id=survey_id, _external=True)
    response = jsonify(survey_id=survey_id, tokens=tokens,
                       links=[f"{link}#t={token}" for token in tokens])
    response.status_code = 201
    return response


@bp.get("/api/surveys/<survey_id>/export.<any(csv, jsonl):kind>")
@require_key("researcher")
def export(survey_id: str, kind: str):
    """Every response, one per row in random order, with the manifest and design parameters."""
    db = get_db()
    stored = store.get_survey(db, survey_id)
    rows = store.shuffled_answers(db, survey_id)
    if kind == "csv":
        body, mimetype = exports.to_csv(stored.survey, stored.manifest, rows), "text/csv"
    else:
        body, mimetype = exports.to_jsonl(stored.survey, stored.manifest, rows), \
            "application/jsonl"
    return Response(body, mimetype=mimetype, headers={
        "Content-Disposition": f'attachment; filename="{survey_id}.{kind}"'})


@bp.get("/api/surveys/<survey_id>/estimates")
def estimates(survey_id: str):
    """Per question and option, the shared estimator applied to the stored counts.

    Query: confidence (default 0.95), method (default wilson; clopper-pearson, wald).
    Public-results surveys need no key; others need a researcher key.
    """
    db = get_db()
    stored = store.get_survey(db, survey_id)
    if not stored.survey.public_results and request_role() != "researcher":
        raise ApiError(401, "unauthorized", "this survey's results need a researcher key")
    confidence, method = _estimate_options()
    return jsonify(estimates_body(db, stored, confidence, method))


def estimates_body(db, stored: store.StoredSurvey, confidence: float, method: str) -> dict:
    """The estimates document: per question its parameters and, per option, the estimate keys
    (null before the first answer)."""
    survey = stored.survey
    counts = store.counts(db, survey.survey_id)
    questions = []
    for question in survey.questions:
        options = [{"index": j, "option": text} for j, text in enumerate(question.options)]
        question_counts = counts[question.id]
        n = sum(question_counts)
        if n:
            for entry, result in zip(options, estimate(question.mechanism, question_counts,
                                                       confidence=confidence, method=method),
                                     strict=True):
                entry.update(result.as_dict())
        else:
            for entry in options:  # nothing to estimate yet: every estimate key, as null
                entry.update(dict.fromkeys(ESTIMATE_KEYS), n=0, reported_count=0,
                             ci_method=method, confidence=confidence, epsilon=question.epsilon)
        questions.append({"id": question.id, "text": question.text, "type": question.type,
                          "alpha": question.mechanism.alpha,
                          "beta": list(question.mechanism.beta),
                          "epsilon": question.epsilon, "n": n,
                          "options": options})
    return {"survey_id": survey.survey_id, "title": survey.title, "status": stored.status,
            "total_epsilon": survey.total_epsilon, "confidence": confidence, "ci_method": method,
            "questions": questions}


def _estimate_options() -> tuple[float, str]:
    method = request.args.get("method", DEFAULT_METHOD)
    if method not in METHODS:
        raise ApiError(400, "invalid_parameter", f"method must be one of {', '.join(METHODS)}")
    try:
        confidence = float(request.args.get("confidence", DEFAULT_CONFIDENCE))
    except ValueError:
        confidence = -1.0
    if not 0.0 < confidence < 1.0:
        raise ApiError(400, "invalid_parameter", "confidence must be a number in (0, 1)")
    return confidence, method
