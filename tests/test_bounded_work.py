"""Attacks on the work and reply size a caller can choose: cross-tabs of many-option questions
(a 64 x 64 one made a 367 MiB reply and took 1.4 GB of server memory). A cross-tab has at most
crosstab.MAX_CELLS cells: declared pairs are refused at publish and by `survey check`, any other
request before any work, and the largest allowed reply stays under crosstab.reply_bound."""

import json
import secrets

import pytest
from click.testing import CliRunner

from ldpsurvey.cli import main
from ldpsurvey.shared.crosstab import MAX_CELLS, reply_bound

from helpers import release_due


def question(qid: str, k: int) -> dict:
    return {"id": qid, "text": f"{qid}?", "type": "choice",
            "options": [f"option {j}" for j in range(k)], "epsilon": 1.0}


def definition(k_rows: int, k_cols: int, declared: bool) -> dict:
    return {"title": "Wide", "public_results": True, "release_batch": 1,
            "questions": [question("wide_a", k_rows), question("wide_b", k_cols)],
            **({"crosstabs": [["wide_a", "wide_b"]]} if declared else {})}


def published(client, auth, k_rows: int, k_cols: int, declared: bool) -> str:
    """A public-results survey of two questions with 200 responses released."""
    response = client.post("/api/surveys", json=definition(k_rows, k_cols, declared), headers=auth)
    assert response.status_code == 201, response.json
    survey_id = response.json["survey_id"]
    answers = [{"answers": {"wide_a": secrets.randbelow(k_rows), "wide_b": secrets.randbelow(k_cols)}}
               for _ in range(200)]
    stored = client.post(f"/api/surveys/{survey_id}/responses/batch", json={"responses": answers},
                         headers=auth)
    assert stored.status_code == 201, stored.json
    assert release_due(client.application) == 200
    return survey_id


def test_a_64_by_64_crosstab_declaration_is_refused_at_creation_naming_the_limit(client, auth):
    """The attacker's survey cannot be published: 422 naming the pair, its cells and the
    limit, and nothing is stored."""
    response = client.post("/api/surveys", json=definition(64, 64, declared=True), headers=auth)
    assert response.status_code == 422
    assert response.json["error"] == "invalid_survey"
    assert response.json["detail"] == (
        f"survey.crosstabs[0]: a cross-tab of 64 x 64 options has 4096 cells, above the limit "
        f"of {MAX_CELLS} cells per cross-tab")
    assert client.get("/api/surveys", headers=auth).json["surveys"] == []


@pytest.mark.parametrize("k_rows, k_cols, accepted", [(16, 16, True), (64, 4, True),
                                                      (17, 16, False), (64, 64, False)])
def test_survey_check_applies_the_same_limit(tmp_path, k_rows, k_cols, accepted):
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(definition(k_rows, k_cols, declared=True)))
    checked = CliRunner().invoke(main, ["survey", "check", str(path), "--json"])
    if accepted:
        assert checked.exit_code == 0, checked.output
        return
    assert checked.exit_code != 0
    message = checked.output.strip()
    assert "\n" not in message
    assert f"{k_rows} x {k_cols} options has {k_rows * k_cols} cells" in message
    assert f"the limit of {MAX_CELLS} cells" in message


@pytest.mark.parametrize("k_rows, k_cols", [(17, 16), (64, 64)])
@pytest.mark.parametrize("where", ["api", "page"])
def test_an_anonymous_crosstab_above_the_limit_is_refused_before_any_work(client, auth, k_rows,
                                                                          k_cols, where):
    """The attack: anonymous, on a public-results survey, a cross-tab of two undeclared wide
    questions (tallied from every response). The attacker gets a 400 naming the limit and
    nothing of the table."""
    survey_id = published(client, auth, k_rows, k_cols, declared=False)
    query = "rows=wide_a&cols=wide_b"
    if where == "api":
        response = client.get(f"/api/surveys/{survey_id}/crosstab?{query}")
        assert response.status_code == 400
        assert response.json == {"error": "invalid_parameter", "detail": (
            f"a cross-tab of {k_rows} x {k_cols} options has {k_rows * k_cols} cells, above "
            f"the limit of {MAX_CELLS} cells per cross-tab")}
    else:
        response = client.get(f"/s/{survey_id}/results?{query}")
        assert response.status_code == 400
        assert f"the limit of {MAX_CELLS} cells per cross-tab" in response.get_data(as_text=True)
    assert len(response.data) < 10_000


@pytest.mark.parametrize("k_rows, k_cols, declared", [(16, 16, True), (64, 4, True),
                                                      (4, 64, False)])
def test_the_largest_allowed_crosstab_reply_stays_under_its_bound(client, auth, k_rows, k_cols,
                                                                  declared):
    """Every allowed cross-tab, anonymous, has at most MAX_CELLS cells and a reply of at most
    reply_bound(MAX_CELLS) bytes, under 2 MiB."""
    assert k_rows * k_cols == MAX_CELLS
    survey_id = published(client, auth, k_rows, k_cols, declared)
    response = client.get(f"/api/surveys/{survey_id}/crosstab?rows=wide_a&cols=wide_b")
    assert response.status_code == 200
    body = response.json
    assert body["n"] == 200 and len(body["covariance"]) == MAX_CELLS
    assert len(response.data) <= reply_bound(MAX_CELLS) < 2 * 2**20
    page = client.get(f"/s/{survey_id}/results?rows=wide_a&cols=wide_b")
    assert page.status_code == 200
