"""The OpenAPI 3 description of the HTTP API, served at /api/openapi.json.

Limits, patterns, roles and the estimate fields are read from the code and settings that
enforce them, so the description cannot drift from the behaviour.
"""

import types
import typing
from dataclasses import fields
from functools import cache
from typing import Any

from flask import Blueprint, current_app, jsonify

from ldpsurvey.shared import METHODS, Cell, Conditional, Estimate
from ldpsurvey.shared.manifest import CONCEPT
from ldpsurvey.shared.protocol import EXPORT_FORMATS, IDEMPOTENCY_KEY, RESEARCHER_NAME, ROLES

from .errors import ANSWERS
from .surveys import empty_estimate

bp = Blueprint("openapi", __name__)


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


ERRORS = {
    "400": "Malformed request: not JSON, bad header or query parameter",
    "401": "A key or invitation token is required",
    "403": "The key may not do this, or the invitation token is unknown or spent",
    "404": "No such survey (or one this key may not use, answered alike), researcher or key",
    "409": "Conflict with the survey's state or an earlier request",
    "413": "Body or batch too large",
    "415": "Body is not application/json",
    "422": "The content is invalid; detail says what",
    "429": "Too many requests from this client for this class of endpoint (limits.py); the "
           "Retry-After header says in how many seconds to retry",
}


def error_description(status: str) -> str:
    """The status's meaning and the `error` codes the server answers it with (from the one
    table in errors.py)."""
    codes = sorted(a.code for a in ANSWERS.values() if str(a.status) == status)
    return f"{ERRORS[status]}. error: {', '.join(codes)}"


def _error_response(status: str) -> dict:
    """The shared response of an error status; a 429 also names its Retry-After header."""
    response = _json(_ref("Error"), error_description(status))
    if status == "429":
        response["headers"] = {"Retry-After": {
            "description": "Seconds until this client may send again",
            "schema": {"type": "integer", "minimum": 0}}}
    return response


def _errors(*codes: str) -> dict:
    return {code: {"$ref": f"#/components/responses/Error{code}"} for code in codes}


SURVEY_ID = {"name": "survey_id", "in": "path", "required": True, "schema": {"type": "string"}}
NAME = {"name": "name", "in": "path", "required": True, "description": "A researcher's name",
        "schema": {"type": "string", "pattern": f"^{RESEARCHER_NAME.pattern}$"}}


def scheme(role: str) -> str:
    """The security scheme of a key role."""
    return f"{role}Key"


BEARER = [{scheme("researcher"): []}, {scheme("admin"): []}]  # keys held by people

JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}


