"""Domain exceptions reach clients through one table: every one has its status and code."""

import pytest

from ldpsurvey.aggregator import exceptions
from ldpsurvey.aggregator.web.errors import ANSWERS


def all_domain_errors() -> set[type]:
    found, pending = set(), [exceptions.DomainError]
    while pending:
        for sub in pending.pop().__subclasses__():
            found.add(sub)
            pending.append(sub)
    return found


# The server-side answers: an analysis asked of a server installed without its extra or while
# as many analyses run as it allows at once, and a database that cannot serve the request now
# (database.unavailable).
SERVER_SIDE = {exceptions.AnalysisUnavailable: (501, "analysis_unavailable"),
               exceptions.AnalysisBusy: (503, "analyses_busy"),
               exceptions.DatabaseUnavailable: (503, "database_unavailable")}


def test_every_domain_exception_has_an_answer():
    assert all_domain_errors() == set(ANSWERS)
    for error, answer in ANSWERS.items():
        assert answer.code.isidentifier()
        assert 400 <= answer.status < 500 or SERVER_SIDE.get(error) == (answer.status, answer.code)


@pytest.mark.parametrize("path, status, text", [
    ("/s/no-such-survey", 404, "Survey not found"),
    ("/s/no-such-survey/results", 404, "Survey not found"),
])
def test_pages_answer_html_and_the_api_json(client, path, status, text):
    response = client.get(path)
    assert response.status_code == status and response.mimetype == "text/html"
    assert text in response.get_data(as_text=True)
    api = client.get("/api/surveys/no-such-survey/estimates")
    assert api.status_code == 404 and api.json["error"] == "unknown_survey"
