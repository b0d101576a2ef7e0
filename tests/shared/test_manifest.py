import copy
import json
import math
import re
from importlib import resources

import pytest

from ldpsurvey.shared import SurveyError, load_definition, parse_definition, parse_manifest

DEFINITION = {
    "title": "Habits",
    "description": "Two questions.",
    "questions": [
        {"id": "smoked", "text": "Smoked?", "type": "yes_no", "alpha": 0.5, "beta": 0.3},
        {"id": "sleep", "text": "Sleep?", "type": "choice", "options": ["<6", "6-8", ">8"],
         "epsilon": 1.0},
    ],
}


def published(definition=DEFINITION):
    survey = parse_definition(definition)
    return type(survey)(**{**survey.__dict__, "survey_id": "s1", "key_id": "k1"})


def test_definition_derives_parameters():
    survey = parse_definition(DEFINITION)
    smoked, sleep = survey.questions
    assert smoked.mechanism.beta == (0.7, 0.3) and smoked.options == ("No", "Yes")
    assert smoked.epsilon == pytest.approx(math.log(1 + 0.5 / (0.5 * 0.3)))
    assert sleep.mechanism.beta == pytest.approx((1 / 3,) * 3)
    assert sleep.mechanism.epsilon <= 1.0 and sleep.epsilon == pytest.approx(1.0)
    assert survey.total_epsilon == pytest.approx(smoked.epsilon + sleep.epsilon)


def test_manifest_round_trip_is_exact():
    survey = published()
    raw = survey.manifest_bytes()
    again = parse_manifest(raw)
    assert again == survey
    assert again.manifest_bytes() == raw
    assert json.loads(raw)["questions"][0]["epsilon"] == survey.questions[0].epsilon


def _with(path, value):
    data = copy.deepcopy(DEFINITION)
    target = data
    *parents, last = path
    for key in parents:
        target = target[key]
    if value is KeyError:
        del target[last]
    else:
        target[last] = value
    return data


def test_a_survey_hashes_by_its_id_and_agrees_with_equality():
    """Survey.__hash__ reads the id alone (the aggregator keys per-survey caches by published
    surveys): surveys that are == hash alike, and ones that differ elsewhere stay apart as
    keys."""
    survey = published()
    again = parse_manifest(survey.manifest_bytes())
    assert again == survey and again is not survey and hash(again) == hash(survey)
    retitled = type(survey)(**{**survey.__dict__, "title": "Other"})
    assert retitled != survey and hash(retitled) == hash(survey) == hash("s1")
    assert {survey: 1, retitled: 2}[again] == 1 and len({survey, again, retitled}) == 2


@pytest.mark.parametrize("path, value, message", [
    (("questions", 0, "alpha"), 1.0, "question 'smoked'.alpha: must be in (0, 1)"),
    (("questions", 0, "alpha"), 0.0, "question 'smoked'.alpha"),
    (("questions", 0, "alpha"), True, "question 'smoked'.alpha: must be a finite number"),
    (("questions", 0, "beta"), 0.0, "question 'smoked'.beta: P(report Yes) must be in (0, 1)"),
    (("questions", 1, "beta"), [0.5, 0.5], "question 'sleep'.beta: needs one probability"),
    (("questions", 1, "beta"), [0.5, 0.3, 0.3], "question 'sleep'.beta: must sum to 1"),
    (("questions", 0, "id"), "Smoked", "questions[0].id: must match"),
    (("questions", 0, "id"), "a" * 41, "questions[0].id"),
    (("questions", 1, "id"), "smoked", "duplicate question id"),
    (("questions", 0, "type"), "scale", "question 'smoked'.type"),
    (("questions", 1, "options"), ["a"], "question 'sleep'.options"),
    (("questions", 1, "options"), ["a", "a", "b"], "distinct"),
    (("questions", 0, "epsilon"), 1.0, "exactly one of alpha or epsilon"),
    (("questions", 1, "epsilon"), -1.0, "question 'sleep'.epsilon: must be > 0"),
    (("questions", 0, "alpah"), 0.5, "unknown field 'alpah'"),
    (("questions", 0, "text"), KeyError, "missing field 'text'"),
    (("questions",), [], "survey.questions"),
    (("title",), "", "survey.title: must not be empty"),
    (("max_epsilon",), 1.0, "survey.max_epsilon: the questions add up"),
])
def test_definition_errors_name_question_and_field(path, value, message):
    with pytest.raises(SurveyError, match=re.escape(message)):
        parse_definition(_with(path, value))


def test_ceiling_exactly_met_is_accepted():
    survey = parse_definition(DEFINITION)
    assert parse_definition(_with(("max_epsilon",), survey.total_epsilon)).max_epsilon


