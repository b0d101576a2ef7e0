"""What a respondent reads on the form: the visible text outside the collapsed "How your
answers are protected" section, measured as issue 26 asks (textstat 0.7.3's Flesch-Kincaid
grade, words per question, and words kept for that section).

The text is the page's `innerText`, which leaves out what is not rendered (hidden steps, the
closed section's body). Each line of it is one sentence: a heading, a button or an option has
no full stop of its own, and glued to the next line it would count as one long sentence."""

import re

import textstat

# Words that belong in "How your answers are protected", never in the text read first.
KEPT_FOR_DETAILS = ("epsilon", "ε", "ln", "budget", "ceiling", "client")
WORDS_PER_QUESTION = 25
WORDS_BESIDE = 60
MAX_GRADE = 8.0


def visible_text(page) -> str:
    """The page's visible text, a sentence per line (see the module's docstring)."""
    lines = [line.strip() for line in page.evaluate("document.body.innerText").splitlines()]
    return "\n".join(line if line[-1] in ".?!:" else f"{line}."
                     for line in lines if line)


def words(text: str) -> int:
    return textstat.lexicon_count(text)


def grade(text: str) -> float:
    return textstat.flesch_kincaid_grade(text)


def kept_for_details(text: str) -> list[str]:
    """The words of KEPT_FOR_DETAILS found in `text`, as whole words."""
    return [word for word in KEPT_FOR_DETAILS
            if re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE)]


def problems(page, questions: int) -> list[str]:
    """What breaks issue 26's targets on this page, as sentences (empty: none)."""
    text = visible_text(page)
    found = []
    if words(text) > WORDS_PER_QUESTION * questions + WORDS_BESIDE:
        found.append(f"{words(text)} words for {questions} questions")
    if grade(text) > MAX_GRADE:
        found.append(f"grade {grade(text)}")
    if kept_for_details(text):
        found.append(f"says {kept_for_details(text)}")
    return found
