"""The respondent form's language. A survey lists its languages (format /8; English alone
before); the form is shown in the one its link asks for (`?lang=fr`, what the language switcher
links), else the best match of the browser's Accept-Language (werkzeug's best_match: `fr-CA`
takes `fr`), else the survey's first. The form's own words (template and scripts) come from
the gettext catalogue `form` (shared/locale/<language>/LC_MESSAGES/form.mo, compiled from
form.po with `pybabel compile`), read with Babel; a language without one shows them in English,
and the page's `lang` attributes say so."""

from functools import cache

from babel import Locale, UnknownLocaleError
from babel.messages.mofile import read_mo
from babel.support import NullTranslations, Translations
from babel.units import format_unit
from flask import request

from ldpsurvey.shared import Survey
from ldpsurvey.shared.http_contract import schedule_words
from ldpsurvey.shared.survey.check import LOCALES, form_speaks

DOMAIN = "form"  # the web form's catalogue (the Python client's is "client")
SOURCE_LANGUAGE = "en"  # the language the form's words are written in


def locale_name(language: str) -> str:
    """A language tag as gettext names its folder: `pt-BR` -> `pt_BR`."""
    return language.replace("-", "_")


@cache
def translations(language: str) -> NullTranslations:
    """The form's words in `language` (English, NullTranslations, without a catalogue)."""
    if not form_speaks(language):
        return NullTranslations()
    return Translations.load(str(LOCALES), [locale_name(language)], DOMAIN)


def _compiled(language: str):
    return LOCALES / locale_name(language) / "LC_MESSAGES" / f"{DOMAIN}.mo"


@cache
def script_words(language: str) -> dict[str, str]:
    """The whole catalogue as {English message: translation} for the page's scripts (words.js
    reads it from the page's JSON data); empty in English."""
    if language == SOURCE_LANGUAGE or not form_speaks(language):
        return {}
    with _compiled(language).open("rb") as compiled:
        catalogue = read_mo(compiled)
    return {message.id: message.string for message in catalogue
            if message.id and message.string and isinstance(message.id, str)}


def native_name(language: str) -> str:
    """The language's name in itself, capitalized as a menu item ("Français", "Español"); the
    tag itself if Babel does not know it."""
    try:
        name = Locale.parse(language, sep="-").get_display_name(Locale.parse(language, sep="-"))
    except (ValueError, UnknownLocaleError):
        return language
    return name[:1].upper() + name[1:] if name else language


def chosen(survey: Survey) -> str:
    """The survey's language this request asks for: `?lang=`, else Accept-Language's best
    match, else the survey's first."""
    asked = request.args.get("lang")
    if asked in survey.languages:
        return asked
    return request.accept_languages.best_match(survey.languages, default=survey.languages[0])


def schedule(every: float, language: str) -> str:
    """How often releases may happen, as the schedule note's message in `language` places it:
    in English "once an hour" (protocol.schedule_words), in another language the interval as
    Babel writes it ("1 heure", "10 minutos"), in the largest unit that divides it exactly."""
    if language == SOURCE_LANGUAGE:
        return schedule_words(every)
    for unit, seconds in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if every >= seconds and every % seconds == 0:
            return format_unit(every // seconds, f"duration-{unit}", locale=locale_name(language))
    return format_unit(every, "duration-second", locale=locale_name(language))


def form_context(survey: Survey, release_every: float) -> dict:
    """What survey.html needs to speak the chosen language: the survey in it, `language` (its
    texts'), `words_language` (the form's own words': the same, or English without a catalogue),
    the switcher's (tag, name) pairs (none for one language), gettext as `_`, the scripts'
    words and the release schedule in words."""
    language = chosen(survey)
    words_language = language if form_speaks(language) else SOURCE_LANGUAGE
    switcher = [(tag, native_name(tag)) for tag in survey.languages] if len(
        survey.languages) > 1 else []
    return {"survey": survey.in_language(language), "language": language,
            "words_language": words_language, "switcher": switcher,
            "_": translations(words_language).gettext, "words": script_words(words_language),
            "schedule": schedule(release_every, words_language)}
