"""`survey import` of XLSForms (pyxform reads them) and `survey export-xlsform`, the way back:
real .xlsx files built with openpyxl, as KoboToolbox, ODK and Excel users have them."""

import json
import math
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from openpyxl import Workbook, load_workbook
from pyxform.builder import create_survey_from_xls
from pyxform.xls2json import parse_file_to_json

from ldpsurvey.cli import main
from ldpsurvey.shared import parse_definition, read_definition
from ldpsurvey.xlsform import FormRefused, read_form, write_form

from helpers import EVERY_TYPE, REPOSITORY

SURVEY_HEADER = ["type", "name", "label", "constraint", "epsilon"]
YES_NO = [["yes_no", "yes", "Yes"], ["yes_no", "no", "No"]]
EXAMPLES = sorted(p for p in (REPOSITORY / "shared" / "examples").glob("*.toml")
                  if not p.stem.endswith("_truth"))  # _truth files are mock scenarios


def xlsform(path: Path, survey: list[list], choices: list[list] | None = None,
            settings: dict | None = None, header: list[str] = SURVEY_HEADER) -> Path:
    """An .xlsx XLSForm at `path`: a survey sheet (`header`, then `survey`), a choices sheet
    (list_name, name, label) and a settings sheet, as a spreadsheet program writes them."""
    workbook = Workbook()
    sheet = workbook.active
    sheet.title = "survey"
    for row in [header, *survey]:
        sheet.append(row)
    if choices:
        sheet = workbook.create_sheet("choices")
        for row in [["list_name", "name", "label"], *choices]:
            sheet.append(row)
    if settings:
        sheet = workbook.create_sheet("settings")
        sheet.append(list(settings))
        sheet.append(list(settings.values()))
    workbook.save(path)
    return path


def refused_lines(form: Path, epsilon: float | None = None) -> list[str]:
    """The lines read_form refuses `form` with."""
    with pytest.raises(FormRefused) as refused:
        read_form(form, epsilon)
    return refused.value.lines


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def kobo_form(path: Path) -> Path:
    """What a KoboToolbox user downloads: start and end metadata, Kobo's $kuid column, one
    language named in the headers, required questions, a hint, appearance, a constraint
    message, choices named 1, 2, 3, and a settings sheet with title and default language."""
    header = ["type", "name", "label::English (en)", "hint::English (en)", "required",
              "constraint", "constraint_message::English (en)", "appearance", "$kuid",
              "epsilon"]
    survey = [
        ["start", "start", None, None, None, None, None, None, "k1", None],
        ["end", "end", None, None, None, None, None, None, "k2", None],
        ["note", "intro", "Your phone randomizes every answer.", None, None, None, None,
         None, "k3", None],
        ["select_one yes_no", "smoked", "Have you smoked in the last 30 days?",
         "Cigarettes, cigars or pipes", "true", None, None, None, "k4", 1.0],
        ["select_one sleep", "sleep", "How many hours do you sleep?", None, "true", None, None,
         "horizontal", "k5", 1.0],
        ["select_multiple sports", "sports", "Which sports did you do last week?", None,
         "false", "count-selected(.) <= 2", "At most two", None, "k6", 1.0],
        ["integer", "Drinks", "How many drinks did you have last week?", None, "true",
         ". >= 0 and . <= 30", "From 0 to 30", None, "k7", None],
    ]
    workbook = Workbook()
    sheet = workbook.active
    sheet.title = "survey"
    for row in [header, *survey]:
        sheet.append(row)
    choices = workbook.create_sheet("choices")
    for row in [["list_name", "name", "label::English (en)"], *YES_NO,
                ["sleep", "1", "Under 6"], ["sleep", "2", "6 to 8"], ["sleep", "3", "Over 8"],
                ["sports", "run", "Running"], ["sports", "swim", "Swimming"],
                ["sports", "cycle", "Cycling"]]:
        choices.append(row)
    settings = workbook.create_sheet("settings")
    settings.append(["form_title", "form_id", "default_language", "version"])
    settings.append(["Health and habits", "health", "English (en)", "2026112801"])
    workbook.save(path)
    return path