@pytest.mark.parametrize("field, value", [("alpha", 0.6), ("beta", [0.6, 0.4]), ("epsilon", 3.0)])
def test_manifest_whose_stated_epsilon_disagrees_is_refused(field, value):
    data = json.loads(published().manifest_bytes())
    data["questions"][0][field] = value
    with pytest.raises(SurveyError, match=r"question 'smoked'.epsilon: states"):
        parse_manifest(json.dumps(data).encode())


def test_manifest_total_must_be_the_sum():
    data = json.loads(published().manifest_bytes())
    data["total_epsilon"] /= 2
    with pytest.raises(SurveyError, match="total_epsilon"):
        parse_manifest(json.dumps(data).encode())


def test_manifest_refuses_duplicate_keys_and_nan():
    raw = published().manifest_bytes()
    with pytest.raises(SurveyError, match="duplicate key"):
        parse_manifest(raw[:-1] + b',"title":"x"}')
    with pytest.raises(SurveyError, match="NaN"):
        parse_manifest(raw.replace(b'"alpha":0.5', b'"alpha":NaN'))


def test_bundled_example_is_valid_package_data():
    example = resources.files("ldpsurvey.shared") / "examples" / "health.toml"
    with resources.as_file(example) as path:
        survey = load_definition(path)
    assert len(survey.questions) >= 4
    assert any(q.type == "choice" for q in survey.questions)
    assert survey.total_epsilon <= survey.max_epsilon


def test_load_definition_reports_the_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("title = \n")
    with pytest.raises(SurveyError, match=r"bad\.toml"):
        load_definition(bad)
    as_json = tmp_path / "survey.json"
    as_json.write_text(json.dumps(DEFINITION))
    assert load_definition(as_json).title == "Habits"


WITH_CONCEPT = {**DEFINITION, "release_batch": 250,
                "questions": [{**DEFINITION["questions"][0], "concept": "smoking.ever"},
                              DEFINITION["questions"][1]]}


def test_format_3_carries_release_batch_concept_and_irr_alpha():
    survey = published(WITH_CONCEPT)
    manifest = json.loads(survey.manifest_bytes())
    assert manifest["format"] == "ldp-survey-manifest/3" and manifest["release_batch"] == 250
    assert manifest["questions"][0]["concept"] == "smoking.ever"
    assert manifest["questions"][0]["irr_alpha"] == 0.75  # the default, spelled out
    assert "concept" not in manifest["questions"][1] and "irr_alpha" not in manifest["questions"][1]
    again = parse_manifest(survey.manifest_bytes())
    assert again == survey and again.questions[0].concept == "smoking.ever"
    assert parse_definition(DEFINITION).release_batch == 100  # the default


def test_format_2_manifests_are_still_read():
    """A manifest signed before irr_alpha existed reads as it did; a concept in it (which no
    aggregator published: publishing refused it) reads with the default irr_alpha."""
    manifest = json.loads(published(WITH_CONCEPT).manifest_bytes())
    manifest["format"] = "ldp-survey-manifest/2"
    del manifest["questions"][0]["irr_alpha"]
    old = parse_manifest(json.dumps(manifest).encode())
    assert old.release_batch == 250 and old.questions == published(WITH_CONCEPT).questions
    manifest["questions"][0]["irr_alpha"] = 0.5
    with pytest.raises(SurveyError, match="unknown field 'irr_alpha'"):
        parse_manifest(json.dumps(manifest).encode())


@pytest.mark.parametrize("change, message", [
    ({"irr_alpha": 1.0}, "question 'smoked'.irr_alpha: must be in (0, 1)"),
    ({"irr_alpha": 0}, "question 'smoked'.irr_alpha: must be in (0, 1)"),
    ({"irr_alpha": "0.5"}, "question 'smoked'.irr_alpha: must be a finite number"),
    ({"concept": None, "irr_alpha": 0.5}, "question 'smoked'.irr_alpha: only a question with a "
                                          "concept has one"),
])
def test_bad_irr_alpha(change, message):
    question = {**WITH_CONCEPT["questions"][0], **change}
    if question["concept"] is None:
        del question["concept"]
    with pytest.raises(SurveyError, match=re.escape(message)):
        parse_definition({**DEFINITION, "questions": [question]})


def test_a_concept_reports_through_the_composed_mechanism():
    smoked = parse_definition(WITH_CONCEPT).questions[0]
    assert smoked.instantaneous.alpha == 0.75 and smoked.instantaneous.beta == (0.5, 0.5)
    assert smoked.reported_mechanism == smoked.mechanism.then(smoked.instantaneous)
    assert smoked.epsilon == parse_definition(DEFINITION).questions[0].epsilon  # charged once
    plain = parse_definition(DEFINITION).questions[1]
    assert plain.instantaneous is None and plain.reported_mechanism is plain.mechanism


