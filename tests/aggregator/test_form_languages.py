"""The respondent form in several languages (issue 43 item 2): the survey's texts and the
form's own words (gettext catalogue "form", shared/locale) in the language the browser asks
for, or the one picked with the switcher, by keyboard too; `lang` attributes say which
language each text is in; axe finds nothing in any language. Debian's Chromium."""

from importlib import resources

import pytest
from babel.support import Translations
from test_browser import (  # noqa: F401 (database_url: the browser tests' SQLite fixture)
    axe_checker,
    create,
    database_url,
    protection,
    randomize,
)

from ldpsurvey.shared import read_definition

LANGUAGES = read_definition(resources.files("ldpsurvey.shared") / "examples" / "languages.toml")
LOCALES = resources.files("ldpsurvey.shared") / "locale"
INTRO = ("Your device flips a coin for each answer and sometimes sends another answer on "
         "purpose. No one can know your real answers. Researchers can still count how common "
         "each one is.")


def words(language):
    """gettext of the form's catalogue in `language`."""
    return Translations.load(str(LOCALES), [language], "form").gettext


def in_locale(browser, locale):
    """A page whose browser asks for `locale` (Accept-Language and navigator.languages)."""
    return browser.new_context(viewport={"width": 420, "height": 900}, locale=locale).new_page()


def opened(page, url):
    page.goto(url)
    page.wait_for_selector("#questions:not([hidden])")
    return page


@pytest.mark.parametrize(("locale", "language", "title"), [
    ("fr-CA", "fr", "Santé et habitudes"), ("es-MX", "es", "Salud y hábitos"),
    ("en-GB", "en", "Health and habits"), ("de-DE", "en", "Health and habits")])
def test_the_form_speaks_the_language_the_browser_asks_for(browser, live_server, client, auth,
                                                           locale, language, title):
    survey_id = create(client, auth, LANGUAGES)
    page = opened(in_locale(browser, locale), f"{live_server}/s/{survey_id}")
    _ = words(language)
    assert page.locator("html").get_attribute("lang") == language
    assert page.locator("h1").inner_text() == title
    assert page.locator("#intro").inner_text() == _(INTRO)
    assert page.locator("#review").inner_text() == _("Review my answers")
    smoked = page.locator('fieldset[data-question="smoked"]')
    expected = LANGUAGES["questions"][0] if language == "en" else (
        LANGUAGES["translations"][language]["questions"]["smoked"])
    assert smoked.locator("legend").inner_text() == expected["text"]
    assert smoked.locator(".hint").inner_text() == expected["hint"]
    assert smoked.locator("label").all_inner_texts() == [_("No"), _("Yes")]
    if language != "en":
        assert _(INTRO) != INTRO and _("Yes") != "Yes"


def test_every_survey_text_is_marked_with_its_language_and_the_rest_is_the_pages(
        browser, live_server, client, auth):
    """A survey in a language the form has no words for (here German): its texts are marked
    lang="de", the page (the form's own words) lang="en"."""
    german = {**LANGUAGES, "languages": ["de", "fr"],
              "translations": {"fr": LANGUAGES["translations"]["fr"]}}
    survey_id = create(client, auth, german)
    page = opened(in_locale(browser, "de-DE"), f"{live_server}/s/{survey_id}")
    assert page.locator("html").get_attribute("lang") == "en"
    assert page.locator("#review").inner_text() == "Review my answers"
    marked = page.evaluate("""() => [...document.querySelectorAll(
        'h1, .lead, legend, .hint, label.option span')].map((node) => node.lang)""")
    assert len(marked) > 8 and set(marked) == {"de"}
    french = opened(page, f"{live_server}/s/{survey_id}?lang=fr")
    assert french.locator("html").get_attribute("lang") == "fr"
    assert french.locator("legend").first.get_attribute("lang") == "fr"


def test_the_switcher_changes_language_by_keyboard_and_keeps_the_invitation(
        browser, live_server, client, auth):
    survey_id = create(client, auth, {**LANGUAGES, "invitation_only": True})
    page = opened(in_locale(browser, "en-US"), f"{live_server}/s/{survey_id}#t=a-token")
    switcher = page.locator("nav#languages")
    assert switcher.get_attribute("aria-label") == "Language"
    assert switcher.locator("a").all_inner_texts() == ["English", "Français", "Español"]
    assert switcher.locator("a[aria-current]").inner_text() == "English"
    assert switcher.locator("a").nth(2).get_attribute("lang") == "es"
    page.keyboard.press("Tab")  # the first stop of the page is the switcher's first link
    assert page.evaluate("document.activeElement.textContent") == "English"
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Español"
    page.keyboard.press("Enter")
    page.wait_for_url("**?lang=es#t=a-token")
    page.wait_for_selector("#questions:not([hidden])")
    assert page.locator("html").get_attribute("lang") == "es"
    assert page.locator("nav#languages a[aria-current]").inner_text() == "Español"
    assert page.locator("nav#languages").get_attribute("aria-label") == "Idioma"
    assert page.locator("h1").inner_text() == "Salud y hábitos"


def test_one_language_has_no_switcher(page, live_server, client, auth):
    english = {key: value for key, value in LANGUAGES.items()
               if key not in ("languages", "translations")}
    opened(page, f"{live_server}/s/{create(client, auth, english)}")
    assert page.locator("nav#languages").count() == 0


