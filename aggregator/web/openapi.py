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

from ldpsurvey.aggregator.web.errors import ANSWERS
from ldpsurvey.aggregator.web.qr import FORMATS as QR_FORMATS
from ldpsurvey.shared import METHODS, Cell, Conditional, Estimate
from ldpsurvey.shared.http_contract import EXPORT_FORMATS, IDEMPOTENCY_KEY, RESEARCHER_NAME, ROLES
from ldpsurvey.shared.mechanisms import registry
from ldpsurvey.shared.mechanisms.protocol import PROBABILITIES, Settings, empty_entry
from ldpsurvey.shared.survey.manifest import LANGUAGE, MAX_FORM_ORIGINS

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
    "422": "The content is invalid (or a regression has no maximum); detail says what",
    "429": "Too many requests from this client for this class of endpoint (limits.py); the "
           "Retry-After header says in how many seconds to retry",
    "501": "This server lacks what the request needs (the analysis extra)",
    "503": "The server cannot serve this now: its database (unreachable, restarting, its disk "
           "full, a lock not free in time), or as many analyses as it runs at once are running; "
           "the Retry-After header says in how many seconds to retry",
}


def error_description(status: str) -> str:
    """The status's meaning and the `error` codes the server answers it with (from the one
    table in errors.py)."""
    codes = sorted(a.code for a in ANSWERS.values() if str(a.status) == status)
    return f"{ERRORS[status]}. error: {', '.join(codes)}"


def _error_response(status: str) -> dict:
    """The shared response of an error status; a 429 and a 503 also name their Retry-After
    header."""
    response = _json(_ref("Error"), error_description(status))
    if status in ("429", "503"):
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
    "reported_count": "How many reports name the option (null for a design's shares, such as "
                      "cheating detection's, which no single count gives)",
    "reported_rate": "reported_count / n (null where reported_count is)",
}
# Fields of shared.Estimate that a design's shares leave null (shared/mechanisms/cheating.py).
NULL_IN_DESIGNS = {"reported_count", "reported_rate"}


def declared_fields() -> dict[str, dict]:
    """Every field a mechanism or design declares (registry.DECLARATIONS): its JSON schema
    (type and bounds) and what it means, to each mechanism that takes it."""
    schemas: dict[str, dict] = {}
    meanings: dict[str, list[str]] = {}
    for declared in registry.DECLARATIONS:
        for param in declared.params:
            schemas.setdefault(param.name, param.json_schema())
            if param.meaning not in meanings.setdefault(param.name, []):
                meanings[param.name].append(param.meaning)
    return {name: {**schemas[name], "description": "; ".join(meanings[name])}
            for name in sorted(schemas)}


# A number question's distribution (square_wave; shared/mechanisms/square_wave.py): bins and quartiles.
_INTERVAL = {"ci_low": {"type": "number"}, "ci_high": {"type": "number"}}
DISTRIBUTION = {
    "type": "object", "nullable": True,
    "description": "square_wave (a survey file's distribution = true): the histogram's bins "
                   "(ends in the answer's units, shares of respondents) and the quartiles (in "
                   "the answer's units), each point inside its exact interval; null before the "
                   "first release",
    "required": ["bins", "quantiles", "ci_method", "confidence"], "additionalProperties": False,
    "properties": {
        "bins": {"type": "array", "items": {
            "type": "object", "required": ["low", "high", "share", "ci_low", "ci_high"],
            "additionalProperties": False,
            "properties": {"low": {"type": "number"}, "high": {"type": "number"},
                           "share": {"type": "number"}, **_INTERVAL}}},
        "quantiles": {"type": "array", "items": {
            "type": "object", "required": ["q", "value", "ci_low", "ci_high"],
            "additionalProperties": False,
            "properties": {"q": {"type": "number"}, "value": {"type": "number"}, **_INTERVAL}}},
        "ci_method": {"type": "string"}, "confidence": {"type": "number"}}}