def test_a_kobotoolbox_form_becomes_a_survey_that_survey_check_passes(tmp_path):
    form = kobo_form(tmp_path / "health.xlsx")
    imported = run("survey", "import", str(form), "--output", str(tmp_path / "survey.toml"),
                   "--epsilon", "0.5")
    assert imported.exit_code == 0, imported.output
    assert read_definition(tmp_path / "survey.toml") == {
        "title": "Health and habits",
        "description": "Your phone randomizes every answer.",
        "questions": [
            {"id": "smoked", "type": "yes_no", "epsilon": 1.0,
             "text": "Have you smoked in the last 30 days?",
             "hint": "Cigarettes, cigars or pipes"},  # XLSForm's hint, the question's hint
            {"id": "sleep", "text": "How many hours do you sleep?", "type": "choice",
             "options": ["Under 6", "6 to 8", "Over 8"], "epsilon": 1.0},
            {"id": "sports", "text": "Which sports did you do last week?",
             "type": "multi_select", "options": ["Running", "Swimming", "Cycling"],
             "max_selected": 2, "epsilon": 1.0},
            {"id": "drinks", "text": "How many drinks did you have last week?",
             "type": "numeric", "min": 0, "max": 30, "epsilon": 0.5},  # --epsilon
        ]}
    assert imported.stderr.splitlines() == [
        "row 2: start (start): not asked: ldp-survey records no time, device or account of a "
        "respondent",
        "row 3: end (end): not asked: ldp-survey records no time, device or account of a "
        "respondent",
        "not used: $kuid, appearance, constraint_message (ldp-survey's form lays out and "
        "words its questions and messages itself)",
        f"wrote {tmp_path / 'survey.toml'} (4 questions); next: ldp-survey survey check "
        f"{tmp_path / 'survey.toml'}"]
    checked = run("survey", "check", str(tmp_path / "survey.toml"))
    assert checked.exit_code == 0
    assert "respondents with default ceilings will accept it" in checked.stdout
    assert (tmp_path / "survey.toml").read_text().startswith(
        f"# Imported from {form} by `ldp-survey survey import`")


def test_json_gives_the_file_what_was_left_out_and_the_check(tmp_path):
    form = kobo_form(tmp_path / "health.xlsx")
    out = tmp_path / "survey.toml"
    result = run("survey", "import", str(form), "-o", str(out), "--epsilon", "0.5", "--json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert document["file"] == str(out)
    assert [line.split(":")[0] for line in document["left_out"]] == ["row 2", "row 3",
                                                                     "not used"]
    assert document["check"] == json.loads(run("survey", "check", str(out), "--json").stdout)
    assert document["check"]["accepted_by_default"] is True


def test_without_epsilon_a_question_with_none_is_refused_and_nothing_written(tmp_path):
    form = kobo_form(tmp_path / "health.xlsx")
    result = run("survey", "import", str(form), "--output", str(tmp_path / "survey.toml"))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "row 8: Drinks (integer): no epsilon: give it in an epsilon column, or --epsilon for "
        "every question without one",
        f"ldp-survey: error: {form}: 1 refused (listed above); nothing written"]
    assert not (tmp_path / "survey.toml").exists()


def test_force_overwrites_and_without_it_an_existing_file_is_kept(tmp_path):
    form = kobo_form(tmp_path / "health.xlsx")
    out = tmp_path / "survey.toml"
    out.write_text("kept")
    args = ["survey", "import", str(form), "--output", str(out), "--epsilon", "0.5"]
    refused = run(*args)
    assert refused.exit_code == 1 and out.read_text() == "kept"
    assert f"{out} exists: choose another name, or overwrite it with --force" in refused.stderr
    assert run(*args, "--force").exit_code == 0
    assert read_definition(out)["title"] == "Health and habits"
    xlsx = tmp_path / "back.xlsx"
    xlsx.write_bytes(b"kept")
    export = ["survey", "export-xlsform", str(out), "--output", str(xlsx)]
    assert run(*export).exit_code == 1 and xlsx.read_bytes() == b"kept"
    assert run(*export, "--force").exit_code == 0
    assert load_workbook(xlsx).sheetnames == ["survey", "choices", "settings"]


