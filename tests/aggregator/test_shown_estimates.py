"""Issue 26: every estimate shown to people (CLI tables, results page, its charts) is a point in
[0, 1] inside its own interval, while the JSON keeps the unbiased estimate under its own name.

The attack: released reports that make the unbiased estimate negative (few "Yes" reports under
forced response) and a cross-tab conditional above 1. Before, the CLI printed the conditional
1.4354 beside the CI [0.80, 1] and the page "-28.9 ± ..." for the marginal."""

import html
import json
import re

import pytest
from click.testing import CliRunner

from ldpsurvey.cli import main
from ldpsurvey.shared import Mechanism, crosstab, difference, estimate
from ldpsurvey.shared.stats.crosstab import cell_interval
from ldpsurvey.shared.stats.intervals import METHODS, z_value

from helpers import SURVEY, release_due

# Reported (smoked, sleep) counts: smoked=Yes reported twice in 19 (rate 0.105 below its floor
# (1 - alpha) beta = 0.25, so p_hat = -0.289); P(sleep = <6 | smoked = No) unbiased = 1.435.
EXTREME = {(0, 0): 12, (0, 1): 4, (0, 2): 1, (1, 2): 2}
# Every unbiased estimate inside [0, 1] (smoked: p_hat = 0.5 exactly).
PLAIN = {(0, 0): 3, (0, 1): 4, (0, 2): 3, (1, 0): 3, (1, 1): 4, (1, 2): 3}
# A one-decimal percentage or a 4-decimal proportion as the page and the CLI print them.
PERCENT = re.compile(r"(?<![\d.])-?\d+\.\d(?![\d])")
# A point and its interval as the CLI tables print them.
POINT_IN = re.compile(r"(-?\d+\.\d{4})\s+\[(-?\d+\.\d{4}), (-?\d+\.\d{4})\]")


def publish(client, auth, joint: dict) -> str:
    definition = {**SURVEY, "public_results": True, "crosstabs": [["smoked", "sleep"]]}
    survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
    responses = [{"answers": {"smoked": a, "drove": 0, "sleep": b}}
                 for (a, b), count in joint.items() for _ in range(count)]
    client.post(f"/api/surveys/{survey_id}/responses/batch", json={"responses": responses},
                headers=auth)
    release_due(client.application)
    return survey_id


def documents(client, survey_id):
    estimates = client.get(f"/api/surveys/{survey_id}/estimates").json
    table = client.get(f"/api/surveys/{survey_id}/crosstab?rows=smoked&cols=sleep").json
    return estimates["questions"][0]["options"][1], table


def test_the_json_keeps_the_unbiased_estimates_out_of_range(client, auth):
    yes, table = documents(client, publish(client, auth, EXTREME))
    assert yes["p_hat"] < -0.28 and yes["p_mle"] == 0.0
    assert yes["ci_low"] <= yes["p_mle"] <= yes["ci_high"]
    above = table["conditional"][0]
    assert above["p_hat"] > 1.4 and above["p_constrained"] == 1.0
    for entry in table["cells"] + table["conditional"]:
        point = entry["p_constrained"]
        assert point is None or 0.0 <= entry["ci_low"] <= point <= entry["ci_high"] <= 1.0


def percentages(page: str, start: str) -> list[float]:
    """Every one-decimal number in the page's tables (the estimates and the cross-tab)."""
    tables = re.findall(r"<table.*?</table>", page[page.index(start):], re.S)
    return [float(v) for v in PERCENT.findall(" ".join(tables))]


def results_page(client, survey_id) -> str:
    response = client.get(f"/s/{survey_id}/results")
    assert response.status_code == 200
    return html.unescape(response.get_data(as_text=True))


def test_the_results_page_shows_points_in_range_inside_their_intervals(client, auth):
    survey_id = publish(client, auth, EXTREME)
    yes, table = documents(client, survey_id)
    page = results_page(client, survey_id)
    shown = percentages(page, "<main")
    assert shown and all(0.0 <= v <= 100.0 for v in shown), shown
    assert "±" not in page
    assert f"{yes['p_hat'] * 100:.1f}" not in page  # -28.9, before in "Unbiased ± SE"
    row = re.search(r'<th scope="row">Yes</th>.*?</tr>', page, re.S).group(0)
    assert (f'Estimate (MLE)" class="nowrap">{yes["p_mle"] * 100:.1f} %' in row
            and f"{yes['ci_low'] * 100:.1f} \u2013 {yes['ci_high'] * 100:.1f} %" in row)
    above = table["conditional"][0]
    assert f"{above['p_hat'] * 100:.1f}" not in page  # 143.5
    crosstab = page[page.index("Cross-tab"):]
    first = re.search(r"<tr>\s*<th scope=\"row\".*?</tr>", crosstab, re.S).group(0)
    assert (f'Conditional" class="nowrap">{above["p_constrained"] * 100:.1f} %' in first
            and f"{above['ci_low'] * 100:.1f} \u2013 {above['ci_high'] * 100:.1f} %" in first)
    chart = client.get(f"/s/{survey_id}/results/smoked.svg").get_data(as_text=True)
    assert f"Yes: {yes['p_mle']:.1%}".replace("%", " %") in chart


def test_the_results_page_shows_the_unbiased_value_when_it_is_in_range(client, auth):
    survey_id = publish(client, auth, PLAIN)
    yes, table = documents(client, survey_id)
    assert yes["p_hat"] == pytest.approx(0.5) and yes["p_mle"] == pytest.approx(yes["p_hat"])
    page = results_page(client, survey_id)
    row = re.search(r'<th scope="row">Yes</th>.*?</tr>', page, re.S).group(0)
    assert 'Estimate (MLE)" class="nowrap">50.0 %' in row
    cell = table["cells"][0]
    assert cell["p_constrained"] == pytest.approx(cell["p_hat"], abs=1e-12)
    assert f'Joint" class="nowrap">{cell["p_hat"] * 100:.1f} %' in page


