"""/api/openapi.json describes the API: real responses conform to it."""

import pytest
from openapi_core import OpenAPI
from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest, WerkzeugOpenAPIResponse

from helpers import RECORDED_RESPONSES, SURVEY, description, operation_of

ANSWERS = {"answers": {"smoked": 1, "drove": 0, "sleep": 2}}


def exercise(client, auth):
    """One request, or more, to every operation, with successes and failures."""
    client.get("/healthz")
    client.get("/readyz")
    client.get("/api/key")
    client.get("/api/openapi.json")
    client.post("/api/surveys", json=SURVEY)
    client.post("/api/surveys", json={"title": "x"}, headers=auth)
    client.post("/api/surveys", data="x", content_type="text/plain", headers=auth)
    client.post("/api/surveys", data="{", content_type="application/json", headers=auth)
    survey_id = client.post("/api/surveys", json=SURVEY, headers=auth).json["survey_id"]
    invited = client.post("/api/surveys", json={**SURVEY, "invitation_only": True},
                          headers=auth).json["survey_id"]
    client.get("/api/surveys", headers=auth)
    client.get("/api/surveys")
    for sid in (survey_id, "nope"):
        client.get(f"/api/surveys/{sid}")
        client.get(f"/api/surveys/{sid}/manifest.sig")
        client.get(f"/api/surveys/{sid}/status")
    url = f"/api/surveys/{survey_id}/responses"
    client.post(url, json=ANSWERS, headers={"Idempotency-Key": "openapi-key-1"})
    client.post(url, json=ANSWERS, headers={"Idempotency-Key": "openapi-key-1"})
    client.post(url, json={"answers": {"smoked": 0, "drove": 0, "sleep": 2}},
                headers={"Idempotency-Key": "openapi-key-1"})
    client.post(url, json={"answers": {"smoked": 5}})
    client.post(url, data="x" * 70_000, content_type="application/json")
    client.post(url, json=ANSWERS, headers={"Idempotency-Key": "bad key"})
    preflight = {"Origin": "https://elsewhere.example", "Access-Control-Request-Method": "POST"}
    client.options(url, headers=preflight)  # 200: not one of its form_origins
    client.post(url, json=ANSWERS, headers={"Origin": "https://elsewhere.example"})  # 403
    client.post(f"/api/surveys/{invited}/responses", json=ANSWERS)
    client.post(f"/api/surveys/{invited}/responses", json=ANSWERS,
                headers={"Survey-Token": "A" * 22})
    client.post(f"/api/surveys/{invited}/tokens", json={"count": 2}, headers=auth)
    client.post(f"/api/surveys/{invited}/tokens", json={"count": 0}, headers=auth)
    client.post(f"/api/surveys/{survey_id}/tokens", json={"count": 1}, headers=auth)
    batch = f"/api/surveys/{survey_id}/responses/batch"
    client.post(batch, json={"responses": [ANSWERS] * 3}, headers=auth)
    client.post(batch, json={"responses": [ANSWERS]})
    for query in ("", "?confidence=0.9&method=wald", "?method=nope", "?simultaneous=true"):
        client.get(f"/api/surveys/{survey_id}/estimates{query}", headers=auth)
    client.get(f"/api/surveys/{survey_id}/estimates")
    client.get(f"/api/surveys/{invited}/estimates", headers=auth)  # no answers yet: nulls
    declared = client.post("/api/surveys", json={**SURVEY, "crosstabs": [["smoked", "sleep"]]},
                           headers=auth).json["survey_id"]
    client.post(f"/api/surveys/{declared}/responses/batch", json={"responses": [ANSWERS] * 3},
                headers=auth)
    for sid, query in ((declared, "rows=smoked&cols=sleep"), (survey_id, "rows=drove&cols=sleep"),
                       (invited, "rows=smoked&cols=sleep"), (survey_id, "rows=smoked"),
                       ("nope", "rows=smoked&cols=sleep")):
        client.get(f"/api/surveys/{sid}/crosstab?{query}", headers=auth)  # 200 (n 0), 400, 404
    client.get(f"/api/surveys/{survey_id}/crosstab?rows=smoked&cols=sleep")  # 401
    client.get(f"/api/surveys/{survey_id}/export.csv", headers=auth)
    client.get(f"/api/surveys/{survey_id}/export.jsonl", headers=auth)
    client.get(f"/api/surveys/{survey_id}/export.csv")
    for query in ("?codes=true", "?codes=false", "?format=rr", "?format=plain", "?format=spss",
                  "?format=rr&codes=true", "?codes=1"):
        client.get(f"/api/surveys/{survey_id}/export.csv{query}", headers=auth)  # 200, 400
    client.get(f"/api/surveys/{survey_id}/export.jsonl?codes=true", headers=auth)  # 400
    for kind in ("svg", "png"):  # 200, 401, 404, and 400 for an invitation-only survey
        for sid in (survey_id, "nope", invited):
            client.get(f"/api/surveys/{sid}/qr.{kind}", headers=auth)
        client.get(f"/api/surveys/{survey_id}/qr.{kind}")
    for kind in ("json", "md"):
        client.get(f"/api/surveys/{survey_id}/codebook.{kind}", headers=auth)
        client.get(f"/api/surveys/{survey_id}/codebook.{kind}")  # 401
        client.get(f"/api/surveys/nope/codebook.{kind}", headers=auth)  # 404
    from ldpsurvey.aggregator import create_api_key

    create_api_key(client.application, name="bob")
    client.put(f"/api/surveys/{survey_id}/shares/bob", headers=auth)
    client.put(f"/api/surveys/{survey_id}/shares/nobody", headers=auth)
    client.delete(f"/api/surveys/{survey_id}/shares/bob", headers=auth)
    client.get(f"/api/surveys/{survey_id}/shares", headers=auth)
    client.get("/api/surveys/nope/shares", headers=auth)
    client.post(f"/api/surveys/{invited}/responses/batch", json={"responses": [ANSWERS]},
                headers=auth)  # batches are refused on invitation-only surveys: 403
    lifecycle(client, auth)
    client.post(f"/api/surveys/{survey_id}/close", headers=auth)
    client.post(f"/api/surveys/{survey_id}/close")
    client.post("/api/surveys/nope/close", headers=auth)
    client.post(url, json=ANSWERS)  # closed