# Rows a randomized survey cannot take, each after a first yes/no question (row 2), so each is
# row 3; with its type as written and the reason, in one line.
REFUSED = [
    (["text", "name", "What is your name?"], "row 3: name (text): a free-text answer cannot be "
     "randomized: ask it as select_one with choices"),
    (["calculate", "total", None, None, None, "1 + 1"], "row 3: total (calculate): a "
     "calculation reads answers on the device, and ldp-survey sends none but randomized ones"),
    (["geopoint", "where", "Where are you?"], "row 3: where (geopoint): cannot be randomized: "
     "ldp-survey asks select_one, select_multiple, integer and decimal questions"),
    (["date", "born", "When were you born?"], "row 3: born (date): cannot be randomized"),
    (["range", "pain", "How much pain?"], "row 3: pain (range): ask a number as integer or "
     "decimal with the constraint . >= A and . <= B"),
    (["integer", "age", "How old are you?", None, 1], "row 3: age (integer): a number needs a range: "
     "add the constraint . >= A and . <= B"),
    (["decimal", "age", "How old are you?", ". > 17", 1], "row 3: age (decimal): constraint "
     "'. > 17': a number needs exactly the range . >= A and . <= B"),
    (["select_one yes_no", "ate", "Did you eat?", ". = 'yes'", 1], "row 3: ate (select_one "
     "yes_no): constraint \". = 'yes'\": a select_one question takes none"),
    (["select_multiple yes_no", "ate", "Did you eat?", "not(selected(., 'no'))", 1],
     "row 3: ate "
     "(select_multiple yes_no): constraint \"not(selected(., 'no'))\": a select_multiple "
     "question takes only count-selected(.) <= N"),
    (["select_one yes_no", "ate", "Did you smoke, ${smoked}?", None, 1], "row 3: ate (select_one "
     "yes_no): label ${smoked}: shows another answer, which the form never does"),
    (["select_one yes_no", "an_id_longer_than_the_forty_characters_allowed", "Long?",
      None, 1],
     "row 3: an_id_longer_than_the_forty_characters_allowed (select_one yes_no): a name of "
     "lower-case letters, digits and _ (at most 40, first a letter) is needed"),
    (["note", "thanks", "Thank you!"], "row 3: thanks (note): a note between or after "
     "questions: ldp-survey shows text only above them (the introduction): move it before the "
     "first question"),
]


@pytest.mark.parametrize(("row", "line"), REFUSED, ids=[r[0][0] + "-" + r[0][1] for r in REFUSED])
def test_each_row_a_randomized_survey_cannot_take_is_one_line(tmp_path, row, line):
    form = xlsform(tmp_path / "form.xlsx", [["select_one yes_no", "smoked", "Smoked?", None, 1],
                                            row], YES_NO, header=[*SURVEY_HEADER, "calculation"])
    result = run("survey", "import", str(form), "-o", str(tmp_path / "s.toml"))
    assert result.exit_code == 2
    assert [line.split(":", 3)[:3] for line in result.stderr.splitlines()[:-1]] == [
        line.split(":", 3)[:3]]  # one line, for the row, naming it and its type
    assert result.stderr.startswith(line)
    assert not (tmp_path / "s.toml").exists()