# What the estimates and the codebook say of a question beyond its declared fields (a
# survey's `distribution = true` is the estimates' distribution).
QUESTION_EXTRAS = {
    "mechanism": {"type": "string", "description": "Absent: forced response"},
    "histogram": {"type": "string", "description": "square_wave: what its distribution's "
                  "estimates are"},
    "distribution": DISTRIBUTION,
    "scale": {"type": "object", "description": "numeric: the mean's scale (min, max, unit): "
              "its p_hat, p_mle, ci_low, ci_high and standard_error are in these units"},
    "warning": {"type": "string", "nullable": True, "description": "Why a whole question's "
                "estimates need care (padding and sampling: biased if anyone selected more than "
                "max_selected; cheating detection: respondents who answer No regardless)"},
}


def mechanism_parameters() -> dict[str, dict]:
    """A question's mechanism and every field of every scheme, as the estimates and the
    codebook carry them (numbers there unbounded: an open question's epsilon is 0)."""
    return {**declared_fields(), **QUESTION_EXTRAS, "alpha": {"type": "number"},
            "epsilon": {"type": "number"}, "beta": PROBABILITIES}


def described(name: str, schema: dict) -> dict:
    """The schema with POINTS' description of the field `name`, if it has one."""
    return {**schema, "description": POINTS[name]} if name in POINTS else schema


def option_estimate() -> dict:
    """An option of the estimates document: its index and text, and every field of
    shared.Estimate (nullable where it is null before the question's first answer)."""
    before = empty_entry(1.0, Settings(0.95, "wilson"))
    properties = {"index": {"type": "integer"}, "option": {"type": "string"}}
    for field in fields(Estimate):
        properties[field.name] = described(field.name, field_schema(
            field.type, before[field.name] is None or field.name in NULL_IN_DESIGNS))
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


def _numbers(fields_: str, **extra: dict) -> dict:
    """An object whose space-separated fields_ are numbers, plus `extra` fields."""
    properties = {name: {"type": "number"} for name in fields_.split()} | extra
    return {"type": "object", "required": list(properties), "additionalProperties": False,
            "properties": properties}


def regression_schema() -> dict:
    """ldpsurvey.analysis.Regression's fields (written out: the server loads the analysis
    package only when asked for a regression; test_api_regression checks they match)."""
    text, nullable_text = {"type": "string"}, {"type": "string", "nullable": True}
    schema = _numbers(
        "effective_n confidence log_likelihood", formula=text, outcome=text,
        n={"type": "integer"}, iterations={"type": "integer"}, variance=text,
        randomized_covariates={"type": "array", "items": text},
        coefficients={"type": "array", "items": _numbers(
            "estimate standard_error ci_low ci_high z p_value", name=text)},
        covariance=matrix("Covariance of the coefficients, in their order"),
        predicted={"type": "array", "description": "The model's prevalence of a true yes, "
                   "overall (variable null) and per level of each categorical covariate",
                   "items": _numbers("n prevalence standard_error ci_low ci_high",
                                     variable=nullable_text, level=nullable_text)})
    return {**schema, "nullable": True,
            "description": "With regress: the maximum-likelihood logistic regression of a "
                           "randomized yes/no question on others (null before the first release)"}


