"""The client's own words in the respondent's language (`respond --language`): the gettext
catalogue "client" (shared/locale/<language>/LC_MESSAGES/client.mo, compiled from client.po
with `pybabel compile`), read with the standard library's gettext, so the client needs no more
than before; a language without a catalogue reads in English. Messages are marked `_()` where
they are said and `N_()` where they are defined, so `pybabel extract` finds both."""

import gettext
from contextvars import ContextVar
from dataclasses import replace
from importlib import resources

from ldpsurvey.shared import Survey
from ldpsurvey.shared.survey.manifest import Wording

LOCALES = resources.files("ldpsurvey.shared") / "locale"
DOMAIN = "client"
_chosen: ContextVar[gettext.NullTranslations | None] = ContextVar("language", default=None)


def N_(message: str) -> str:
    """`message` itself: marks it for `pybabel extract`; `_()` translates it where it is said."""
    return message


def _(message: str) -> str:
    """`message` in the language chosen with use() (English before)."""
    chosen = _chosen.get()
    return message if chosen is None else chosen.gettext(message)


def use(language: str | None) -> None:
    """Say the client's words in `language` (a tag such as "fr" or "pt-BR") from now on in this
    context; None or a language without a catalogue: English."""
    _chosen.set(None if language is None else gettext.translation(
        DOMAIN, str(LOCALES), [language.replace("-", "_")], fallback=True))


def shown_in(survey: Survey, language: str | None) -> Survey:
    """The survey's texts in `language` if it has it (else in its first), with a yes/no
    question's options in the client's words, for showing only: what is answered, checked and
    charged stays the survey as signed."""
    chosen = language if language in survey.languages else survey.languages[0]
    worded = survey.in_language(chosen)
    yes_no = (_("No"), _("Yes"))
    return replace(worded, questions=tuple(
        q.worded(Wording(q.text, q.hint, yes_no)) if q.type == "yes_no" else q
        for q in worded.questions))