# Columns a randomized survey cannot take, on an otherwise good question (row 2).
REFUSED_COLUMNS = [
    ("relevant", "${smoked} = 'yes'", "relevant: a question asked only after some answers "
     "tells those answers by being answered: ask every question of everyone"),
    ("required", "${smoked} = 'yes'", "required \"${smoked} = 'yes'\": a condition reads other "
     "answers on the device (every ldp-survey question is answered)"),
    ("default", "yes", "default: a default answer would be sent by whoever does not change it"),
    ("choice_filter", "name != 'no'", "choice_filter: choices filtered by another answer tell "
     "that answer"),
    ("read_only", "true", "readonly: a read-only question asks nothing"),
    ("calculation", "1 + 1", "calculate: a calculation reads answers on the device"),
    ("media::image", "cigarette.png", "media: ldp-survey shows text only: put what the image "
     "or sound says in the label"),
    ("parameters", "randomize=true", "parameters: ldp-survey shows the choices as listed, in "
     "one order for everyone"),
]


@pytest.mark.parametrize(("column", "cell", "reason"), REFUSED_COLUMNS,
                         ids=[c[0] for c in REFUSED_COLUMNS])
def test_each_column_a_randomized_survey_cannot_take_is_one_line(tmp_path, column, cell,
                                                                  reason):
    form = xlsform(tmp_path / "form.xlsx", [["select_one yes_no", "smoked", "Smoked?", None, 1,
                                             cell]], YES_NO, header=[*SURVEY_HEADER, column])
    result = run("survey", "import", str(form), "-o", str(tmp_path / "s.toml"))
    assert result.exit_code == 2
    assert result.stderr.splitlines()[:-1] == [f"row 2: smoked (select_one yes_no): {reason}"]


def test_a_group_is_refused_at_its_row_and_its_questions_are_read_on_their_own(tmp_path):
    form = xlsform(tmp_path / "form.xlsx", [
        ["begin_group", "habits", "Habits"], ["select_one yes_no", "smoked", "Smoked?", None, 1],
        ["text", "brand", "Which brand?"], ["end_group"],
        ["begin_repeat", "people", "Household members"], ["integer", "age", "Age?", None, 1],
        ["end_repeat"]], YES_NO)
    result = run("survey", "import", str(form), "-o", str(tmp_path / "s.toml"))
    assert result.exit_code == 2
    assert [line.split(":")[0:2] for line in result.stderr.splitlines()[:-1]] == [
        ["row 2", " habits (begin_group)"], ["row 4", " brand (text)"],
        ["row 6", " people (begin_repeat)"], ["row 7", " age (integer)"]]
    assert "delete its begin_group and end_group rows" in result.stderr
    assert "4 refused (listed above); nothing written" in result.stderr


MULTILINGUAL_HEADER = ["type", "name", "label::French (fr)", "hint::French (fr)",
                       "label::English (en)", "hint::English (en)", "constraint",
                       "unit::French (fr)", "unit::English (en)", "epsilon"]
MULTILINGUAL_ROWS = [
    ["note", "intro", "Quatre questions.", None, "Four questions.", None, None, None, None,
     None],
    ["select_one yes_no", "smoked", "Fumé ?", "Même une.", "Smoked?", "Even one.", None, None,
     None, 1],
    ["select_one sleep", "sleep", "Sommeil ?", None, "Sleep?", None, None, None, None, 1],
    ["integer", "coffee", "Café ?", None, "Coffee?", None, ". >= 0 and . <= 10", "tasses",
     "cups", 1]]
MULTILINGUAL_CHOICES = [["list_name", "name", "label::French (fr)", "label::English (en)"],
                        ["yes_no", "yes", "Oui", "Yes"], ["yes_no", "no", "Non", "No"],
                        ["sleep", "1", "Moins de 6", "Under 6"],
                        ["sleep", "2", "Plus de 6", "6 or more"]]


def multilingual_form(path: Path, settings: dict, rows: list[list] = MULTILINGUAL_ROWS,
                      choices: list[list] = MULTILINGUAL_CHOICES) -> Path:
    """A form in French and English (French's columns first), with `settings`."""
    xlsform(path, rows, settings=settings, header=MULTILINGUAL_HEADER)
    workbook = load_workbook(path)
    sheet = workbook.create_sheet("choices", 1)
    for row in choices:
        sheet.append(row)
    workbook.save(path)
    return path