def field_schema(annotation: Any, nullable: bool) -> dict:
    """The JSON schema of a dataclass field annotated int, float, str or bool (or X | None)."""
    if isinstance(annotation, types.UnionType):
        (annotation,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable = True
    schema: dict[str, Any] = {"type": JSON_TYPES[annotation]}
    if nullable:
        schema["nullable"] = True
    return schema


# What each point and interval field of an option, cross-tab cell or conditional means: the
# point shown to people lies in [0, 1] and inside [ci_low, ci_high]; p_hat stays unbiased.
POINTS = {
    "p_hat": "The unbiased estimate; it may leave [0, 1] (and its interval) when few respond",
    "standard_error": "p_hat's standard error",
    "p_hat_clipped": "p_hat projected onto the probability simplex",
    "p_mle": "The constrained maximum-likelihood estimate: in [0, 1], inside [ci_low, ci_high]; "
             "the point the results page and the CLI show",
    "p_constrained": "The point shown: from the joint table projected onto the probability "
                     "simplex, in [0, 1] and inside [ci_low, ci_high] (null for a conditional "
                     "whose row has a projected share of 0)",
    "ci_low": "Lower end of the confidence interval, in [0, 1]; it contains the point shown",
    "ci_high": "Upper end of the confidence interval, in [0, 1]; it contains the point shown",
}


def described(name: str, schema: dict) -> dict:
    """The schema with POINTS' description of the field `name`, if it has one."""
    return {**schema, "description": POINTS[name]} if name in POINTS else schema


def option_estimate() -> dict:
    """An option of the estimates document: its index and text, and every field of
    shared.Estimate (nullable where it is null before the question's first answer)."""
    before = empty_estimate(1.0, 0.95, "wilson")
    properties = {"index": {"type": "integer"}, "option": {"type": "string"}}
    for field in fields(Estimate):
        properties[field.name] = described(field.name, field_schema(field.type,
                                                                    before[field.name] is None))
    return {"type": "object", "required": list(properties), "properties": properties}


def matrix(description: str) -> dict:
    """A matrix of numbers as a list of rows (null before the first release)."""
    return {"type": "array", "nullable": True, "description": description,
            "items": {"type": "array", "items": {"type": "number"}}}


def dataclass_schema(cls: type) -> dict:
    """An object with exactly the fields of a shared dataclass (Cell, Conditional)."""
    properties = {field.name: described(field.name, field_schema(field.type, False))
                  for field in fields(cls)}
    return {"type": "object", "required": list(properties), "additionalProperties": False,
            "properties": properties}


def crosstab_schema() -> dict:
    """The cross-tab document: shared.CrossTab's fields and the survey and question ids."""
    return {
        "type": "object", "additionalProperties": False,
        "required": ["survey_id", "rows", "cols", "n", "confidence", "joint", "covariance",
                     "cells", "conditional"],
        "properties": {
            "survey_id": {"type": "string"},
            "rows": {"type": "string", "description": "Question A's id (rows: its options)"},
            "cols": {"type": "string", "description": "Question B's id (columns)"},
            "n": {"type": "integer", "minimum": 0,
                  "description": "Released responses (0: nothing else yet)"},
            "confidence": {"type": "number"},
            "joint": matrix("k_A x k_B unbiased joint proportions, row = option of A"),
            "covariance": matrix("Covariance of the row-major flattening of joint"),
            "cells": {"type": "array", "items": _ref("CrossTabCell"),
                      "description": "P(A = row, B = col), row-major"},
            "conditional": {"type": "array", "items": _ref("Conditional"),
                            "description": "P(B = col | A = row), delta-method intervals"}}}


def schemas(max_batch: int, max_tokens: int) -> dict[str, Any]:
    """The components' schemas, with the server's batch and token-count limits."""
    return {
        "Error": {"type": "object", "required": ["error", "detail"], "additionalProperties": False,
                  "properties": {"error": {"type": "string"}, "detail": {"type": "string"}}},
        "Key": {"type": "object", "required": ["algorithm", "key_id", "public_key"],
                "properties": {"algorithm": {"type": "string", "enum": ["Ed25519"]},
                               "key_id": {"type": "string"},
                               "public_key": {"type": "string", "format": "byte"}}},
        "SurveyDefinition": {
            "type": "object", "required": ["title", "questions"],
            "description": "A survey definition (see README: The survey file).",
            "properties": {
                "title": {"type": "string"}, "description": {"type": "string"},
                "max_epsilon": {"type": "number"}, "invitation_only": {"type": "boolean"},
                "public_results": {"type": "boolean"},
                "release_batch": {"type": "integer", "minimum": 1},
                "release_every": {"type": "number", "minimum": 0, "exclusiveMinimum": True,
                                  "description": "Seconds between scheduled releases, at "
                                                 "multiples of it since the Unix epoch (UTC): "
                                                 "results change only then. No count of "
                                                 "responses waiting for release is shown"},
                "crosstabs": {"type": "array", "description": "Pairs [rows, cols] of question "
                              "ids whose joint counts are kept at each release",
                              "items": {"type": "array", "minItems": 2, "maxItems": 2,
                                        "items": {"type": "string"}}},
                "questions": {"type": "array", "items": {
                    "type": "object", "required": ["id", "text", "type"],
                    "properties": {
                        "id": {"type": "string"}, "text": {"type": "string"},
                        "type": {"type": "string", "enum": ["yes_no", "choice"]},
                        "options": {"type": "array", "items": {"type": "string"}},
                        "alpha": {"type": "number"}, "epsilon": {"type": "number"},
                        "beta": {"oneOf": [{"type": "number"},
                                           {"type": "array", "items": {"type": "number"}}]},
                        "concept": {"type": "string", "pattern": f"^{CONCEPT.pattern}$",
                                    "description": "Answers reused across surveys: a "
                                                   "permanent randomized answer per device"},
                        "irr_alpha": {"type": "number", "exclusiveMinimum": True,
                                      "minimum": 0, "exclusiveMaximum": True, "maximum": 1,
                                      "description": "The instantaneous layer's alpha of a "
                                                     "concept question (default 0.75)"}}}}}},
        "Created": {"type": "object", "required": ["survey_id", "status", "total_epsilon",
                                                   "manifest_url"],
                    "properties": {"survey_id": {"type": "string"}, "status": {"type": "string"},
                                   "total_epsilon": {"type": "number"},
                                   "manifest_url": {"type": "string"}}},
        "SurveyList": {"type": "object", "required": ["surveys"], "properties": {"surveys": {
            "type": "array", "items": {
                "type": "object",
                "required": ["survey_id", "title", "status", "created", "n",
                             "invitation_only"],
                "additionalProperties": False,
                "properties": {"survey_id": {"type": "string"}, "title": {"type": "string"},
                               "status": {"type": "string", "enum": ["open", "closed"]},
                               "created": {"type": "string", "format": "date",
                                           "nullable": True},
                               "n": {"type": "integer", "minimum": 0,
                                     "description": "Released responses"},
                               "invitation_only": {"type": "boolean"}}}}}},
        "Status": {"type": "object", "required": ["survey_id", "status"],
                   "properties": {"survey_id": {"type": "string"},
                                  "status": {"type": "string", "enum": ["open", "closed"]}}},
        "Manifest": {"type": "object", "description": "The signed manifest (bytes as signed).",
                     "required": ["format", "survey_id", "key_id", "title", "questions",
                                  "total_epsilon"]},
        "Answers": {"type": "object", "required": ["answers"], "additionalProperties": False,
                    "properties": {"answers": {"type": "object", "description":
                                               "question id -> randomized option index",
                                               "additionalProperties": {"type": "integer",
                                                                        "minimum": 0}}}},
        "Batch": {"type": "object", "required": ["responses"], "additionalProperties": False,
                  "properties": {"responses": {"type": "array", "minItems": 1, "maxItems": max_batch,
                                               "items": _ref("Answers")}}},
        "Accepted": {"type": "object", "required": ["survey_id", "accepted"],
                     "properties": {"survey_id": {"type": "string"},
                                    "accepted": {"type": "integer", "minimum": 1}}},
        "TokenRequest": {"type": "object", "required": ["count"], "additionalProperties": False,
                         "properties": {"count": {"type": "integer", "minimum": 1,
                                                  "maximum": max_tokens}}},
        "Tokens": {"type": "object", "required": ["survey_id", "tokens", "links"],
                   "properties": {"survey_id": {"type": "string"},
                                  "tokens": {"type": "array", "items": {"type": "string"}},
                                  "links": {"type": "array", "items": {"type": "string"}}}},
        "Shares": {"type": "object", "required": ["survey_id", "shared_with"],
                   "properties": {"survey_id": {"type": "string"},
                                  "shared_with": {"type": "array", "items": {"type": "string"},
                                                  "description": "Researchers' names"}}},
        "OptionEstimate": option_estimate(),
        "CrossTabCell": dataclass_schema(Cell),
        "Conditional": dataclass_schema(Conditional),
        "CrossTab": crosstab_schema(),
        "Central": {
            "type": "object", "description": "The shuffle-amplified central epsilon",
            "required": ["delta", "epsilon_per_release", "epsilon_whole_survey", "assumes"],
            "additionalProperties": False,
            "properties": {"delta": {"type": "number"},
                           "epsilon_per_release": {"type": "number"},
                           "epsilon_whole_survey": {"type": "number"},
                           "assumes": {"type": "string"}}},
        "Codebook": codebook_schema(),
        "Estimates": {
            "type": "object",
            "required": ["survey_id", "title", "status", "total_epsilon", "confidence",
                         "ci_method", "simultaneous", "release_batch", "release_every",
                         "crosstabs", "central", "questions"],
            "additionalProperties": False,
            "properties": {
                "survey_id": {"type": "string"}, "title": {"type": "string"},
                "status": {"type": "string"}, "total_epsilon": {"type": "number"},
                "confidence": {"type": "number"}, "ci_method": {"type": "string"},
                "simultaneous": {"type": "boolean", "description": "Whether each question's "
                                 "intervals are simultaneous (cover together)"},
                "release_batch": {"type": "integer", "minimum": 1},
                "release_every": {"type": "number", "minimum": 0, "exclusiveMinimum": True,
                                  "description": "Seconds between scheduled releases, at "
                                                 "multiples of it since the Unix epoch (UTC): "
                                                 "results change only then. No count of "
                                                 "responses waiting for release is shown"},
                "crosstabs": {"type": "array", "description": "The declared cross-tabs",
                              "items": {"type": "array", "items": {"type": "string"}}},
                "central": _ref("Central"),
                "questions": {"type": "array", "items": {
                    "type": "object",
                    "required": ["id", "n", "epsilon", "alpha", "beta", "covariance", "options"],
                    "properties": {"id": {"type": "string"}, "text": {"type": "string"},
                                   "type": {"type": "string"}, "n": {"type": "integer"},
                                   "alpha": {"type": "number"}, "epsilon": {"type": "number"},
                                   "beta": {"type": "array", "items": {"type": "number"}},
                                   "covariance": matrix("k x k covariance of the options' "
                                                        "unbiased estimates p_hat"),
                                   "options": {"type": "array",
                                               "items": _ref("OptionEstimate")}}}}}},
    }


def _operation(summary: str, responses: dict, *, security: list | None = None,
               parameters: list | None = None, body: str | None = None,
               rate_limited: bool = True) -> dict:
    """One operation; every one but the health check is rate-limited per client (429)."""
    if rate_limited:
        responses = {**responses, **_errors("429")}
    operation: dict[str, Any] = {"summary": summary, "responses": responses}
    if security is not None:
        operation["security"] = security
    if parameters:
        operation["parameters"] = parameters
    if body:
        operation["requestBody"] = {"required": True, "content": {
            "application/json": {"schema": _ref(body)}}}
    return operation


IDEMPOTENCY = {"name": "Idempotency-Key", "in": "header", "required": False,
               "schema": {"type": "string", "pattern": f"^{IDEMPOTENCY_KEY.pattern}$"},
               "description": "Random per submission: a retry with the same key and body is "
                              "counted once."}
TOKEN = {"name": "Survey-Token", "in": "header", "required": False,
         "schema": {"type": "string"},
                "description": "The invitation token, for invitation-only surveys."}
CONFIDENCE = {"name": "confidence", "in": "query", "required": False,
              "schema": {"type": "number", "exclusiveMinimum": True, "minimum": 0,
                         "exclusiveMaximum": True, "maximum": 1}}
QUESTION = "A question id of the survey"
EXPORT = {"description": "One row per response, random order",
          "content": {"text/csv": {"schema": {"type": "string", "format": "binary"}}}}

EXPORT_FORMAT = {"name": "format", "in": "query", "required": False,
                 "description": "plain (default) or rr: R's rr package's layout",
                 "schema": {"type": "string", "enum": list(EXPORT_FORMATS)}}
CODES = {"name": "codes", "in": "query", "required": False,
         "description": "true: option codes instead of labels (plain format only)",
         "schema": {"type": "string", "enum": ["true", "false"]}}


def codebook_schema() -> dict:
    """exports.codebook's document."""
    number, text = {"type": "number"}, {"type": "string"}
    option = {"type": "object", "required": ["code", "label", "csv_value"],
              "additionalProperties": False,
              "properties": {"code": {"type": "integer", "minimum": 0}, "label": text,
                             "csv_value": text}}
    question = {"type": "object",
                "required": ["id", "text", "type", "options", "alpha", "beta", "epsilon"],
                "additionalProperties": False,
                "properties": {"id": text, "text": text, "type": text,
                               "options": {"type": "array", "items": option}, "alpha": number,
                               "beta": {"type": "array", "items": number}, "epsilon": number,
                               "concept": text, "irr_alpha": number}}
    return {"type": "object",
            "required": ["format", "survey_id", "title", "key_id", "release_batch",
                         "total_epsilon", "central", "released", "last_release",
                         "exported_at", "values", "questions"],
            "additionalProperties": False,
            "properties": {"format": text, "survey_id": text, "title": text, "key_id": text,
                           "release_batch": {"type": "integer", "minimum": 1},
                           "total_epsilon": number, "central": _ref("Central"),
                           "released": {"type": "integer", "minimum": 0},
                           "last_release": {"type": "integer", "minimum": 0,
                                            "description": "0: no release yet"},
                           "exported_at": {"type": "string", "format": "date-time"},
                           "values": text,
                           "questions": {"type": "array", "items": question}}}


PATHS = {
    "/healthz": {"get": _operation("Health check", {"200": _json(
        {"type": "object", "properties": {"status": {"type": "string"}}}, "Healthy")},
        rate_limited=False)},
    "/api/openapi.json": {"get": _operation("This description", {"200": _json(
        {"type": "object"}, "OpenAPI document")})},
    "/api/key": {"get": _operation("The aggregator's Ed25519 public key",
                                   {"200": _json(_ref("Key"), "The key")})},
    "/api/surveys": {
        "post": _operation("Publish a survey", {"201": _json(_ref("Created"), "Published"),
                                                **_errors("400", "401", "403", "413", "415",
                                                          "422")},
                           security=BEARER, body="SurveyDefinition"),
        "get": _operation("List surveys", {"200": _json(_ref("SurveyList"), "Surveys"),
                                           **_errors("401", "403")}, security=BEARER)},
    "/api/surveys/{survey_id}": {"get": _operation(
        "The signed manifest, byte for byte", {"200": _json(_ref("Manifest"), "Manifest"),
                                               **_errors("404")}, parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/manifest.sig": {"get": _operation(
        "Ed25519 signature over the manifest bytes",
        {"200": {"description": "64 bytes", "content": {"application/octet-stream": {
            "schema": {"type": "string", "format": "binary"}}}}, **_errors("404")},
        parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/status": {"get": _operation(
        "Open or closed", {"200": _json(_ref("Status"), "Status"), **_errors("404")},
        parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/responses": {"post": _operation(
        "Submit one respondent's randomized answers",
        {"201": _json(_ref("Accepted"), "Stored (or an idempotent replay)"),
         **_errors("400", "401", "403", "404", "409", "413", "415", "422")},
        parameters=[SURVEY_ID, IDEMPOTENCY, TOKEN], body="Answers")},
    "/api/surveys/{survey_id}/responses/batch": {"post": _operation(
        "Submit many responses, all or none",
        {"201": _json(_ref("Accepted"), "Stored"),
         **_errors("400", "401", "403", "404", "409", "413", "415", "422")},
        security=[*BEARER, {scheme("relay"): []}],
        parameters=[SURVEY_ID, IDEMPOTENCY], body="Batch")},
    "/api/surveys/{survey_id}/close": {"post": _operation(
        "Close a survey for good", {"200": _json(_ref("Status"), "Closed"),
                                    **_errors("401", "403", "404")},
        security=BEARER, parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/shares": {"get": _operation(
        "Who the survey is shared with (its owner or an admin asks)",
        {"200": _json(_ref("Shares"), "Names"), **_errors("401", "403", "404")},
        security=BEARER, parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/shares/{name}": {
        "put": _operation("Share the survey with a researcher, who may then read its results "
                          "and exports (owner or admin)",
                          {"200": _json(_ref("Shares"), "Shared"),
                           **_errors("401", "403", "404", "422")},
                          security=BEARER, parameters=[SURVEY_ID, NAME]),
        "delete": _operation("Stop sharing the survey with a researcher (owner or admin)",
                             {"200": _json(_ref("Shares"), "No longer shared"),
                              **_errors("401", "403", "404", "422")},
                             security=BEARER, parameters=[SURVEY_ID, NAME])},
    "/api/surveys/{survey_id}/tokens": {"post": _operation(
        "Mint single-use invitation tokens",
        {"201": _json(_ref("Tokens"), "Tokens and links"),
         **_errors("400", "401", "403", "404", "409", "413", "415", "422")},
        security=BEARER, parameters=[SURVEY_ID], body="TokenRequest")},
    "/api/surveys/{survey_id}/estimates": {"get": _operation(
        "Estimates per question and option",
        {"200": _json(_ref("Estimates"), "Estimates"), **_errors("400", "401", "404")},
        security=[{}, *BEARER, {scheme("relay"): []}],
        parameters=[SURVEY_ID, CONFIDENCE,
                    {"name": "method", "in": "query", "required": False,
                     "schema": {"type": "string",
                                "enum": list(METHODS)}},
                    {"name": "simultaneous", "in": "query", "required": False,
                     "description": "true: every option's interval is simultaneous across its "
                                    "question's options (joint coverage >= confidence)",
                     "schema": {"type": "string", "enum": ["true", "false"]}}])},
    "/api/surveys/{survey_id}/crosstab": {"get": _operation(
        "Joint and conditional proportions of two questions",
        {"200": _json(_ref("CrossTab"), "Cross-tab"), **_errors("400", "401", "404")},
        security=[{}, *BEARER, {scheme("relay"): []}],
        parameters=[SURVEY_ID,
                    {"name": "rows", "in": "query", "required": True, "description": QUESTION,
                     "schema": {"type": "string"}},
                    {"name": "cols", "in": "query", "required": True, "description": QUESTION,
                     "schema": {"type": "string"}},
                    CONFIDENCE])},
    "/api/surveys/{survey_id}/export.csv": {"get": _operation(
        "Export as CSV: question ids, then option labels (codes=true: codes); format=rr: the "
        "design in # comment lines, then codes",
        {"200": EXPORT, **_errors("400", "401", "403", "404")}, security=BEARER,
        parameters=[SURVEY_ID, EXPORT_FORMAT, CODES])},
    "/api/surveys/{survey_id}/codebook.json": {"get": _operation(
        "What each export's columns and values mean",
        {"200": _json(_ref("Codebook"), "Codebook"), **_errors("401", "403", "404")},
        security=BEARER, parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/codebook.md": {"get": _operation(
        "The codebook as Markdown tables",
        {"200": {"description": "Codebook", "content": {"text/markdown": {
            "schema": {"type": "string", "format": "binary"}}}}, **_errors("401", "403", "404")},
        security=BEARER, parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/export.jsonl": {"get": _operation(
        "Export as JSON lines", {"200": {"description": "Manifest line, then one per response",
                                         "content": {"application/jsonl": {
                                             "schema": {"type": "string",
                                                        "format": "binary"}}}},
                                 **_errors("400", "401", "403", "404")},
        security=BEARER, parameters=[SURVEY_ID])},
}

@cache
def document(max_batch: int, max_tokens: int) -> dict:
    """The whole description for a server with these limits."""
    return {
        "openapi": "3.0.3",
        "info": {"title": "ldp-survey aggregator", "version": "1",
                 "description": "Holds only randomized answers. Errors are "
                                "{\"error\": code, \"detail\": text}."},
        "paths": PATHS,
        "components": {
            "schemas": schemas(max_batch, max_tokens),
            "responses": {f"Error{status}": _error_response(status) for status in ERRORS},
            "securitySchemes": {
                scheme(role): {"type": "http", "scheme": "bearer",
                               "description": f"A {role} key from `ldp-survey admin create-key "
                                              f"--role {role}`" + KEY_LIMITS[role]}
                for role in ROLES},
        },
    }


KEY_LIMITS = {"researcher": ": publishes surveys and uses its own and those shared with it",
              "relay": ": may only submit batches, to the surveys named when it was made",
              "admin": ": may do anything to any survey"}


@bp.get("/api/openapi.json")
def serve_document():
    config = current_app.config
    return jsonify(document(config["MAX_BATCH_RESPONSES"], config["MAX_TOKENS_PER_REQUEST"]))
