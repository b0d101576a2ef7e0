"""Fixtures of the tests that attack the respondent form (test_form_attacks, test_extension):
an attack proxy in front of a live aggregator, and a form behind it."""

import pytest
from attack_proxy import attack_proxy

from helpers import SURVEY


@pytest.fixture
def proxy(app, live_server):
    """A proxy in front of the aggregator, at the origin its surveys are signed for."""
    with attack_proxy(live_server) as found:
        app.config["PUBLIC_URL"] = found.url
        yield found


# Within the form's default ceilings (ln 3 per question), so that it runs in the browser.
FORM_SURVEY = {**SURVEY, "questions": [q for q in SURVEY["questions"] if q["id"] != "drove"]}


@pytest.fixture
def form_url(proxy, client, auth) -> str:
    survey_id = client.post("/api/surveys", json=FORM_SURVEY, headers=auth).json["survey_id"]
    return f"{proxy.url}/s/{survey_id}"