def test_language_columns_become_languages_and_translations(tmp_path):
    """label::, hint::, unit:: and the settings' translated_title:: columns; the settings'
    default_language first; a hint is the question's hint; yes/no's labels are the form's."""
    form = multilingual_form(tmp_path / "form.xlsx", {
        "form_title": "Habits", "translated_title::French (fr)": "Habitudes",
        "default_language": "English (en)"})
    definition = read_form(form).definition
    assert definition == {
        "title": "Habits", "description": "Four questions.", "languages": ["en", "fr"],
        "questions": [
            {"id": "smoked", "text": "Smoked?", "hint": "Even one.", "type": "yes_no",
             "epsilon": 1},
            {"id": "sleep", "text": "Sleep?", "type": "choice",
             "options": ["Under 6", "6 or more"], "epsilon": 1},
            {"id": "coffee", "text": "Coffee?", "type": "numeric", "min": 0, "max": 10,
             "unit": "cups", "epsilon": 1}],
        "translations": {"fr": {
            "title": "Habitudes", "description": "Quatre questions.", "questions": {
                "smoked": {"text": "Fumé ?", "hint": "Même une."},
                "sleep": {"text": "Sommeil ?", "options": ["Moins de 6", "Plus de 6"]},
                "coffee": {"text": "Café ?", "unit": "tasses"}}}}}
    assert parse_definition(definition).in_language("fr").questions[2].hint is None


def test_without_default_language_the_first_label_column_is_first(tmp_path):
    """French's columns come first; without a translated_title::English (en), English's title is the
    form_title, and the import says so."""
    imported = read_form(multilingual_form(tmp_path / "form.xlsx", {"form_title": "Habits"}))
    assert imported.definition["languages"] == ["fr", "en"]
    assert imported.definition["questions"][0]["text"] == "Fumé ?"
    assert imported.definition["translations"]["en"]["title"] == "Habits"
    assert ("settings: no translated_title::English (en): that language's title is the form_title"
            in imported.notes)


def test_a_form_in_one_other_language_names_it(tmp_path):
    form = xlsform(tmp_path / "form.xlsx", [["select_one yes_no", "smoked", "Fumé ?", 1]],
                   [["yes_no", "yes", "yes"], ["yes_no", "no", "no"]],
                   header=["type", "name", "label::French (fr)", "epsilon"])
    definition = read_form(form).definition
    assert definition["languages"] == ["fr"] and "translations" not in definition
    assert definition["questions"][0]["text"] == "Fumé ?"


def test_a_language_column_without_a_code_is_refused_in_one_line(tmp_path):
    form = xlsform(tmp_path / "form.xlsx", [["select_one yes_no", "smoked", "Smoked?", "Fumé ?",
                                             1]], [["yes_no", "no", "No", "Non"],
                                                   ["yes_no", "yes", "Yes", "Oui"]],
                   header=["type", "name", "label::English (en)", "label::French", "epsilon"])
    assert refused_lines(form) == [
        "label::French: a language column needs its code, as label::French (fr) (the survey "
        "file names each language by it)"]
    def plain_and_french(name: str, settings: dict | None = None) -> Path:
        return xlsform(tmp_path / name, [["select_one yes_no", "smoked", "Smoked?", "Fumé ?",
                                          1]], YES_NO, settings=settings,
                       header=["type", "name", "label", "label::French (fr)", "epsilon"])

    assert refused_lines(plain_and_french("plain.xlsx")) == [
        "label: a column without a language beside others in a language: name it, as "
        "label::English (en), or give its name in the settings' default_language"]
    named = plain_and_french("named.xlsx", {"form_title": "T",
                                            "default_language": "English (en)"})
    assert read_form(named).definition["languages"] == ["en", "fr"]


