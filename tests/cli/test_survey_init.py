"""`survey init` writes a starter survey that passes `survey check` and default respondents
accept; `survey check` explains each refusal and names the fix (the largest per-question
epsilon that fits, by water-filling, and which questions to change)."""

import json
import math

import pytest
from click.testing import CliRunner

from ldpsurvey.cli import main
from ldpsurvey.client.ceilings import DEFAULTS
from ldpsurvey.client.verify import TrustError, check_ceilings
from ldpsurvey.shared import load_definition, parse_definition
from ldpsurvey.shared.survey.check import refusals, water_level

LN3 = math.log(3)


def test_init_writes_a_commented_starter_that_check_passes_and_respondents_accept(tmp_path):
    path = tmp_path / "survey.toml"
    result = CliRunner().invoke(main, ["survey", "init", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and f"survey check {path}" in result.stderr
    text = path.read_text()
    assert sum(line.lstrip().startswith("#") for line in text.splitlines()) >= 5
    survey = load_definition(path)
    assert {q.type for q in survey.questions} == {"yes_no", "choice"}
    assert survey.crosstabs and not refusals(survey)
    check_ceilings("http://127.0.0.1:8000", survey, DEFAULTS)  # the respondent's own check
    checked = CliRunner().invoke(main, ["survey", "check", str(path)])
    assert checked.exit_code == 0 and "will accept it" in checked.stdout


def test_init_keeps_an_existing_file_unless_forced(tmp_path):
    path = tmp_path / "survey.toml"
    path.write_text("mine")
    refused = CliRunner().invoke(main, ["survey", "init", str(path)])
    assert refused.exit_code == 1 and "--force" in refused.stderr
    assert path.read_text() == "mine"
    forced = CliRunner().invoke(main, ["survey", "init", str(path), "--force", "--json"])
    assert forced.exit_code == 0, forced.output
    document = json.loads(forced.stdout)
    assert document["file"] == str(path) and document["check"]["accepted_by_default"] is True
    assert document["check"]["refusals"] == []
    assert load_definition(path).title == document["check"]["title"]


def test_init_into_a_missing_folder_is_one_line(tmp_path):
    result = CliRunner().invoke(main, ["survey", "init", str(tmp_path / "no" / "s.toml")])
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "cannot write" in result.stderr


def yes_no(n: int, epsilon: float | list[float]) -> dict:
    epsilons = epsilon if isinstance(epsilon, list) else [epsilon] * n
    return {"title": "Many", "questions": [
        {"id": f"q{i}", "text": f"Q{i}?", "type": "yes_no", "epsilon": e}
        for i, e in enumerate(epsilons)]}


def check_json(tmp_path, definition: dict) -> dict:
    path = tmp_path / "survey.json"
    path.write_text(json.dumps(definition))
    result = CliRunner().invoke(main, ["survey", "check", str(path), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_ten_yes_no_questions_at_epsilon_1_are_told_0_439_each(tmp_path):
    body = check_json(tmp_path, yes_no(10, 1.0))
    assert body["accepted_by_default"] is False
    (refusal,) = body["refusals"]
    assert refusal["max_epsilon"] == pytest.approx(4 * LN3 / 10)
    assert refusal["questions"] == [f"q{i}" for i in range(10)]
    assert "at most 0.439 each" in refusal["fix"] and "4 ln 3" in refusal["problem"]
    path = tmp_path / "survey.json"
    text = CliRunner().invoke(main, ["survey", "check", str(path)])
    assert "REFUSE" in text.stdout and "fix: the largest epsilon per question that fits is " \
        "0.439" in text.stdout
    # the fix, applied as shown (rounded down), is accepted
    assert check_json(tmp_path, yes_no(10, 0.439))["accepted_by_default"] is True
    assert check_json(tmp_path, yes_no(10, 0.44))["accepted_by_default"] is False


def test_the_fix_keeps_small_questions_and_lowers_only_the_large_ones(tmp_path):
    body = check_json(tmp_path, yes_no(6, [0.2, 0.3, 1.0, 1.0, 1.0, 1.0]))
    (refusal,) = body["refusals"]
    # water-filling by hand: (4 ln 3 - 0.2 - 0.3) / 4, below the smallest changed epsilon (1)
    level = (4 * LN3 - 0.5) / 4
    assert refusal["max_epsilon"] == pytest.approx(level)
    assert refusal["questions"] == ["q2", "q3", "q4", "q5"]
    assert "the other 2 may stay as they are" in refusal["fix"]
    fixed = check_json(tmp_path, yes_no(6, [0.2, 0.3, *[math.floor(level * 1000) / 1000] * 4]))
    assert fixed["accepted_by_default"] is True


def test_a_question_above_ln_3_is_told_its_own_fix_and_the_level_never_exceeds_ln_3(tmp_path):
    body = check_json(tmp_path, yes_no(3, [0.5, 2.0, 2.0]))
    per_question = [r for r in body["refusals"] if len(r["questions"]) == 1]
    assert [r["questions"] for r in per_question] == [["q1"], ["q2"]]
    assert all("at most 1.098" in r["fix"] and r["max_epsilon"] == pytest.approx(LN3)
               for r in per_question)
    (total,) = [r for r in body["refusals"] if len(r["questions"]) != 1]
    # (4 ln 3 - 0.5) / 2 = 1.947 is above ln 3: the level is capped at ln 3
    assert total["max_epsilon"] == pytest.approx(LN3) and total["questions"] == ["q1", "q2"]
    one = check_json(tmp_path, yes_no(1, 1.5))
    assert [r["questions"] for r in one["refusals"]] == [["q0"]]  # within the total


@pytest.mark.parametrize(("epsilons", "total", "cap", "level"), [
    ([1.0] * 10, 4.0, 10.0, 0.4),                    # all equal: total / n
    ([0.1, 0.2, 3.0], 2.0, 10.0, 1.7),               # two kept: 2 - 0.3
    ([0.1, 0.2, 3.0, 3.0], 2.0, 10.0, 0.85),         # (2 - 0.3) / 2
    ([0.5, 2.0, 2.0], 4.0, 1.0, 1.0),                # above the cap: the cap
    ([1.0, 1.0], 1.5, 10.0, 0.75),
])
def test_water_level_by_hand(epsilons, total, cap, level):
    assert water_level(epsilons, total, cap) == pytest.approx(level)
    lowered = [min(e, level) for e in epsilons]
    assert math.fsum(lowered) <= total + 1e-12


def test_survey_create_names_the_fix_too(tmp_path):
    path = tmp_path / "survey.json"
    path.write_text(json.dumps(yes_no(10, 1.0)))
    result = CliRunner().invoke(main, ["survey", "create", str(path), "--url",
                                       "http://127.0.0.1:9"])
    assert result.exit_code == 1 and "at most 0.439 each" in result.stderr
    assert "--above-default-ceilings" in result.stderr
    with pytest.raises(TrustError):  # and the respondent's client does refuse it
        check_ceilings("http://127.0.0.1:9", parse_definition(yes_no(10, 1.0)), DEFAULTS)


def test_a_total_above_the_surveys_own_ceiling_names_the_fix(tmp_path):
    path = tmp_path / "survey.json"
    path.write_text(json.dumps({**yes_no(3, 1.0), "max_epsilon": 2.5}))
    result = CliRunner().invoke(main, ["survey", "check", str(path)])
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "above the survey's ceiling 2.5: lower the questions' epsilon by 0.5 in all, or " \
           "raise max_epsilon" in result.stderr


def test_check_names_open_questions_their_epsilon_public_results_and_min_cell(tmp_path):
    """An openly answered question is said plainly (stored as given, counted in no epsilon, a
    guess from it certain); the survey's line names them, the refused public results and the
    minimum cell size; --json gains `disclosed`. A survey without one has `disclosed` null and
    no such line."""
    from ldpsurvey.shared.mechanisms.disclosed import DEFAULT_MIN_CELL

    survey = {"title": "Open", "questions": [
        {"id": "age", "text": "Age?", "type": "numeric", "min": 18, "max": 99,
         "disclosed": True},
        {"id": "sex", "text": "Sex?", "type": "choice", "options": ["f", "m"],
         "disclosed": True},
        {"id": "smoked", "text": "Smoked?", "type": "yes_no", "epsilon": 1.0}]}
    body = check_json(tmp_path, survey)
    assert body["disclosed"] == {"questions": ["age", "sex"], "counted_in_epsilon": False,
                                 "public_results": False, "min_cell": DEFAULT_MIN_CELL}
    assert [(q["disclosed"], q["epsilon"], q["posterior_max"]) for q in body["questions"]] == [
        (True, 0.0, 1.0), (True, 0.0, 1.0), (False, 1.0, pytest.approx(math.e / (1 + math.e)))]
    assert body["total_epsilon"] == 1.0
    text = CliRunner().invoke(main, ["survey", "check", str(tmp_path / "survey.json")]).stdout
    assert "  age: ANSWERED OPENLY, stored as given, not randomized: counted in no epsilon" in text
    assert "  smoked: epsilon 1; a guess of 50 % can become at most 73%" in text
    assert ("answered openly: age, sex. The total epsilon counts none of them; this survey "
            "cannot have public results, and no regression group or weighting level of fewer "
            "than 10 respondents is reported") in text
    hidden = check_json(tmp_path, yes_no(2, 1.0))
    assert hidden["disclosed"] is None and not any(q["disclosed"] for q in hidden["questions"])
    text = CliRunner().invoke(main, ["survey", "check", str(tmp_path / "survey.json")]).stdout
    assert "openly" not in text.lower()


def test_the_servers_min_cell_default_is_the_one_check_states():
    from ldpsurvey.aggregator.config.settings import DEFAULTS
    from ldpsurvey.shared.mechanisms.disclosed import DEFAULT_MIN_CELL

    assert DEFAULTS["MIN_CELL"] == DEFAULT_MIN_CELL == 10
