"""`ldp-survey respond --language` and `survey check` on a survey in several languages
(docs/languages.md), against a real aggregator: the survey's texts and the client's own words
in the language chosen, the same survey answered."""

import gettext
import shlex
from importlib import resources

import pytest
from click.testing import CliRunner

from ldpsurvey.cli import main
from ldpsurvey.client import INTRO
from ldpsurvey.shared import read_definition

from helpers import doc_blocks, released_n

EXAMPLE = resources.files("ldpsurvey.shared") / "examples" / "languages.toml"
LANGUAGES = read_definition(EXAMPLE)
LOCALES = resources.files("ldpsurvey.shared") / "locale"
ANSWERS = "smoked=1,drank_and_drove=0,sleep=2,coffee=3"


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_CLIENT_DIR", str(tmp_path / "respondent"))
    monkeypatch.delenv("LDP_SURVEY_LANGUAGE", raising=False)
    return CliRunner()


@pytest.fixture
def survey_id(client, auth):
    response = client.post("/api/surveys", json={**LANGUAGES, "release_batch": 1}, headers=auth)
    return response.json["survey_id"]


def words(language):
    return gettext.translation("client", str(LOCALES), [language]).gettext


def documented(live_server, survey_id):
    """docs/languages.md's respond command, at this survey's link (its language kept)."""
    (block,) = set(doc_blocks("respond-language"))
    (command,) = [shlex.split(line) for line in block.splitlines() if line.strip()]
    assert command[:2] == ["ldp-survey", "respond"]
    return [part.replace("https://survey.example.org/s/ID", f"{live_server}/s/{survey_id}")
            for part in command[1:]]


def test_the_check_command_runs_as_written():
    (block,) = set(doc_blocks("languages-check"))
    with resources.as_file(EXAMPLE) as path:
        command = [str(path) if part == "shared/examples/languages.toml" else part
                   for part in shlex.split(block)[1:]]
        result = CliRunner().invoke(main, command)
    assert result.exit_code == 0, result.output
    assert "in 3 languages: en (the texts' own), fr, es, every text translated" in result.stdout


def test_check_says_which_languages_the_form_has_no_words_for(tmp_path):
    """German has no catalogue of the form's words (French and Spanish have): survey check says
    respondents reading German see the form's own words in English; --json lists it."""
    import json

    german = {**LANGUAGES, "languages": ["en", "de", "fr"],
              "translations": {"de": LANGUAGES["translations"]["es"],
                               "fr": LANGUAGES["translations"]["fr"]}}
    path = tmp_path / "survey.json"
    path.write_text(json.dumps(german))
    result = CliRunner().invoke(main, ["survey", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert "the web form has no words of its own in de: respondents reading those" in result.stdout
    checked = CliRunner().invoke(main, ["survey", "check", str(path), "--json"])
    assert json.loads(checked.stdout)["form_words_missing"] == ["de"]
    with resources.as_file(EXAMPLE) as example:
        three = CliRunner().invoke(main, ["survey", "check", str(example), "--json"])
    assert json.loads(three.stdout)["form_words_missing"] == []


@pytest.mark.parametrize("language", ["fr", "es"])
def test_respond_asks_and_says_in_the_language_chosen(runner, live_server, client, auth,
                                                       survey_id, language):
    """Typed answers (yes in that language, an option's number, a number), reviewed and sent:
    every text the respondent reads first is in that language, within the plain-word limits
    of that language (tests/plain_words.py)."""
    from plain_words import hard, kept_for_details

    _ = words(language)
    texts = LANGUAGES["translations"][language]
    typed = {"fr": "oui", "es": "sí"}[language]
    command = documented(live_server, survey_id)
    assert command[-2:] == ["--language", "fr"]
    result = runner.invoke(main, [*command[:-1], language],
                           input=f"{typed}\n0\n2\n3\n\ny\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert texts["title"] in out and texts["questions"]["smoked"]["text"] in out
    assert _(INTRO) in out and _(INTRO) != INTRO
    assert f"0) {_('No')}  1) {_('Yes')}" in out
    assert "  ".join(f"{j}) {o}" for j, o in enumerate(texts["questions"]["sleep"]["options"])
                     ) in out
    assert texts["questions"]["coffee"]["unit"] in out
    assert _("Your answer") in out and _("Sent. Thank you. Your real answers never left this "
                                         "device.") in out
    assert released_n(client, auth, survey_id) == 1
    read_first = out.split(_("Your answer"))[0]
    assert kept_for_details(out, language) == [] and hard(read_first, language) == []


def test_a_language_the_survey_lacks_shows_its_first(runner, live_server, survey_id):
    """German: the survey's first language (English) and the client's English words; without
    --language or LDP_SURVEY_LANGUAGE, the same."""
    for extra in (["--language", "de"], []):
        result = runner.invoke(main, ["respond", "--url", f"{live_server}/s/{survey_id}",
                                      "--answers", ANSWERS, "--yes", *extra])
        assert result.exit_code == 0, result.output
        assert LANGUAGES["title"] in result.stdout and INTRO in result.stdout


def test_the_language_variable_chooses_as_the_option_does(runner, live_server, survey_id,
                                                          monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_LANGUAGE", "es")
    result = runner.invoke(main, ["respond", "--url", f"{live_server}/s/{survey_id}",
                                  "--answers", ANSWERS, "--yes"])
    assert result.exit_code == 0, result.output
    assert LANGUAGES["translations"]["es"]["title"] in result.stdout
    assert words("es")(INTRO) in result.stdout
