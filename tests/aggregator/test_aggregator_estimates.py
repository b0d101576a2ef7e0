import copy

import pytest

from ldpsurvey.shared import covariance, estimate, parse_manifest

from helpers import SURVEY, release_due


def submit_batch(client, survey_id, auth, responses):
    """Submit and run the next scheduled release."""
    response = client.post(f"/api/surveys/{survey_id}/responses/batch",
                           json={"responses": [{"answers": a} for a in responses]}, headers=auth)
    assert response.status_code == 201
    release_due(client.application)


RESPONSES = ([{"smoked": 1, "drove": 0, "sleep": 1}] * 40 + [{"smoked": 0, "drove": 1, "sleep": 0}]
             * 35 + [{"smoked": 0, "drove": 0, "sleep": 2}] * 25)


@pytest.mark.parametrize("query, confidence, method", [
    ("", 0.95, "clopper-pearson"),
    ("?confidence=0.9&method=wilson", 0.9, "wilson"),
    ("?method=wald", 0.95, "wald"),
])
def test_estimates_equal_the_shared_estimator_on_the_counts(client, auth, survey_id, query,
                                                            confidence, method):
    submit_batch(client, survey_id, auth, RESPONSES)
    survey = parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    body = client.get(f"/api/surveys/{survey_id}/estimates{query}", headers=auth).json
    assert body["total_epsilon"] == survey.total_epsilon
    assert (body["confidence"], body["ci_method"]) == (confidence, method)
    for question, reported in zip(survey.questions, body["questions"], strict=True):
        counts = [sum(1 for r in RESPONSES if r[question.id] == j)
                  for j in range(len(question.options))]
        expected = estimate(question.mechanism, counts, confidence=confidence, method=method)
        assert reported["n"] == 100 and reported["epsilon"] == question.epsilon
        for option, want in zip(reported["options"], expected, strict=True):
            got = {key: option[key] for key in want.as_dict()}
            assert got == want.as_dict()


def test_estimate_keys_are_present_before_any_answer(client, auth, survey_id):
    body = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    option = body["questions"][0]["options"][1]
    assert option["n"] == 0 and option["p_hat"] is None and option["ci_low"] is None
    assert {"p_hat", "p_hat_clipped", "standard_error", "ci_low", "ci_high", "ci_method",
            "design_consistent", "epsilon"} <= set(option)


def test_private_results_need_a_researcher_key(client, auth, survey_id):
    response = client.get(f"/api/surveys/{survey_id}/estimates")
    assert response.status_code == 401 and response.json["error"] == "unauthorized"
    public = copy.deepcopy(SURVEY) | {"public_results": True}
    sid = client.post("/api/surveys", json=public, headers=auth).json["survey_id"]
    assert client.get(f"/api/surveys/{sid}/estimates").status_code == 200


@pytest.mark.parametrize("query", ["?confidence=1", "?confidence=abc", "?confidence=0",
                                   "?method=bayes", "?confidence=nan", "?simultaneous=yes"])
def test_bad_estimate_parameters(client, auth, survey_id, query):
    response = client.get(f"/api/surveys/{survey_id}/estimates{query}", headers=auth)
    assert response.status_code == 400 and response.json["error"] == "invalid_parameter"


def question_counts(question):
    return [sum(1 for r in RESPONSES if r[question.id] == j) for j in range(len(question.options))]


def test_each_question_carries_the_covariance_of_its_estimates(client, auth, survey_id):
    before = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    assert all(q["covariance"] is None for q in before["questions"])
    submit_batch(client, survey_id, auth, RESPONSES)
    survey = parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    body = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    for question, reported in zip(survey.questions, body["questions"], strict=True):
        expected = covariance(question.reported_mechanism, question_counts(question))
        assert reported["covariance"] == [list(row) for row in expected]
        for j, option in enumerate(reported["options"]):  # its diagonal: the SE squared
            assert option["standard_error"] ** 2 == pytest.approx(expected[j][j], rel=1e-12)


def test_simultaneous_intervals_on_request(client, auth, survey_id):
    submit_batch(client, survey_id, auth, RESPONSES)
    survey = parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    url = f"/api/surveys/{survey_id}/estimates"
    single = client.get(url, headers=auth).json
    joint = client.get(f"{url}?simultaneous=true", headers=auth).json
    assert single["simultaneous"] is False and joint["simultaneous"] is True
    assert client.get(f"{url}?simultaneous=false", headers=auth).json == single
    for question, one, together in zip(survey.questions, single["questions"], joint["questions"],
                                       strict=True):
        expected = estimate(question.reported_mechanism, question_counts(question),
                            confidence=0.95, simultaneous=True)
        for option, want, alone in zip(together["options"], expected, one["options"], strict=True):
            assert (option["ci_low"], option["ci_high"]) == (want.ci_low, want.ci_high)
            assert option["ci_low"] <= alone["ci_low"] and alone["ci_high"] <= option["ci_high"]
            assert option["confidence"] == 0.95 and option["p_hat"] == alone["p_hat"]
