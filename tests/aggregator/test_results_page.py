"""The results page: warnings beside the numbers, and the cross-tab of a chosen pair."""

import html

from helpers import SURVEY, release_due

RESPONSES = [{"smoked": 1, "drove": 0, "sleep": 0}] * 12 + [{"smoked": 0, "drove": 1, "sleep": 2}] * 8


def published(client, auth) -> str:
    definition = {**SURVEY, "public_results": True, "crosstabs": [["smoked", "sleep"]]}
    survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
    client.post(f"/api/surveys/{survey_id}/responses/batch",
                json={"responses": [{"answers": a} for a in RESPONSES]}, headers=auth)
    release_due(client.application)
    return survey_id


def page(client, survey_id, query=""):
    response = client.get(f"/s/{survey_id}/results{query}")
    return response.status_code, html.unescape(response.get_data(as_text=True))


def test_warnings_stand_beside_the_numbers(client, auth):
    status, text = page(client, published(client, auth))
    assert status == 200
    assert text.count("small sample: n = 20 < 30") == 7  # every option of the three questions
    assert "Estimate (MLE)" in text and "±" not in text


def test_the_declared_crosstab_by_default_and_any_chosen_pair(client, auth):
    survey_id = published(client, auth)
    crosstab = client.get(f"/api/surveys/{survey_id}/crosstab?rows=smoked&cols=sleep").json
    _, text = page(client, survey_id)
    first = crosstab["cells"][0]
    assert "P(sleep | smoked)" in text
    assert f'Joint" class="nowrap">{first["p_constrained"] * 100:.1f} %' in text
    _, chosen = page(client, survey_id, "?rows=drove&cols=smoked")
    assert "P(smoked | drove)" in chosen and 'value="drove" selected' in chosen
    status, bad = page(client, survey_id, "?rows=drove&cols=nope")
    assert status == 400 and "cols must be a question id" in bad


def test_alpha_is_explained_as_the_chance_the_truth_is_reported(client, auth):
    """alpha is P(report the true answer); a forced answer comes with 1 - alpha."""
    survey = {**SURVEY, "public_results": True}
    survey_id = client.post("/api/surveys", json=survey, headers=auth).json["survey_id"]
    page = client.get(f"/s/{survey_id}/results").get_data(as_text=True)
    assert "(alpha, chance the true answer is reported) 0.500" in page
    assert "chance of a forced answer" not in page


def test_the_estimates_csv_runs_no_formula_in_a_spreadsheet(client, auth):
    """A question or option text starting with = + - @ would run as a formula when the CSV is
    opened in a spreadsheet: it is written with a leading apostrophe."""
    survey = {**SURVEY, "public_results": True, "questions": [
        {"id": "q", "text": "=1+1 hours?", "type": "choice", "epsilon": 1.0,
         "options": ['=HYPERLINK("http://x.example")', "+1", "fine"]}]}
    survey_id = client.post("/api/surveys", json=survey, headers=auth).json["survey_id"]
    rows = client.get(f"/s/{survey_id}/results/estimates.csv").get_data(as_text=True)
    assert "'=1+1 hours?" in rows and '\'=HYPERLINK(""http://x.example"")' in rows
    assert ",'+1," in rows and ",fine," in rows