def cli(live_server, survey_id, *args) -> str:
    result = CliRunner().invoke(main, ["results", "--url", live_server, "--survey", survey_id,
                                       *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def points_inside(printed: str) -> int:
    """How many points with their intervals a CLI table prints, after checking each one lies
    in [0, 1] inside its interval."""
    found = [tuple(map(float, match)) for match in POINT_IN.findall(printed)]
    assert all(0.0 <= low <= point <= high <= 1.0 for point, low, high in found), found
    return len(found)


def test_the_cli_tables_show_points_in_range_inside_their_intervals(live_server, client, auth):
    survey_id = publish(client, auth, EXTREME)
    yes, table = documents(client, survey_id)
    printed = cli(live_server, survey_id)
    assert f"{yes['p_hat']:.4f}" not in printed  # -0.2895, before in the "unbiased" column
    assert points_inside(printed) == 7, printed  # every option of the three questions
    line = next(line for line in printed.splitlines() if line.startswith("smoked    Yes"))
    assert f"{yes['p_mle']:.4f}  [{yes['ci_low']:.4f}, {yes['ci_high']:.4f}]" in line
    crosstab = cli(live_server, survey_id, "--crosstab", "smoked,sleep")
    above = table["conditional"][0]
    assert f"{above['p_hat']:.4f}" not in crosstab  # 1.4354
    # six joint cells and the three conditionals of the row smoked = No (the row Yes has none)
    assert points_inside(crosstab) == 9, crosstab
    first = crosstab.splitlines()[3]
    assert first.split()[:2] == ["No", "<6"]
    assert POINT_IN.findall(first)[1] == (f"{above['p_constrained']:.4f}", f"{above['ci_low']:.4f}",
                                          f"{above['ci_high']:.4f}")
    as_json = json.loads(cli(live_server, survey_id, "--crosstab", "smoked,sleep", "--json"))
    assert as_json["conditional"][0]["p_hat"] == above["p_hat"] > 1.4


def test_the_cli_difference_shows_the_constrained_point(live_server, client, auth):
    survey_id = publish(client, auth, EXTREME)
    body = json.loads(cli(live_server, survey_id, "--difference", "smoked:1,smoked:0", "--json"))
    # The unbiased difference of Yes and No is -1.58: outside [-1, 1], kept in the JSON.
    assert body["estimate"] < -1.5 and body["estimate_mle"] == -1.0
    assert -1.0 <= body["ci_low"] <= body["estimate_mle"] <= body["ci_high"] <= 1.0
    printed = cli(live_server, survey_id, "--difference", "smoked:1,smoked:0")
    assert f"{body['estimate']:.4f}" not in printed
    assert "estimate    -1.0000" in printed
    assert f"CI          [{body['ci_low']:.4f}, {body['ci_high']:.4f}]" in printed


def test_the_cli_shows_the_unbiased_value_when_it_is_in_range(live_server, client, auth):
    survey_id = publish(client, auth, PLAIN)
    yes, table = documents(client, survey_id)
    line = next(line for line in cli(live_server, survey_id).splitlines()
                if line.startswith("smoked    Yes"))
    assert f"{yes['p_hat']:.4f}  [" in line
    cell = table["cells"][0]
    first = cli(live_server, survey_id, "--crosstab", "smoked,sleep").splitlines()[3]
    assert f"{cell['p_hat']:.4f}  [{cell['ci_low']:.4f}" in first


def test_an_interval_is_widened_to_the_mle_the_fit_moves_outside_it():
    """Option 0 is reported below its floor 1/6, so the fit holds it there and scales the
    others' rates down: p_mle = 0.5 falls below the mapped Clopper-Pearson interval's lower end
    0.5044 (before: shown outside its interval). The interval now reaches down to it, its upper
    end unchanged."""
    mechanism = Mechanism(0.5, (1 / 3, 1 / 3, 1 / 3))
    second = estimate(mechanism, [100, 450, 450])[1]
    low, high = METHODS["clopper-pearson"](450, 1000, 0.95)
    assert (low - 1 / 6) / 0.5 > 0.504 and second.p_mle == pytest.approx(0.5)
    assert second.ci_low == second.p_mle and second.ci_high == pytest.approx((high - 1 / 6) / 0.5)
    assert second.p_hat == pytest.approx(0.5667, abs=1e-4)  # the unbiased one, kept


def test_a_cell_interval_is_widened_to_the_projected_point():
    """The projection of a joint table with a cell above 1 subtracts the same theta from every
    cell: P(No, Yes) goes from 0.060 (p_hat - z se = 0.018 > 0) to 0, now inside."""
    mechanism = Mechanism(0.8, 0.5)
    cell = crosstab(mechanism, mechanism, [[300, 50], [0, 0]]).cells[1]
    assert cell.p_hat - z_value(0.95) * cell.standard_error > 0.018
    assert cell.p_constrained == 0.0 and cell.ci_low == 0.0
    assert cell.ci_high == cell_interval(mechanism, mechanism, 0, 1, cell.p_hat, 350,
                                         z_value(0.95))[1]


def test_a_difference_in_range_is_shown_as_is():
    """The other side: options inside the simplex give estimate_mle = estimate."""
    mechanism = Mechanism(0.5, (1 / 3, 1 / 3, 1 / 3))
    found = difference(mechanism, [300, 400, 300], 1, 0)
    assert found.estimate_mle == pytest.approx(found.estimate, abs=1e-12)
    assert found.ci_low < found.estimate < found.ci_high