def lifecycle(client, auth):
    """Drafts, publishing, copies, archiving and deletion: each step's success and refusals."""
    drafted = client.post("/api/surveys?draft=true", json=SURVEY, headers=auth).json["survey_id"]
    client.post("/api/surveys?draft=maybe", json=SURVEY, headers=auth)  # 400
    client.get("/api/surveys?archived=true", headers=auth)
    client.get("/api/surveys?archived=1", headers=auth)  # 400
    definition = f"/api/surveys/{drafted}/definition"
    client.put(definition, json=SURVEY, headers=auth)  # 200
    client.put(definition, json={"title": "x"}, headers=auth)  # 422
    client.get(f"/api/surveys/{drafted}/export.csv", headers=auth)  # 409: a draft
    client.get(f"/api/surveys/{drafted}/shares", headers=auth)  # 409
    client.post(f"/api/surveys/{drafted}/close", headers=auth)  # 409
    client.post(f"/api/surveys/{drafted}/publish", headers=auth)  # 200
    client.post(f"/api/surveys/{drafted}/publish", headers=auth)  # 409
    client.put(definition, json=SURVEY, headers=auth)  # 409
    client.post("/api/surveys/nope/publish", headers=auth)  # 404
    copied = client.post(f"/api/surveys/{drafted}/copy", headers=auth).json["survey_id"]
    client.post("/api/surveys/nope/copy", headers=auth)  # 404
    for action in ("archive", "unarchive"):
        client.post(f"/api/surveys/{drafted}/{action}", headers=auth)  # 409: open
        client.post(f"/api/surveys/nope/{action}", headers=auth)  # 404
    client.delete(f"/api/surveys/{drafted}", headers=auth)  # 409: open
    client.delete(f"/api/surveys/{drafted}?force=yes", headers=auth)  # 400
    client.post(f"/api/surveys/{drafted}/close", headers=auth)
    client.post(f"/api/surveys/{drafted}/archive", headers=auth)  # 200
    client.post(f"/api/surveys/{drafted}/unarchive", headers=auth)  # 200
    client.delete(f"/api/surveys/{drafted}")  # 401
    client.delete(f"/api/surveys/{drafted}", headers=auth)  # 200
    client.delete(f"/api/surveys/{drafted}", headers=auth)  # 404
    client.delete(f"/api/surveys/{copied}", headers=auth)  # 200: a draft