def weighted_schema() -> dict:
    """ldpsurvey.analysis.weighted_results' document (written out, as regression_schema)."""
    text = {"type": "string"}
    option = _numbers("effective_n epsilon reported_rate p_hat p_hat_clipped standard_error "
                      "confidence ci_low ci_high", option=text, n={"type": "integer"})
    weights = _numbers("effective_n min_weight max_weight", n={"type": "integer"},
                       iterations={"type": "integer"},
                       margins={"type": "array", "items": text})
    question = {"type": "object", "properties": {
        "id": text, "disclosed": {"type": "boolean"},
        "options": {"type": "array", "items": option}}}
    left_out = {"type": "array", "description": "The questions not weighted, each with why "
                "(a mechanism other than forced response)",
                "items": {"type": "object", "required": ["id", "reason"],
                          "additionalProperties": False,
                          "properties": {"id": text, "reason": text}}}
    return {"type": "object", "nullable": True, "additionalProperties": False,
            "required": ["weights", "confidence", "questions", "left_out"],
            "description": "With weights: raking weights to the margins (Kish's effective_n), "
                           "the weighted estimate of every yes/no and choice question's options "
                           "(SEs by linearization) and with regress the weighted regression "
                           "(null before the first release)",
            "properties": {"weights": weights, "confidence": {"type": "number"},
                           "questions": {"type": "array", "items": question},
                           "left_out": left_out, "regression": regression_schema()}}


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
            "description": "A survey definition (see docs/survey-file.md).",
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
                "languages": {"type": "array", "minItems": 1,
                              "items": {"type": "string", "pattern": f"^{LANGUAGE.pattern}$"},
                              "description": "The survey's languages, the first its texts' "
                                             "own (default [\"en\"]; manifest format /8)"},
                "form_origins": {"type": "array", "maxItems": MAX_FORM_ORIGINS, "uniqueItems": True,
                                 "items": {"type": "string", "format": "uri"},
                                 "description": "Web origins (https://host[:port]) that may "
                                                "host a copy of the form (`ldp-survey survey "
                                                "form`); the service answers their "
                                                "cross-origin requests (manifest format /9)"},
                "translations": {"type": "object", "description": "Per other language: title, "
                                 "description and per question id text, hint, options, unit "
                                 "(docs/survey-file.md, In several languages)",
                                 "additionalProperties": {"type": "object"}},
                "questions": {"type": "array", "items": {
                    "type": "object", "required": ["id", "text", "type"],
                    "properties": {
                        **declared_fields(),
                        "id": {"type": "string"}, "text": {"type": "string"},
                        "hint": {"type": "string", "description": "Shown under the text"},
                        "type": {"type": "string", "enum": list(registry.QUESTION_TYPES)},
                        "options": {"type": "array", "items": {"type": "string"}},
                        "mechanism": {"type": "string",
                                      "enum": sorted({d.name for d in registry.DECLARATIONS
                                                      if d.key == "mechanism"}),
                                      "description": "How a choice question is randomized "
                                                     "(default forced_response), or a "
                                                     "multi_select (default auto) or numeric "
                                                     "one; auto: the lowest variance at its "
                                                     "epsilon"}}}}}},
        "Created": {"type": "object", "required": ["survey_id", "status", "total_epsilon",
                                                   "manifest_url"],
                    "properties": {"survey_id": {"type": "string"},
                                   "status": {"type": "string", "enum": ["open", "draft"]},
                                   "total_epsilon": {"type": "number"},
                                   "manifest_url": {"type": "string", "nullable": True,
                                                    "description": "null for a draft: it has "
                                                                   "no manifest until published"}}},
        "Archived": {"type": "object", "required": ["survey_id", "status", "archived"],
                     "additionalProperties": False,
                     "properties": {"survey_id": {"type": "string"},
                                    "status": {"type": "string", "enum": ["closed"]},
                                    "archived": {"type": "boolean"}}},
        "Deleted": {"type": "object", "required": ["survey_id", "status"],
                    "additionalProperties": False,
                    "properties": {"survey_id": {"type": "string"},
                                   "status": {"type": "string", "enum": ["deleted"]}}},
        "SurveyList": {"type": "object", "required": ["surveys"], "properties": {"surveys": {
            "type": "array", "items": {
                "type": "object",
                "required": ["survey_id", "title", "status", "created", "n",
                             "invitation_only", "archived"],
                "additionalProperties": False,
                "properties": {"survey_id": {"type": "string"}, "title": {"type": "string"},
                               "status": {"type": "string", "enum": ["draft", "open", "closed"]},
                               "created": {"type": "string", "format": "date",
                                           "nullable": True,
                                           "description": "The day published (a draft: made)"},
                               "n": {"type": "integer", "minimum": 0,
                                     "description": "Released responses"},
                               "invitation_only": {"type": "boolean"},
                               "archived": {"type": "boolean"}}}}}},
        "Status": {"type": "object", "required": ["survey_id", "status"],
                   "properties": {"survey_id": {"type": "string"},
                                  "status": {"type": "string", "enum": ["open", "closed"]},
                                  "release_every": {"type": "number", "description": "Seconds "
                                                    "between scheduled releases"}}},
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
                "regression": regression_schema(),
                "weighted": weighted_schema(),
                "questions": {"type": "array", "items": {
                    "type": "object",
                    "required": ["id", "n", "epsilon", "covariance", "options"],
                    "properties": {"id": {"type": "string"}, "text": {"type": "string"},
                                   "type": {"type": "string"}, "n": {"type": "integer"},
                                   **mechanism_parameters(),
                                   "covariance": matrix("k x k covariance of the options' "
                                                        "unbiased estimates p_hat"),
                                   "options": {"type": "array",
                                               "items": _ref("OptionEstimate")}}}}}},
    }