def test_a_text_missing_in_one_language_is_refused_naming_row_and_language(tmp_path):
    rows = [row.copy() for row in MULTILINGUAL_ROWS]
    rows[1][3] = None  # smoked's French hint
    rows[3][7] = None  # coffee's French unit
    choices = [*MULTILINGUAL_CHOICES[:-1], ["sleep", "2", None, "6 or more"]]
    form = multilingual_form(tmp_path / "form.xlsx", {"form_title": "Habits"}, rows, choices)
    assert refused_lines(form) == [
        "row 3: smoked (select_one yes_no): no hint in French (fr)",
        "row 4: sleep (select_one sleep): choice '2': no label in French (fr)",
        "row 5: coffee (integer): no unit in French (fr)"]


def test_the_export_writes_a_column_per_language_named_by_babel(tmp_path):
    survey = read_definition(REPOSITORY / "shared" / "examples" / "languages.toml")
    write_form(survey, tmp_path / "form.xlsx")
    workbook = load_workbook(tmp_path / "form.xlsx")
    header = [cell.value for cell in workbook["survey"][1]]
    assert header[:11] == ["type", "name", "label::English (en)", "label::French (fr)",
                           "label::Spanish (es)", "hint::English (en)", "hint::French (fr)",
                           "hint::Spanish (es)", "unit::English (en)", "unit::French (fr)",
                           "unit::Spanish (es)"]
    settings = dict(zip(*(
        [cell.value for cell in row] for row in workbook["settings"].iter_rows()), strict=True))
    assert settings["default_language"] == "English (en)"
    assert settings["translated_title::French (fr)"] == "Santé et habitudes"


def test_a_regional_tag_keeps_its_code_through_babels_name(tmp_path):
    survey = read_definition(REPOSITORY / "shared" / "examples" / "languages.toml")
    survey = {**survey, "languages": ["en", "pt-BR", "es"],
              "translations": {("pt-BR" if tag == "fr" else tag): words
                               for tag, words in survey["translations"].items()}}
    write_form(survey, tmp_path / "form.xlsx")
    header = [cell.value for cell in load_workbook(tmp_path / "form.xlsx")["survey"][1]]
    assert "label::Portuguese (Brazil) (pt-BR)" in header
    assert read_form(tmp_path / "form.xlsx").definition == survey
    create_survey_from_xls(str(tmp_path / "form.xlsx")).to_xml()  # pyxform accepts it


def test_a_form_pyxform_refuses_is_refused_in_its_words(tmp_path):
    form = xlsform(tmp_path / "form.xlsx", [["select_one nowhere", "smoked", "Smoked?", None,
                                             1]], YES_NO)
    (line,) = refused_lines(form)
    assert line.startswith("form.xlsx: ") and "nowhere" in line


def test_what_survey_check_refuses_is_said_in_its_words(tmp_path):
    form = xlsform(tmp_path / "form.xlsx", [["select_one yes_no", "smoked", "Smoked?", None, 3],
                                            ["select_one yes_no", "drank", "Drank?", None, 3]],
                   YES_NO, settings={"form_title": "Too much", "max_epsilon": 4})
    assert refused_lines(form) == [
        "the survey would not pass survey check: survey.max_epsilon: the questions add up to "
        "epsilon 6, above the survey's ceiling 4: lower the questions' epsilon by 2 in all, or "
        "raise max_epsilon"]


def test_yes_no_needs_choices_named_and_labelled_yes_and_no(tmp_path):
    """Named yes and no but labelled otherwise, the question keeps its labels as a choice."""
    survey = [["select_one answer", "smoked", "Smoked?", None, 1]]
    yes_no = read_form(xlsform(tmp_path / "a.xlsx", survey, [["answer", "yes", "YES"],
                                                             ["answer", "no", "no"]]))
    assert yes_no.definition["questions"][0]["type"] == "yes_no"
    other = read_form(xlsform(tmp_path / "b.xlsx", survey, [["answer", "yes", "Sure"],
                                                            ["answer", "no", "Never"]]))
    assert other.definition["questions"][0] | {"text": None} == {
        "id": "smoked", "text": None, "type": "choice", "options": ["Sure", "Never"],
        "epsilon": 1}