def test_answers_given_in_one_language_are_the_same_survey_in_another(page, live_server,
                                                                     client, auth):
    """What is answered is the signed survey: answered in French, the Spanish page shows the
    same randomized answers (the survey did not change), in Spanish words."""
    survey_id = create(client, auth, LANGUAGES)
    opened(page, f"{live_server}/s/{survey_id}?lang=fr")
    for qid in ("smoked", "drank_and_drove", "sleep"):
        page.click(f"#q-{qid}-0")
    page.fill("#q-coffee-value", "2")
    randomize(page)
    french = page.locator("#sent-list li").all_inner_texts()
    page.goto(f"{live_server}/s/{survey_id}?lang=es")
    page.wait_for_selector("#confirm:not([hidden])")
    spanish = page.locator("#sent-list li").all_inner_texts()
    assert len(spanish) == len(french) == 4
    assert spanish[0].startswith("¿Ha fumado") and french[0].startswith("Avez-vous fumé")
    assert page.locator("#again").inner_text() == words("es")(
        "You answered this survey here before but did not send it. The same answers are "
        "used, so nothing new is revealed.")


@pytest.mark.parametrize("language", ["en", "fr", "es"])
def test_axe_finds_nothing_in_each_language(browser, live_server, client, auth, language):
    survey_id = create(client, auth, LANGUAGES)
    page = in_locale(browser, language)
    found, check = axe_checker(page)
    opened(page, f"{live_server}/s/{survey_id}")
    check("questions")
    page.click("#review")
    check("missing answers")
    protection(page)
    check("details")
    for qid in ("smoked", "drank_and_drove", "sleep"):
        page.click(f"#q-{qid}-1")
    page.fill("#q-coffee-value", "3")
    randomize(page)
    check("confirm")
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    check("thanks")
    assert found == {state: [] for state in found}


# --- plain words in each language (tests/plain_words.py: each language's own formulas) ---

def answer_languages(page):
    for qid in ("smoked", "drank_and_drove", "sleep"):
        page.click(f"#q-{qid}-1")
    page.fill("#q-coffee-value", "3")


def questions(page, url, client, auth, survey_id):
    opened(page, url)


def missing_answers(page, url, client, auth, survey_id):
    opened(page, url).click("#review")


def review(page, url, client, auth, survey_id):
    answer_languages(opened(page, url))
    page.click("#review")
    page.wait_for_selector("#true-review:not([hidden])")


def confirm(page, url, client, auth, survey_id):
    answer_languages(opened(page, url))
    randomize(page)


def thanks(page, url, client, auth, survey_id):
    confirm(page, url, client, auth, survey_id)
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")


def already_sent(page, url, client, auth, survey_id):
    thanks(page, url, client, auth, survey_id)
    page.reload()
    page.wait_for_selector("#confirm:not([hidden])")


def unreachable(page, url, client, auth, survey_id):
    page.route(f"**/api/surveys/{survey_id}/responses", lambda route: route.abort())
    confirm(page, url, client, auth, survey_id)
    page.click("#send")
    page.wait_for_selector("#send-error:not(:empty)")


def closed_while_loading(page, url, client, auth, survey_id):
    def close_first(route):
        client.post(f"/api/surveys/{survey_id}/close", headers=auth)
        route.continue_()

    page.route(f"**/api/surveys/{survey_id}/status", close_first)
    page.goto(url)
    page.wait_for_selector("#refused:not([hidden])")


STATES = [questions, missing_answers, review, confirm, thanks, already_sent, unreachable,
          closed_while_loading]


@pytest.mark.parametrize("language", ["fr", "es", "en"])
def test_every_state_reads_plainly_in_each_language(page, live_server, client, auth, language):
    """issue 26's limits (words per question, no jargon before the details) and each
    language's own readability formulas, in every state of the form."""
    from plain_words import kept_for_details, problems, visible_text

    found = {}
    for state in STATES:
        survey_id = create(client, auth, LANGUAGES)
        state(page, f"{live_server}/s/{survey_id}?lang={language}", client, auth, survey_id)
        assert page.locator("html").get_attribute("lang") == language
        found[state.__name__] = problems(page, len(LANGUAGES["questions"]), language)
        if state is confirm:
            assert kept_for_details(visible_text(protection(page)), language), "the details"
        page.context.clear_cookies()
        page.evaluate("localStorage.clear()")
    assert found == {state.__name__: [] for state in STATES}


@pytest.mark.parametrize(("language", "plain", "hard_text", "jargon"), [
    ("fr", "Votre appareil lance une pièce. Personne ne voit vos vraies réponses.",
     "L'indiscernabilité probabiliste caractérise quantitativement l'hétérogénéité "
     "informationnelle multidimensionnelle conditionnellement aux connaissances adverses.",
     "Votre budget epsilon est ln 3."),
    ("es", "Su dispositivo lanza una moneda. Nadie ve sus respuestas reales.",
     "La indistinguibilidad probabilística caracteriza cuantitativamente la heterogeneidad "
     "informacional multidimensional condicionalmente a conocimientos adversariales.",
     "Su presupuesto epsilon es ln 3."),
])
def test_each_languages_measure_can_fail(language, plain, hard_text, jargon):
    from plain_words import hard, kept_for_details

    assert hard(plain, language) == [] and kept_for_details(plain, language) == []
    assert hard(hard_text, language)
    assert set(kept_for_details(jargon, language)) >= {"epsilon", "ln"}