def _operation(summary: str, responses: dict, *, security: list | None = None,
               parameters: list | None = None, body: str | None = None,
               rate_limited: bool = True, database: bool = True) -> dict:
    """One operation; every one but the health checks is rate-limited per client (429);
    every one that reads the `database` may find it unavailable (503)."""
    if rate_limited:
        responses = {**responses, **_errors("429")}
    if database:
        responses = {**responses, **_errors("503")}
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


def flag(name: str, description: str) -> dict:
    """A true/false query parameter (absent: false)."""
    return {"name": name, "in": "query", "required": False, "description": description,
            "schema": {"type": "string", "enum": ["true", "false"]}}


CODES = flag("codes", "true: option codes instead of labels (plain format only)")


def codebook_schema() -> dict:
    """exports.codebook's document."""
    number, text = {"type": "number"}, {"type": "string"}
    option = {"type": "object", "required": ["code", "label", "csv_value"],
              "additionalProperties": False,
              "properties": {"code": {"type": "integer", "minimum": 0}, "label": text,
                             "csv_value": text}}
    question = {"type": "object",  # epsilon: absent for an openly answered question
                "required": ["id", "text", "type", "options", "report", "cells"],
                "additionalProperties": False,
                "properties": {"id": text, "text": text, "type": text,
                               "hint": {**text, "description": "Shown under the text, when "
                                        "the question has one"},
                               **mechanism_parameters(),
                               "columns": {"type": "array", "items": text},
                               "report": {**text, "description": "What one report is"},
                               "cells": {**text, "description": "What each of the question's "
                                         "CSV cells holds, labels and codes"},
                               "options": {"type": "array", "items": option}}}
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
    "/healthz": {"get": _operation("Liveness: the process answers, whatever the database does",
                                   {"200": _json({"type": "object", "properties": {
                                       "status": {"type": "string"}}}, "Alive")},
                                   rate_limited=False, database=False)},
    "/readyz": {"get": _operation("Readiness: the database answers within seconds",
                                  {"200": _json({"type": "object", "properties": {
                                      "status": {"type": "string"}}}, "Ready")},
                                  rate_limited=False)},
    "/api/openapi.json": {"get": _operation("This description", {"200": _json(
        {"type": "object"}, "OpenAPI document")}, database=False)},
    "/api/key": {"get": _operation("The aggregator's Ed25519 public key",
                                   {"200": _json(_ref("Key"), "The key")},
                                   database=False)},
    "/api/surveys": {
        "post": _operation("Publish a survey, or keep it as a draft (draft=true)",
                           {"201": _json(_ref("Created"), "Published, or kept as a draft"),
                            **_errors("400", "401", "403", "413", "415", "422")},
                           security=BEARER, body="SurveyDefinition",
                           parameters=[flag("draft", "true: keep it as a draft (no manifest, "
                                                     "404 to respondents) to edit and publish "
                                                     "later")]),
        "get": _operation("List surveys and drafts (archived ones with archived=true)",
                          {"200": _json(_ref("SurveyList"), "Surveys"),
                           **_errors("400", "401", "403")}, security=BEARER,
                          parameters=[flag("archived", "true: archived surveys too")])},
    "/api/surveys/{survey_id}": {
        "get": _operation("The signed manifest, byte for byte",
                          {"200": _json(_ref("Manifest"), "Manifest"), **_errors("404")},
                          parameters=[SURVEY_ID]),
        "delete": _operation("Delete a survey or draft with every response, token and counter "
                             "of it (owner or admin); an open one only with force=true",
                             {"200": _json(_ref("Deleted"), "Deleted"),
                              **_errors("400", "401", "403", "404", "409")},
                             security=BEARER,
                             parameters=[SURVEY_ID, flag("force", "true: delete an open "
                                                                  "survey too")])},
    "/api/surveys/{survey_id}/definition": {"put": _operation(
        "Replace a draft's definition (a published survey never changes: copy it)",
        {"200": _json(_ref("Created"), "Edited"),
         **_errors("400", "401", "403", "404", "409", "413", "415", "422")},
        security=BEARER, parameters=[SURVEY_ID], body="SurveyDefinition")},
    "/api/surveys/{survey_id}/publish": {"post": _operation(
        "Publish a draft under its id: sign its manifest and open it",
        {"200": _json(_ref("Created"), "Published"), **_errors("401", "403", "404", "409",
                                                               "422")},
        security=BEARER, parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/copy": {"post": _operation(
        "A new draft with the survey's definition, owned by the caller",
        {"201": _json(_ref("Created"), "The new draft"), **_errors("401", "403", "404",
                                                                   "422")},
        security=BEARER, parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/archive": {"post": _operation(
        "Hide a closed survey from listings, keeping its data (owner or admin)",
        {"200": _json(_ref("Archived"), "Archived"), **_errors("401", "403", "404", "409")},
        security=BEARER, parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/unarchive": {"post": _operation(
        "List an archived survey again (owner or admin)",
        {"200": _json(_ref("Archived"), "No longer archived"),
         **_errors("401", "403", "404", "409")},
        security=BEARER, parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/manifest.sig": {"get": _operation(
        "Ed25519 signature over the manifest bytes",
        {"200": {"description": "64 bytes", "content": {"application/octet-stream": {
            "schema": {"type": "string", "format": "binary"}}}}, **_errors("404")},
        parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/status": {"get": _operation(
        "Open or closed", {"200": _json(_ref("Status"), "Status"), **_errors("404")},
        parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/responses": {"post": _operation(
        "Submit one respondent's randomized answers (a browser's Origin must be the survey's "
        "own or one of its form_origins: else 403 origin_not_allowed)",
        {"201": _json(_ref("Accepted"), "Stored (or an idempotent replay)"),
         **_errors("400", "401", "403", "404", "409", "413", "415", "422")},
        parameters=[SURVEY_ID, IDEMPOTENCY, TOKEN], body="Answers"),
        "options": _operation(
            "A browser's preflight (CORS) of a post from a page elsewhere: allowed for the "
            "survey's form_origins only",
            {"204": {"description": "Allowed: Access-Control-Allow-Origin names the Origin"},
             "200": {"description": "Not allowed (or not a preflight): Allow only"}},
            parameters=[SURVEY_ID], database=False)},
    "/api/surveys/{survey_id}/responses/batch": {"post": _operation(
        "Submit many responses, all or none",
        {"201": _json(_ref("Accepted"), "Stored"),
         **_errors("400", "401", "403", "404", "409", "413", "415", "422")},
        security=[*BEARER, {scheme("relay"): []}],
        parameters=[SURVEY_ID, IDEMPOTENCY], body="Batch")},
    "/api/surveys/{survey_id}/close": {"post": _operation(
        "Close a survey for good", {"200": _json(_ref("Status"), "Closed"),
                                    **_errors("401", "403", "404", "409")},
        security=BEARER, parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/shares": {"get": _operation(
        "Who the survey is shared with (its owner or an admin asks)",
        {"200": _json(_ref("Shares"), "Names"), **_errors("401", "403", "404", "409")},
        security=BEARER, parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/shares/{name}": {
        "put": _operation("Share the survey with a researcher, who may then read its results "
                          "and exports (owner or admin)",
                          {"200": _json(_ref("Shares"), "Shared"),
                           **_errors("401", "403", "404", "409", "422")},
                          security=BEARER, parameters=[SURVEY_ID, NAME]),
        "delete": _operation("Stop sharing the survey with a researcher (owner or admin)",
                             {"200": _json(_ref("Shares"), "No longer shared"),
                              **_errors("401", "403", "404", "409", "422")},
                             security=BEARER, parameters=[SURVEY_ID, NAME])},
    "/api/surveys/{survey_id}/tokens": {"post": _operation(
        "Mint single-use invitation tokens",
        {"201": _json(_ref("Tokens"), "Tokens and links"),
         **_errors("400", "401", "403", "404", "409", "413", "415", "422")},
        security=BEARER, parameters=[SURVEY_ID], body="TokenRequest")},
    "/api/surveys/{survey_id}/estimates": {"get": _operation(
        "Estimates per question and option",
        {"200": _json(_ref("Estimates"), "Estimates"),
         **_errors("400", "401", "404", "422", "501", "503")},
        security=[{}, *BEARER, {scheme("relay"): []}],
        parameters=[SURVEY_ID, CONFIDENCE,
                    {"name": "regress", "in": "query", "required": False,
                     "description": "A formula `outcome ~ a + b` of question ids (+, : and *): "
                                    "adds `regression`, the logistic regression of the "
                                    "randomized yes/no outcome on the others",
                     "schema": {"type": "string", "minLength": 1, "maxLength": 1000}},
                    {"name": "weights", "in": "query", "required": False,
                     "description": "Population margins of openly answered questions, as JSON "
                                    "{question id: {option label: share}} (shares summing to 1, "
                                    "or percentages to 100): adds `weighted`, raking weights and "
                                    "weighted estimates (and regression, with regress) instead "
                                    "of `regression`. A level held by fewer respondents than the "
                                    "server's MIN_CELL setting is refused",
                     "schema": {"type": "string", "minLength": 2, "maxLength": 20000}},
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
        {"200": EXPORT, **_errors("400", "401", "403", "404", "409")}, security=BEARER,
        parameters=[SURVEY_ID, EXPORT_FORMAT, CODES])},
    **{f"/api/surveys/{{survey_id}}/qr.{kind}": {"get": _operation(
        f"The QR code of the respondent link, as {kind.upper()} (a published survey, not "
        "invitation-only)",
        {"200": {"description": "QR code", "content": {media: {
            "schema": {"type": "string", "format": "binary"}}}},
         **_errors("400", "401", "403", "404", "409")},
        security=BEARER, parameters=[SURVEY_ID])} for kind, media in QR_FORMATS.items()},
    "/api/surveys/{survey_id}/codebook.json": {"get": _operation(
        "What each export's columns and values mean",
        {"200": _json(_ref("Codebook"), "Codebook"), **_errors("401", "403", "404", "409")},
        security=BEARER, parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/codebook.md": {"get": _operation(
        "The codebook as Markdown tables",
        {"200": {"description": "Codebook", "content": {"text/markdown": {
            "schema": {"type": "string", "format": "binary"}}}},
         **_errors("401", "403", "404", "409")},
        security=BEARER, parameters=[SURVEY_ID])},
    "/api/surveys/{survey_id}/export.jsonl": {"get": _operation(
        "Export as JSON lines", {"200": {"description": "Manifest line, then one per response",
                                         "content": {"application/jsonl": {
                                             "schema": {"type": "string",
                                                        "format": "binary"}}}},
                                 **_errors("400", "401", "403", "404", "409")},
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
