"""The form's and the client's own words in each language (shared/locale): the gettext
catalogues hold every message the code marks, each translated with its placeholders, compiled
as committed, the same words where the two share a message; and a language is added with the
Babel commands docs/languages.md shows, run here as written."""

import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po

from ldpsurvey.client import OPEN_WORDS
from ldpsurvey.shared.mechanisms.disclosed import WORDS

from helpers import REPOSITORY, doc_blocks

LOCALES = resources.files("ldpsurvey.shared") / "locale"
DOMAINS = ("form", "client")
LANGUAGES = ("fr", "es")
PYBABEL = Path(sys.executable).parent / "pybabel"
PLACEHOLDER = re.compile(r"\{\w+\}")
# What `pybabel extract` reads: the code whose words the catalogues hold.
SOURCES = ("shared/web", "shared/locale", "aggregator/templates", "client", "cli")


def catalogue(path):
    with open(path, "rb") as file:
        return read_po(file)


def ids(messages):
    return {message.id for message in messages if message.id}


def repository_copy(tmp_path):
    """The folders the Babel commands read and write, copied (the run changes nothing here)."""
    for folder in SOURCES:
        shutil.copytree(REPOSITORY / folder, tmp_path / folder)
    return tmp_path


def run(commands, cwd):
    for command in commands:
        command = [str(PYBABEL) if part == "pybabel" else part for part in command]
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (command, done.stderr)


def commands(marker):
    import shlex

    (block,) = set(doc_blocks(marker))
    return [shlex.split(line, comments=True) for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_the_templates_hold_every_message_the_code_marks(tmp_path):
    """docs/languages.md's extract commands, run on a copy: the same messages as committed."""
    copy = repository_copy(tmp_path)
    run(commands("extract-messages"), copy)
    for domain in DOMAINS:
        fresh = catalogue(copy / "shared" / "locale" / f"{domain}.pot")
        assert ids(fresh) == ids(catalogue(LOCALES / f"{domain}.pot")), domain
        assert len(ids(fresh)) > (100 if domain == "form" else 20)


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("domain", DOMAINS)
def test_every_message_is_translated_with_its_placeholders(domain, language):
    template = ids(catalogue(LOCALES / f"{domain}.pot"))
    translated = catalogue(LOCALES / language / "LC_MESSAGES" / f"{domain}.po")
    assert ids(translated) == template
    for message in translated:
        if not message.id:
            continue
        assert message.string and "fuzzy" not in message.flags, message.id
        assert sorted(PLACEHOLDER.findall(message.string)) == sorted(
            PLACEHOLDER.findall(message.id)), message.id
        assert message.string != message.id or message.id in ("No", "Questions"), message.id


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("domain", DOMAINS)
def test_the_compiled_catalogues_are_the_translations(tmp_path, domain, language):
    """`pybabel compile` of the committed .po gives the committed .mo's messages."""
    copy = tmp_path / "locale"
    shutil.copytree(LOCALES, copy)
    run([["pybabel", "compile", "-d", str(copy), "-D", domain, "-l", language]], tmp_path)
    compiled = LOCALES / language / "LC_MESSAGES" / f"{domain}.mo"
    with open(copy / language / "LC_MESSAGES" / f"{domain}.mo", "rb") as fresh, \
            compiled.open("rb") as committed:
        assert {m.id: m.string for m in read_mo(fresh)} == {
            m.id: m.string for m in read_mo(committed)}


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_message_both_catalogues_hold_reads_the_same_in_each(language):
    """The client's first words are the form's (ldpsurvey/client/notes.py, web/form.js)."""
    form, client = (catalogue(LOCALES / language / "LC_MESSAGES" / f"{domain}.po")
                    for domain in DOMAINS)
    shared = ids(form) & ids(client)
    assert len(shared) >= 10 and OPEN_WORDS in shared
    assert {i: form[i].string for i in shared} == {i: client[i].string for i in shared}
    assert OPEN_WORDS == WORDS  # the client's copy of the open-answer mark


def test_the_update_commands_keep_every_translation(tmp_path):
    """docs/languages.md's update commands, on an unchanged copy: nothing turns fuzzy."""
    copy = repository_copy(tmp_path)
    run(commands("extract-messages"), copy)
    for domain in DOMAINS:
        for language in LANGUAGES:
            po = Path("shared", "locale", language, "LC_MESSAGES", f"{domain}.po")
            updated, committed = catalogue(copy / po), catalogue(REPOSITORY / po)
            assert not any("fuzzy" in m.flags for m in updated if m.id)
            assert {m.id: m.string for m in updated if m.id} == {
                m.id: m.string for m in committed if m.id}  # the header has today's date


def test_a_language_is_added_with_the_documented_commands(tmp_path):
    """init, then a translator's work (here: every message given a text, as one would), then
    compile; the compiled catalogue answers in the new language."""
    from babel.messages.pofile import write_po
    from babel.support import Translations

    copy = repository_copy(tmp_path)
    steps = commands("add-language")
    assert [step[:2] for step in steps] == [["pybabel", "init"]] * 2 + [["pybabel", "compile"]] * 2
    run(steps[:2], copy)
    added = copy / "shared" / "locale" / "de" / "LC_MESSAGES"
    for domain in DOMAINS:
        translated = catalogue(added / f"{domain}.po")
        assert ids(translated) == ids(catalogue(LOCALES / f"{domain}.pot"))
        for message in translated:
            if message.id:
                message.string = f"[de] {message.id}"
        translated.fuzzy = False
        with open(added / f"{domain}.po", "wb") as file:
            write_po(file, translated)
    run(steps[2:], copy)
    german = Translations.load(str(copy / "shared" / "locale"), ["de"], "form")
    assert german.gettext("Send") == "[de] Send"
