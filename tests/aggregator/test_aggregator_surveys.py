import base64
import copy
import json
import stat

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ldpsurvey.shared import parse_manifest

from helpers import SURVEY, release_due


def test_create_publishes_a_signed_immutable_manifest(client, auth, survey_id):
    raw = client.get(f"/api/surveys/{survey_id}").data
    signature = client.get(f"/api/surveys/{survey_id}/manifest.sig").data
    key = client.get("/api/key").json
    Ed25519PublicKey.from_public_bytes(base64.b64decode(key["public_key"])).verify(signature, raw)
    survey = parse_manifest(raw)
    assert survey.survey_id == survey_id and survey.key_id == key["key_id"]
    assert [q.id for q in survey.questions] == ["smoked", "drove", "sleep"]
    assert survey.question("sleep").epsilon == pytest.approx(1.0)
    # closing changes the status, never the signed bytes
    assert client.post(f"/api/surveys/{survey_id}/close", headers=auth).json["status"] == "closed"
    assert client.get(f"/api/surveys/{survey_id}").data == raw
    assert client.get(f"/api/surveys/{survey_id}/status").json["status"] == "closed"


def test_key_file_is_private_and_stable(app, client, tmp_path):
    path = tmp_path / "instance" / "signing-key.pem"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    from ldpsurvey.aggregator import close_app, create_app

    again = create_app({"DATABASE_URL": app.config["DATABASE_URL"]},
                       instance_path=tmp_path / "instance")
    assert again.test_client().get("/api/key").json == client.get("/api/key").json
    close_app(again)


def test_production_refuses_to_start_without_key_file_and_secret(tmp_path):
    from ldpsurvey.aggregator import ConfigurationError, create_app

    with pytest.raises(ConfigurationError, match="KEY_FILE"):
        create_app({"DEPLOYMENT": "production", "SECRET_KEY": "x"}, instance_path=tmp_path)
    with pytest.raises(ConfigurationError, match="SECRET_KEY"):
        create_app({"DEPLOYMENT": "production", "KEY_FILE": str(tmp_path / "k.pem")},
                   instance_path=tmp_path)
    assert not (tmp_path / "signing-key.pem").exists()


def test_create_requires_a_researcher_key(client):
    assert client.post("/api/surveys", json=SURVEY).status_code == 401
    wrong = {"Authorization": "Bearer ldp_res_not-a-key"}
    response = client.post("/api/surveys", json=SURVEY, headers=wrong)
    assert response.status_code == 401 and response.json["error"] == "unauthorized"


def test_relay_key_cannot_create(app, client, survey_id):
    from ldpsurvey.aggregator import create_api_key

    relay = create_api_key(app, "relay", surveys=(survey_id,)).key
    response = client.post("/api/surveys", json=SURVEY, headers={"Authorization": f"Bearer {relay}"})
    assert response.status_code == 403


def _survey_with(**question_changes):
    survey = copy.deepcopy(SURVEY)
    survey["questions"][0].update(question_changes)
    return survey


@pytest.mark.parametrize("survey, code, detail", [
    (_survey_with(alpha=1.0), "invalid_survey", "question 'smoked'.alpha"),
    (_survey_with(alpha=0.0), "invalid_survey", "question 'smoked'.alpha"),
    (_survey_with(beta=0.0), "invalid_survey", "question 'smoked'.beta"),
    (_survey_with(beta=1.0), "invalid_survey", "question 'smoked'.beta"),
    (_survey_with(alpha=0.999), "epsilon_above_cap", "question 'smoked'"),
    ({**SURVEY, "max_epsilon": 1.0}, "invalid_survey", "survey.max_epsilon"),
    ({**SURVEY, "title": 5}, "invalid_survey", "survey.title"),
    ({"questions": []}, "invalid_survey", "survey"),
])
def test_invalid_surveys_are_refused_with_the_reason(client, auth, survey, code, detail):
    response = client.post("/api/surveys", json=survey, headers=auth)
    assert response.status_code == 422
    assert response.json["error"] == code and detail in response.json["detail"]
    assert client.get("/api/surveys", headers=auth).json["surveys"] == []