def test_extra_columns_carry_the_survey_file_fields(tmp_path):
    """epsilon, mechanism, disclosed (XLSForm's yes), alpha and beta (a TOML list), unit; the
    settings sheet's survey fields; a constraint written the other way round."""
    header = [*SURVEY_HEADER, "mechanism", "disclosed", "alpha", "beta", "unit"]
    form = xlsform(tmp_path / "form.xlsx", [
        ["select_one fruit", "fruit", "Which fruit?", None, 0.5, "oue"],
        ["select_one yes_no", "smoked", "Smoked?", None, None, None, None, 0.5, "[0.3, 0.7]"],
        ["integer", "age", "How old are you?", ". <= 99 and . >= 18", None, None, "yes", None,
         None, "years"]],
        [["fruit", "a", "Apples"], ["fruit", "p", "Pears"], *YES_NO],
        settings={"form_title": "Fruit", "release_batch": 10, "invitation_only": "TRUE"},
        header=header)
    assert read_form(form).definition == {
        "title": "Fruit", "release_batch": 10, "invitation_only": True, "questions": [
            {"id": "fruit", "text": "Which fruit?", "type": "choice",
             "options": ["Apples", "Pears"], "epsilon": 0.5, "mechanism": "oue"},
            {"id": "smoked", "text": "Smoked?", "type": "yes_no", "alpha": 0.5,
             "beta": [0.3, 0.7]},
            {"id": "age", "text": "How old are you?", "type": "numeric", "min": 18, "max": 99,
             "disclosed": True, "unit": "years"}]}


def test_a_flag_that_is_no_xlsform_boolean_is_refused_by_name(tmp_path):
    form = xlsform(tmp_path / "form.xlsx", [["select_one yes_no", "smoked", "Smoked?", None,
                                             None, "maybe"]], YES_NO,
                   header=[*SURVEY_HEADER, "disclosed"])
    assert refused_lines(form, epsilon=1.0) == ["the survey would not pass survey check: question "
                                   "'smoked'.disclosed: must be true or false, got 'maybe'"]


def round_trip_cases() -> list:
    return [pytest.param(read_definition(path), id=path.stem) for path in EXAMPLES] + [
        pytest.param(EVERY_TYPE, id="every_type"),
        pytest.param({**EVERY_TYPE, "form_origins": ["https://ethics.example.edu"]},
                     id="hosted_elsewhere")]


@pytest.mark.parametrize("definition", round_trip_cases())
def test_import_of_export_is_the_same_survey_and_pyxform_accepts_the_export(tmp_path,
                                                                            definition):
    """import(export(x)) == x, field for field (ln 3's every digit too), for every example
    survey and for a survey of every question type, mechanism and design; and pyxform turns
    the export into an XForm."""
    path = tmp_path / "form.xlsx"
    write_form(definition, path)
    assert read_form(path).definition == definition
    assert parse_file_to_json(str(path))["title"] == definition["title"]
    assert list(parse_file_to_json(str(path)).get("translated_title", {}).values()) == [
        words["title"] for words in definition.get("translations", {}).values()]
    xform = create_survey_from_xls(str(path)).to_xml()
    assert all(f"/{q['id']}" in xform for q in definition["questions"])


def test_ln_3_keeps_every_digit_through_a_spreadsheet(tmp_path):
    health = read_definition(REPOSITORY / "shared" / "examples" / "health.toml")
    write_form(health, tmp_path / "health.xlsx")
    sheet = load_workbook(tmp_path / "health.xlsx")["survey"]
    header = [cell.value for cell in sheet[1]]
    cell = sheet.cell(row=3, column=header.index("epsilon") + 1)  # smoked's, below the note
    assert cell.value == "1.0986122886681098" and float(cell.value) == math.log(3)


