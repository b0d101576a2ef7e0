"""XLSForm's language columns (`label::French (fr)`): the survey file's language tag is the code
in parentheses, and the name before it is Babel's English name for the tag."""

import re

from babel import Locale, UnknownLocaleError

NAMED = re.compile(r"(?P<name>.*\S)\s*\((?P<tag>[^()\s]+)\)\s*")
NO_LANGUAGE = "default"  # pyxform's key for a column without `::Language`


def tag(name: str) -> str | None:
    """The language tag of an XLSForm language name `Name (tag)`, None when it gives none."""
    match = NAMED.fullmatch(name)
    return match.group("tag") if match else None


def column_name(language: str) -> str:
    """The XLSForm language name of a tag, `French (fr)`: Babel's English name, the tag itself
    when Babel knows none."""
    try:
        name = Locale.parse(language, sep="-").get_display_name("en")
    except (UnknownLocaleError, ValueError):
        name = None
    return f"{name or language} ({language})"
