"""A survey in several languages (docs/survey-file.md, "In several languages"): the survey
file's languages and translations, refused in one line when a text is missing, carried by the
signed manifest as format /8, and read back in each language."""

import copy
import json
from dataclasses import replace
from importlib import resources

import pytest

from ldpsurvey.shared import SurveyError, parse_definition, parse_manifest, read_definition

EXAMPLE = resources.files("ldpsurvey.shared") / "examples" / "languages.toml"
DEFINITION = read_definition(EXAMPLE)
HEALTH = read_definition(resources.files("ldpsurvey.shared") / "examples" / "health.toml")


def published(definition):
    return replace(parse_definition(definition), survey_id="s1", key_id="k1",
                   origin="https://survey.example.org")


def test_a_survey_in_several_languages_is_format_8_and_english_alone_keeps_its_format():
    manifest = published(DEFINITION).manifest()
    assert manifest["format"] == "ldp-survey-manifest/8"
    assert manifest["languages"] == ["en", "fr", "es"]
    assert manifest["translations"]["fr"]["questions"]["sleep"]["options"] == [
        "Moins de 6", "De 6 à 8", "Plus de 8"]
    assert manifest["questions"][0]["hint"] == "Count even a single cigarette."
    english = published(HEALTH).manifest()
    assert english["format"] == "ldp-survey-manifest/5"
    assert "languages" not in english and "translations" not in english
    # a hint alone, or one language that is not English, needs /8 too
    hinted = copy.deepcopy(HEALTH)
    hinted["questions"][0]["hint"] = "Even one."
    assert published(hinted).manifest()["format"] == "ldp-survey-manifest/8"
    french = {**HEALTH, "languages": ["fr"]}
    assert published(french).manifest()["languages"] == ["fr"]
    assert published(french).manifest()["translations"] == {}


def test_the_manifest_round_trip_is_exact_and_earlier_formats_refuse_its_fields():
    survey = published(DEFINITION)
    raw = survey.manifest_bytes()
    assert parse_manifest(raw) == survey and parse_manifest(raw).manifest_bytes() == raw
    older = raw.replace(b"ldp-survey-manifest/8", b"ldp-survey-manifest/7")
    with pytest.raises(SurveyError, match="unknown field 'languages'"):
        parse_manifest(older)
    data = json.loads(raw)
    del data["translations"]
    with pytest.raises(SurveyError, match="missing field 'translations'"):
        parse_manifest(json.dumps(data).encode())


def test_in_language_gives_every_text_in_that_language_and_the_same_parameters():
    survey = published(DEFINITION)
    french = survey.in_language("fr")
    assert french.title == "Santé et habitudes"
    smoked, drove, sleep, coffee = french.questions
    assert smoked.hint == "Comptez même une seule cigarette."
    assert sleep.options == ("Moins de 6", "De 6 à 8", "Plus de 8")
    assert "De 6 à 8" in sleep.scheme.asked() and coffee.scheme.unit == "tasses"
    assert drove.options == ("No", "Yes")  # yes/no: the form's own words, not the survey's
    assert [q.epsilon for q in french.questions] == [q.epsilon for q in survey.questions]
    assert survey.in_language("en") is survey
    with pytest.raises(KeyError):
        survey.in_language("de")


def _without(path):
    data = copy.deepcopy(DEFINITION)
    target = data
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return data


@pytest.mark.parametrize(("path", "message"), [
    (("translations", "fr", "questions", "sleep"),
     "survey.translations.fr.questions: question 'sleep' has no translation"),
    (("translations", "es"), "survey.translations: no table for 'es', which languages lists"),
    (("translations", "fr", "questions", "smoked", "hint"),
     "survey.translations.fr.questions.smoked: missing field 'hint'"),
    (("translations", "es", "questions", "coffee", "unit"),
     "survey.translations.es.questions.coffee: missing field 'unit'"),
    (("translations", "fr", "description"), "survey.translations.fr: missing field 'description'"),
    (("translations", "fr", "questions", "sleep", "text"),
     "survey.translations.fr.questions.sleep: missing field 'text'"),
])
def test_a_missing_translation_is_refused_in_one_line_naming_it(path, message):
    with pytest.raises(SurveyError) as raised:
        parse_definition(_without(path))
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["translations"].update(de=d["translations"]["fr"]),
     "survey.translations.de: no language 'de' in this survey"),
    (lambda d: d["translations"]["fr"]["questions"].update(extra={"text": "?"}),
     "survey.translations.fr.questions.extra: no question 'extra' in this survey"),
    (lambda d: d["translations"]["fr"]["questions"]["sleep"]["options"].pop(),
     "survey.translations.fr.questions.sleep.options: needs 3 options"),
    (lambda d: d["translations"]["fr"]["questions"]["drank_and_drove"].update(
        options=["Non", "Oui"]), "drank_and_drove: unknown field 'options'"),
    (lambda d: d["translations"]["fr"]["questions"]["drank_and_drove"].update(hint="?"),
     "drank_and_drove: unknown field 'hint'"),
    (lambda d: d.update(languages=["en", "en"]), "survey.languages: lists a language twice"),
    # BCP 47 tags ignore case: two would name one page of a copy (index.pt-BR.html) on a
    # file system that ignores case too.
    (lambda d: d.update(languages=["en", "pt-BR", "pt-br"]),
     "survey.languages: lists a language twice"),
    (lambda d: d.update(languages=["en", "French"]), "survey.languages[1]: must be a language"),
    (lambda d: d.update(languages=[]), "survey.languages: must be a list of 1 to 20"),
    (lambda d: d["translations"]["fr"].update(title="\u202eevil"),
     "survey.translations.fr.title: holds the control or bidirectional character"),
])
def test_a_translation_that_does_not_fit_the_survey_is_refused(change, message):
    data = copy.deepcopy(DEFINITION)
    change(data)
    with pytest.raises(SurveyError, match=message.replace(".", r"\.").replace("[", r"\[")):
        parse_definition(data)