@pytest.mark.parametrize("path, text, code", [
    (("title",), "Habits\x1b[2J\x1b[HPrivacy: epsilon 0.01", "U+001B"),  # repaints a terminal
    (("description",), "caf\u00e9 \u202eevil", "U+202E"),                # right-to-left override
    (("questions", 0, "text"), "Smoked?\x00", "U+0000"),
    (("questions", 1, "options", 2), "more\x85", "U+0085"),                # C1 (next line)
    (("questions", 1, "text"), "Sleep \u2066hours\u2069?", "U+2066"),      # bidi isolate
    (("questions", 1, "options", 0), "\u200f<6", "U+200F"),               # right-to-left mark
    (("title",), "Habits\x7f", "U+007F"),
])
def test_control_and_bidi_characters_are_refused_naming_the_field(path, text, code):
    field = {("title",): "survey.title", ("description",): "survey.description",
             ("questions", 0, "text"): "question 'smoked'.text",
             ("questions", 1, "text"): "question 'sleep'.text",
             ("questions", 1, "options", 2): "question 'sleep'.options[2]",
             ("questions", 1, "options", 0): "question 'sleep'.options[0]"}[path]
    with pytest.raises(SurveyError, match=re.escape(f"{field}: holds the control or "
                                                    f"bidirectional character {code}")):
        parse_definition(_with(path, text))


def test_newlines_tabs_and_other_scripts_are_kept():
    text = ("Line one\n\tLine two: \u05e9\u05dc\u05d5\u05dd, \u0645\u0631\u062d\u0628\u0627, "
            "\U0001f468\u200d\U0001f469")  # Hebrew, Arabic, an emoji joined by a ZWJ
    assert parse_definition(_with(("description",), text)).description == text


def test_format_1_manifests_are_still_read_as_released_at_once():
    """A manifest signed before release batches existed: its aggregator released every
    response at once, so it reads as release_batch = 1; /1 never had the new fields."""
    manifest = json.loads(published().manifest_bytes())
    manifest["format"] = "ldp-survey-manifest/1"
    del manifest["release_batch"]
    old = parse_manifest(json.dumps(manifest).encode())
    assert old.release_batch == 1 and old.questions == published().questions
    manifest["release_batch"] = 5
    with pytest.raises(SurveyError, match="unknown field 'release_batch'"):
        parse_manifest(json.dumps(manifest).encode())
    del manifest["release_batch"]
    manifest["questions"][0]["concept"] = "smoking"
    with pytest.raises(SurveyError, match="unknown field 'concept'"):
        parse_manifest(json.dumps(manifest).encode())


@pytest.mark.parametrize("change, message", [
    ({"release_batch": 0}, "survey.release_batch: must be a whole number from 1"),
    ({"release_batch": 2.5}, "survey.release_batch"),
    ({"release_batch": True}, "survey.release_batch"),
    ({"release_batch": 10**7}, "survey.release_batch"),
])
def test_bad_release_batch(change, message):
    with pytest.raises(SurveyError, match=re.escape(message)):
        parse_definition({**DEFINITION, **change})


@pytest.mark.parametrize("concept", ["Smoking", "1st", "a b", "x" * 65, 7, ""])
def test_bad_concept(concept):
    definition = copy.deepcopy(DEFINITION)
    definition["questions"][0]["concept"] = concept
    with pytest.raises(SurveyError, match=r"question 'smoked'\.concept"):
        parse_definition(definition)


def test_format_4_carries_declared_crosstabs_and_only_then():
    """A survey that declares cross-tabs is signed as /4 with them; one that declares none is
    written as /3, as before, so that clients of earlier releases keep reading it."""
    declared = published({**DEFINITION, "crosstabs": [["smoked", "sleep"]]})
    manifest = json.loads(declared.manifest_bytes())
    assert manifest["format"] == "ldp-survey-manifest/4"
    assert manifest["crosstabs"] == [["smoked", "sleep"]]
    assert parse_manifest(declared.manifest_bytes()) == declared
    plain = json.loads(published().manifest_bytes())
    assert plain["format"] == "ldp-survey-manifest/3" and "crosstabs" not in plain
    plain["crosstabs"] = [["smoked", "sleep"]]
    with pytest.raises(SurveyError, match="unknown field 'crosstabs'"):
        parse_manifest(json.dumps(plain).encode())
    del manifest["crosstabs"]
    with pytest.raises(SurveyError, match="missing field 'crosstabs'"):
        parse_manifest(json.dumps(manifest).encode())


@pytest.mark.parametrize("typo, expected", [
    ("typ", "question 'smoked': unknown field 'typ' (did you mean 'type'?)"),
    ("optons", "question 'smoked': unknown field 'optons' (did you mean 'options'?)"),
    ("colour", "question 'smoked': unknown field 'colour'"),
])
def test_a_typo_is_named_first_with_a_suggestion_and_the_question_by_id(typo, expected):
    """`typ = "choice"` used to say only "missing field 'type'", never naming `typ`."""
    definition = _with(("questions", 0, typo), "choice")
    if typo == "typ":
        del definition["questions"][0]["type"]
    with pytest.raises(SurveyError, match=re.escape(expected)):
        parse_definition(definition)