def test_every_response_conforms_to_the_description(client, auth):
    """Every API response any test receives is checked against the description as it arrives
    (helpers.conforms, in the recording test client); here, every documented operation is
    exercised, with successes and failures, so that check is never vacuous."""
    document = client.get("/api/openapi.json").json
    assert document == description(client.application.config)[0]  # what conforms checks with
    exercise(client, auth)
    operations = {(method, path) for path, item in document["paths"].items() for method in item}
    seen = {(sent.method.lower(), operation_of(sent.path, document), response.status_code)
            for sent, response in RECORDED_RESPONSES}
    exercised = {(method, template) for method, template, _ in seen}
    assert operations <= exercised, operations - exercised
    assert len({status for *_, status in seen}) >= 9  # 200 201 400 401 403 404 409 413 415 422


@pytest.mark.parametrize("bad_status", [200])
def test_a_nonconforming_response_is_caught(client, bad_status, monkeypatch):
    """The checker itself: a body without a key the description promises is refused, by the
    recording client as the response arrives."""
    from openapi_core.exceptions import OpenAPIError

    import helpers

    document = client.get("/api/openapi.json").json
    document["paths"]["/healthz"]["get"]["responses"]["200"]["content"]["application/json"][
        "schema"] = {"type": "object", "required": ["nothing_like_this"]}
    limits = (client.application.config["MAX_BATCH_RESPONSES"],
              client.application.config["MAX_TOKENS_PER_REQUEST"])
    monkeypatch.setitem(helpers._DESCRIPTIONS, limits, (document, OpenAPI.from_dict(document)))
    with pytest.raises(OpenAPIError):
        client.get("/healthz")
    monkeypatch.undo()
    assert client.get("/healthz").status_code == bad_status  # the real description: it conforms


def test_limits_patterns_roles_and_fields_come_from_the_code(database_url, tmp_path):
    """The description follows the server's own settings and the code that enforces them."""
    from dataclasses import fields

    from ldpsurvey.aggregator import close_app, create_app
    from ldpsurvey.shared import Estimate
    from ldpsurvey.shared.http_contract import IDEMPOTENCY_KEY, ROLES

    app = create_app({"DATABASE_URL": database_url, "MAX_BATCH_RESPONSES": 50,
                      "MAX_TOKENS_PER_REQUEST": 7}, instance_path=tmp_path)
    document = app.test_client().get("/api/openapi.json").json
    close_app(app)
    schemas = document["components"]["schemas"]
    assert schemas["Batch"]["properties"]["responses"]["maxItems"] == 50
    assert schemas["TokenRequest"]["properties"]["count"]["maximum"] == 7
    header = document["paths"]["/api/surveys/{survey_id}/responses"]["post"]["parameters"][1]
    assert header["schema"]["pattern"] == f"^{IDEMPOTENCY_KEY.pattern}$"
    assert set(document["components"]["securitySchemes"]) == {f"{r}Key" for r in ROLES}
    option = schemas["OptionEstimate"]
    assert option["required"] == ["index", "option", *(f.name for f in fields(Estimate))]
    assert {"p_mle", "fit_p_value", "warning"} <= set(option["required"])
    assert option["properties"]["warning"] == {"type": "string", "nullable": True}
    question = schemas["Estimates"]["properties"]["questions"]["items"]
    assert "covariance" in question["required"]
    assert {"simultaneous", "crosstabs"} <= set(schemas["Estimates"]["required"])
    from ldpsurvey.shared import Cell, Conditional

    assert schemas["CrossTabCell"]["required"] == [f.name for f in fields(Cell)]
    assert schemas["Conditional"]["required"] == [f.name for f in fields(Conditional)]
    parameters = document["paths"]["/api/surveys/{survey_id}/crosstab"]["get"]["parameters"]
    assert [p["name"] for p in parameters] == ["survey_id", "rows", "cols", "confidence"]