def test_epsilon_cap_is_configurable(database_url, tmp_path):
    from ldpsurvey.aggregator import close_app, create_api_key, create_app

    app = create_app({"DATABASE_URL": database_url, "EPSILON_CAP": 0.5},
                     instance_path=tmp_path / "i")
    key = create_api_key(app).key
    response = app.test_client().post("/api/surveys", json=SURVEY,
                                      headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 422 and response.json["error"] == "epsilon_above_cap"
    close_app(app)


def test_create_refuses_non_json(client, auth):
    response = client.post("/api/surveys", data=json.dumps(SURVEY), headers=auth,
                           content_type="text/plain")
    assert response.status_code == 415 and response.json["error"] == "unsupported_media_type"


def test_unknown_survey_everywhere_is_404_json(client, auth):
    for path in ("/api/surveys/nope", "/api/surveys/nope/manifest.sig",
                 "/api/surveys/nope/status", "/api/surveys/nope/estimates"):
        response = client.get(path, headers=auth)
        assert response.status_code == 404 and response.json["error"] == "unknown_survey"
    response = client.post("/api/surveys/nope/close", headers=auth)
    assert response.status_code == 404 and response.json["error"] == "unknown_survey"


def test_unknown_route_and_method_are_json(client):
    assert client.get("/api/nothing").json["error"] == "not_found"
    response = client.delete("/api/key")
    assert response.status_code == 405 and response.json["error"] == "method_not_allowed"


def test_close_requires_key_and_is_final(client, auth, survey_id):
    assert client.post(f"/api/surveys/{survey_id}/close").status_code == 401
    assert client.post(f"/api/surveys/{survey_id}/close", headers=auth).status_code == 200
    response = client.post(f"/api/surveys/{survey_id}/responses",
                           json={"answers": {"smoked": 1, "drove": 0, "sleep": 2}})
    assert response.status_code == 409 and response.json["error"] == "survey_closed"


def test_health(client):
    assert client.get("/healthz").json == {"status": "ok"}


def test_the_cap_applies_to_the_epsilon_the_randomizer_realizes(client, auth):
    """With beta_0 = 1e-9 the integer thresholds realize 5.000000028 where the formula gives
    5.0: above a cap of 5, so refused; a beta below 1e-9 is refused outright."""
    from ldpsurvey.shared import alpha_for_epsilon

    beta = [1e-9, 1 - 1e-9]
    tiny = _survey_with(alpha=alpha_for_epsilon(5.0, beta), beta=beta)
    response = client.post("/api/surveys", json=tiny, headers=auth)
    assert response.status_code == 422 and response.json["error"] == "epsilon_above_cap"
    assert "5.00000002" in response.json["detail"]
    tinier = _survey_with(alpha=0.5, beta=[1.9999 / 2**53, 1 - 1.9999 / 2**53])
    response = client.post("/api/surveys", json=tinier, headers=auth)
    assert response.status_code == 422 and "at least 1e-09" in response.json["detail"]


def test_the_manifest_publishes_the_epsilon_the_randomizer_realizes(client, auth):
    """Published per-question and total epsilon are the integer randomizer's (what clients
    enforce), not the nominal formula's; a manifest stating the nominal value (as before 0.2)
    still parses."""
    from ldpsurvey.shared import alpha_for_epsilon, parse_manifest
    from ldpsurvey.shared.mechanisms.randomizer import realized_epsilon, thresholds

    beta = [1e-8, 1 - 1e-8]
    alpha = alpha_for_epsilon(4.0, beta)
    created = client.post("/api/surveys", json=_survey_with(alpha=alpha, beta=beta), headers=auth)
    assert created.status_code == 201, created.json
    manifest = client.get(f"/api/surveys/{created.json['survey_id']}").get_data()
    stated = json.loads(manifest)
    realized = realized_epsilon(thresholds(alpha, beta))
    assert realized - 4.0 > 1e-9  # the two differ by more than the parsing tolerance
    smoked = next(q for q in stated["questions"] if q["id"] == "smoked")
    assert smoked["epsilon"] == realized
    assert parse_manifest(manifest).question("smoked").epsilon == realized
    smoked["epsilon"] = 4.0
    stated["total_epsilon"] -= realized - 4.0
    assert parse_manifest(json.dumps(stated).encode()).question("smoked").epsilon == realized


def test_the_listing_shows_title_day_and_counts(client, auth):
    from ldpsurvey.aggregator.store.connection import today

    survey = {**copy.deepcopy(SURVEY), "release_batch": 2}
    survey_id = client.post("/api/surveys", json=survey, headers=auth).json["survey_id"]
    for _ in range(3):
        client.post(f"/api/surveys/{survey_id}/responses",
                    json={"answers": {"smoked": 1, "drove": 0, "sleep": 2}})
    release_due(client.application)
    (listed,) = client.get("/api/surveys", headers=auth).json["surveys"]
    assert listed == {"survey_id": survey_id, "title": "Habits", "status": "open",
                      "created": today(), "n": 3, "invitation_only": False, "archived": False}