def test_the_export_through_the_cli_is_read_by_the_import(tmp_path):
    starter = REPOSITORY / "shared" / "examples" / "starter.toml"
    exported = run("survey", "export-xlsform", str(starter), "--output",
                   str(tmp_path / "starter.xlsx"))
    assert exported.exit_code == 0 and exported.stderr == f"wrote {tmp_path / 'starter.xlsx'}\n"
    imported = run("survey", "import", str(tmp_path / "starter.xlsx"), "-o",
                   str(tmp_path / "back.toml"))
    assert imported.exit_code == 0, imported.output
    assert tomllib.loads((tmp_path / "back.toml").read_text()) == read_definition(starter)
    parse_definition(read_definition(tmp_path / "back.toml"))


def test_a_survey_in_three_languages_goes_through_the_cli_and_back(tmp_path):
    survey = REPOSITORY / "shared" / "examples" / "languages.toml"
    assert run("survey", "export-xlsform", str(survey), "-o", str(tmp_path / "f.xlsx")
               ).exit_code == 0
    imported = run("survey", "import", str(tmp_path / "f.xlsx"), "-o", str(tmp_path / "b.toml"))
    assert imported.exit_code == 0, imported.output
    assert tomllib.loads((tmp_path / "b.toml").read_text()) == read_definition(survey)
    assert imported.stderr.splitlines()[-1].startswith("wrote ")
    checked = run("survey", "check", str(tmp_path / "b.toml"))
    assert checked.exit_code == 0
    assert "in 3 languages: en (the texts' own), fr, es, every text translated" in checked.stdout


def test_the_export_wants_an_xlsx_name_and_a_valid_survey(tmp_path):
    starter = REPOSITORY / "shared" / "examples" / "starter.toml"
    wrong = run("survey", "export-xlsform", str(starter), "--output", str(tmp_path / "s.xls"))
    assert wrong.exit_code == 2 and "name an .xlsx file" in wrong.stderr
    (tmp_path / "bad.toml").write_text('title = "T"\nquestions = []\n')
    bad = run("survey", "export-xlsform", str(tmp_path / "bad.toml"), "--output",
              str(tmp_path / "bad.xlsx"))
    assert bad.exit_code == 1 and "survey.questions" in bad.stderr
    assert not (tmp_path / "bad.xlsx").exists()


def test_a_text_starting_with_an_equals_sign_stays_text(tmp_path):
    definition = {"title": "=1+1", "questions": [
        {"id": "q", "text": "=SUM(A1:A2)", "type": "choice", "options": ["=1", "=2"],
         "epsilon": 1.0},
        {"id": "n", "text": "=1", "type": "numeric", "min": 0, "max": 1, "unit": "1",
         "epsilon": 1.0}]}  # a unit that reads as a number stays text
    write_form(definition, tmp_path / "f.xlsx")
    assert read_form(tmp_path / "f.xlsx").definition == definition


def test_notes_before_the_questions_are_the_introduction_named_or_not(tmp_path):
    form = xlsform(tmp_path / "form.xlsx", [["note", None, "Welcome."],
                                            ["note", "why", "Your phone randomizes answers."],
                                            ["select_one yes_no", "smoked", "Smoked?", None, 1],
                                            ["note", None, "Thank you!"]], YES_NO)
    assert refused_lines(form) == [
        "row 5: (note): a note between or after questions: ldp-survey shows text only above "
        "them (the introduction): move it before the first question"]
    form = xlsform(tmp_path / "form.xlsx", [["note", None, "Welcome."],
                                            ["note", "why", "Your phone randomizes answers."],
                                            ["select_one yes_no", "smoked", "Smoked?", None, 1]],
                   YES_NO)
    assert read_form(form).definition["description"] == ("Welcome.\n\n"
                                                         "Your phone randomizes answers.")