def test_rate_limited_replies_conform_to_the_description(database_url, tmp_path):
    """Every operation but the health checks documents 429 with Retry-After, and real 429s from
    a client over its limit (a submission, an estimates read) conform to it."""
    from ldpsurvey.aggregator import close_app, create_api_key, create_app

    app = create_app({"DATABASE_URL": database_url, "RATE_LIMIT_SUBMIT": "1 per minute",
                      "RATE_LIMIT_RESULTS": "1 per minute"}, instance_path=tmp_path)
    try:
        client = app.test_client()
        document = client.get("/api/openapi.json").json
        for path, item in document["paths"].items():
            for operation in item.values():
                assert ("429" in operation["responses"]) == (path not in ("/healthz", "/readyz")), path
        headers = document["components"]["responses"]["Error429"]["headers"]
        assert set(headers) == {"Retry-After"}
        auth = {"Authorization": f"Bearer {create_api_key(app).key}"}
        survey_id = client.post("/api/surveys", json={**SURVEY, "public_results": True},
                                headers=auth).json["survey_id"]
        api = OpenAPI.from_dict(document)
        for method, url, body in (("post", f"/api/surveys/{survey_id}/responses", ANSWERS),
                                  ("get", f"/api/surveys/{survey_id}/estimates", None)):
            replies = [getattr(client, method)(url, json=body) for _ in range(2)]
            assert replies[0].status_code != 429 and replies[1].status_code == 429
            assert int(replies[1].headers["Retry-After"]) > 0
            api.validate_response(WerkzeugOpenAPIRequest(replies[1].request),
                                  WerkzeugOpenAPIResponse(replies[1]))
    finally:
        close_app(app)


def test_every_field_of_every_scheme_is_described_in_the_codebook():
    """The codebook's question schema takes its fields from the scheme registry
    (manifest.QUESTION_FIELDS): piecewise's and hybrid's grid, window, duchi_alpha and
    piecewise_share were left out of a hand-kept list; each now has a type and a description
    (a new scheme's field without one fails here)."""
    from ldpsurvey.aggregator.web.openapi import codebook_schema
    from ldpsurvey.shared.survey.manifest import QUESTION_FIELDS

    properties = codebook_schema()["properties"]["questions"]["items"]["properties"]
    for name in QUESTION_FIELDS:
        assert "type" in properties[name] or "oneOf" in properties[name], name
        assert name in ("options", "alpha", "beta", "epsilon", "concept", "irr_alpha") or (
            properties[name].get("description")), name


def test_the_codebook_of_every_mechanism_is_as_the_served_description_says(client, auth):
    """The codebook and estimates of a survey holding every scheme the registry declares
    validate against /api/openapi.json as served: its question fields are generated from the
    registry's declarations (a hand-kept list once refused piecewise's grid and window)."""
    from ldpsurvey.shared import parse_manifest
    from ldpsurvey.shared.mechanisms import registry

    from helpers import EVERY_TYPE

    survey_id = client.post("/api/surveys", json=EVERY_TYPE, headers=auth).json["survey_id"]
    survey = parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    assert {(q.type, q.scheme.name) for q in survey.questions} == registry.offered()
    api = OpenAPI.from_dict(client.get("/api/openapi.json").json)
    for path in ("codebook.json", "estimates"):
        response = client.get(f"/api/surveys/{survey_id}/{path}", headers=auth)
        assert response.status_code == 200, path
        api.validate_response(WerkzeugOpenAPIRequest(response.request),
                              WerkzeugOpenAPIResponse(response))


def test_every_declared_field_is_described_with_its_bounds():
    """The definition's and the codebook's question fields are the registry's, each with its
    type, bounds and meaning."""
    from ldpsurvey.aggregator.web.openapi import codebook_schema, document
    from ldpsurvey.shared.mechanisms import registry

    definition = document(10, 10)["components"]["schemas"]["SurveyDefinition"]
    asked = definition["properties"]["questions"]["items"]["properties"]
    book = codebook_schema()["properties"]["questions"]["items"]["properties"]
    for declared in registry.DECLARATIONS:
        for param in declared.params:
            assert param.meaning in asked[param.name]["description"], param.name
            assert asked[param.name]["type" if "type" in asked[param.name] else "oneOf"] == (
                param.json_schema()["type" if param.schema is None else next(iter(param.schema))])
            assert param.name in book, param.name
    assert asked["grid"]["minimum"] == 2 and asked["piecewise_share"]["exclusiveMaximum"]
