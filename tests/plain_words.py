"""What a respondent reads on the form: the visible text outside the collapsed "How your
answers are protected" section, measured as issue 26 asks (textstat 0.7.3's Flesch-Kincaid
grade, words per question, and words kept for that section), and in each other language the
form speaks that textstat has a readability formula for (issue 43): French by Kandel and
Moles' adaptation of Flesch's reading ease (1958; textstat's flesch_reading_ease after
set_lang("fr")), Spanish by Fernández Huerta's (1959) and Crawford's grade (1984), each on
Flesch's scale where 60 to 70 is plain language (grades 8 and 9), so at least 60 stands for
grade 8 or below. Flesch-Kincaid's grade is fitted to English and says nothing of French or
Spanish text.

The text is the page's `innerText`, which leaves out what is not rendered (hidden steps, the
closed section's body). Each line of it is one sentence: a heading, a button or an option has
no full stop of its own, and glued to the next line it would count as one long sentence."""

import re

import textstat

# Words that belong in "How your answers are protected", never in the text read first.
KEPT_FOR_DETAILS = ("epsilon", "ε", "ln", "budget", "ceiling", "client")
KEPT_FOR_DETAILS_IN = {"en": KEPT_FOR_DETAILS,
                       "fr": ("epsilon", "ε", "ln", "budget", "plafond", "client"),
                       "es": ("epsilon", "ε", "ln", "presupuesto", "tope", "cliente")}
WORDS_PER_QUESTION = 25
WORDS_BESIDE = 60
MAX_GRADE = 8.0
MIN_EASE = 60.0  # Flesch's scale: 60 to 70 is plain language, grades 8 and 9


def visible_text(page) -> str:
    """The page's visible text, a sentence per line (see the module's docstring)."""
    lines = [line.strip() for line in page.evaluate("document.body.innerText").splitlines()]
    return "\n".join(line if line[-1] in ".?!:" else f"{line}."
                     for line in lines if line)


def words(text: str) -> int:
    return textstat.lexicon_count(text)


def grade(text: str) -> float:
    return textstat.flesch_kincaid_grade(text)


def readability(text: str, language: str) -> dict[str, float]:
    """The formulas textstat has for `language`, by name (syllables counted with its
    hyphenation dictionary): "grade" ones must stay at most MAX_GRADE, "ease" ones at least
    MIN_EASE."""
    textstat.set_lang(language)
    try:
        if language == "fr":
            return {"ease (Kandel-Moles)": textstat.flesch_reading_ease(text)}
        if language == "es":
            return {"ease (Fernández Huerta)": textstat.fernandez_huerta(text),
                    "grade (Crawford)": textstat.crawford(text)}
        return {"grade (Flesch-Kincaid)": textstat.flesch_kincaid_grade(text)}
    finally:
        textstat.set_lang("en_US")


def hard(text: str, language: str = "en") -> list[str]:
    """The readability formulas of `language` that `text` fails, with their values."""
    return [f"{name} {value}" for name, value in readability(text, language).items()
            if (value > MAX_GRADE if name.startswith("grade") else value < MIN_EASE)]


def kept_for_details(text: str, language: str = "en") -> list[str]:
    """The words of KEPT_FOR_DETAILS (in `language`) found in `text`, as whole words."""
    return [word for word in KEPT_FOR_DETAILS_IN[language]
            if re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE)]


def problems(page, questions: int, language: str = "en") -> list[str]:
    """What breaks issue 26's targets on this page, as sentences (empty: none)."""
    text = visible_text(page)
    found = []
    if words(text) > WORDS_PER_QUESTION * questions + WORDS_BESIDE:
        found.append(f"{words(text)} words for {questions} questions")
    found.extend(hard(text, language))
    if kept_for_details(text, language):
        found.append(f"says {kept_for_details(text, language)}")
    return found
