"""Plain language first (issue 26): in every state of the respondent form, what a person reads
without opening "How your answers are protected" stays within about 25 words per question plus
60, at Flesch-Kincaid grade 8 or below (textstat 0.7.3), and never says epsilon, ln, budget,
ceiling or client; the section holds those details, one tap away. Measured the way
tests/plain_words.py says, in Debian's Chromium."""

import math

import pytest
from plain_words import (
    KEPT_FOR_DETAILS,
    MAX_GRADE,
    grade,
    kept_for_details,
    problems,
    visible_text,
    words,
)
from test_browser import (  # noqa: F401 (database_url: the browser tests' SQLite fixture)
    HEALTH,
    THREE_AT_LN_3,
    answer_all,
    create,
    database_url,
    protection,
    randomize,
)

from form_page import answer_every_type
from helpers import EVERY_TYPE, EVERY_TYPE_ANSWERS, OPEN_AND_HIDDEN

QUESTIONS = len(HEALTH["questions"])


def open_form(page, live_server, survey_id, step="questions", hash_=""):
    page.goto(f"{live_server}/s/{survey_id}{hash_}")
    page.wait_for_selector(f"#{step}:not([hidden])")


def questions(page, live_server, client, auth):
    open_form(page, live_server, create(client, auth, HEALTH))


def missing_answers(page, live_server, client, auth):
    open_form(page, live_server, create(client, auth, HEALTH))
    page.click("#review")


def review(page, live_server, client, auth):
    open_form(page, live_server, create(client, auth, HEALTH))
    answer_all(page)
    page.click("#review")
    page.wait_for_selector("#true-review:not([hidden])")


def randomized(page, live_server, survey_id, hash_=""):
    """Every question answered and randomized: the confirm step."""
    open_form(page, live_server, survey_id, hash_=hash_)
    answer_all(page)
    randomize(page)


def confirm(page, live_server, client, auth):
    randomized(page, live_server, create(client, auth, {**HEALTH, "release_batch": 250}))


def then(page, action, selector):
    """Do `action` ("send" or "reload") and wait for `selector`."""
    page.click("#send") if action == "send" else page.reload()
    page.wait_for_selector(selector)


def thanks(page, live_server, client, auth):
    confirm(page, live_server, client, auth)
    then(page, "send", "#thanks:not([hidden])")


def already_sent(page, live_server, client, auth):
    thanks(page, live_server, client, auth)
    then(page, "reload", "#confirm:not([hidden])")


def unreachable(page, live_server, client, auth):
    """Send fails (no connection); then a reload offers the same answers again."""
    survey_id = create(client, auth, HEALTH)
    page.route(f"**/api/surveys/{survey_id}/responses", lambda route: route.abort())
    randomized(page, live_server, survey_id)
    then(page, "send", "#send-error:not(:empty)")


def sent_again_after_failure(page, live_server, client, auth):
    unreachable(page, live_server, client, auth)
    then(page, "reload", "#again:not([hidden])")


def kept_but_not_sent(page, live_server, client, auth):
    survey_id = create(client, auth, HEALTH)
    randomized(page, live_server, survey_id)
    then(page, "reload", "#again:not([hidden])")


def invitation_refused(page, live_server, client, auth):
    survey_id = create(client, auth, {**HEALTH, "invitation_only": True})
    randomized(page, live_server, survey_id, "#t=not-a-real-token")
    then(page, "send", "#send-error:not(:empty)")


def refused(page, live_server, survey_id, hash_=""):
    open_form(page, live_server, survey_id, "refused", hash_)


def too_much_at_once(page, live_server, client, auth):
    refused(page, live_server, create(client, auth, {"title": "Too revealing", "questions": [
        {"id": "q", "text": "Tell us everything?", "type": "yes_no", "alpha": 0.9}]}))


def too_much_together(page, live_server, client, auth):
    five = {**THREE_AT_LN_3, "title": "Five questions", "questions": [
        {"id": f"q{i}", "text": f"Question {i}?", "type": "yes_no", "epsilon": math.log(3)}
        for i in range(5)]}
    refused(page, live_server, create(client, auth, five))


def too_much_in_all(page, live_server, client, auth):
    """This browser's ledger already holds 7 ln 3 for this site."""
    survey_id = create(client, auth, {**THREE_AT_LN_3, "title": "Three questions"})
    page.goto(f"{live_server}/")
    page.evaluate("""(spent) => localStorage.setItem('ldp-survey/ledger', JSON.stringify({
        version: 3, concepts: {}, keys: {other: {surveys: {earlier: {answers: {q: 1},
        idempotencyKey: 'k', submitted: true, title: 'Earlier', charged: spent,
        estimated: false}}}}}))""", 7 * math.log(3))
    refused(page, live_server, survey_id)


def invitation_only_without_link(page, live_server, client, auth):
    refused(page, live_server, create(client, auth, {**HEALTH, "invitation_only": True}))


def closed_while_loading(page, live_server, client, auth):
    survey_id = create(client, auth, HEALTH)

    def close_first(route):
        client.post(f"/api/surveys/{survey_id}/close", headers=auth)
        route.continue_()

    page.route(f"**/api/surveys/{survey_id}/status", close_first)
    refused(page, live_server, survey_id)


def not_loaded(page, live_server, client, auth):
    survey_id = create(client, auth, HEALTH)
    page.route(f"**/api/surveys/{survey_id}", lambda route: route.fulfill(status=503))
    refused(page, live_server, survey_id)


def other_address(page, live_server, client, auth):
    survey_id = create(client, auth, HEALTH)
    port = live_server.rsplit(":", 1)[1]
    refused(page, f"http://localhost:{port}", survey_id)


def changed_since_answered(page, live_server, client, auth):
    survey_id = create(client, auth, HEALTH)
    randomized(page, live_server, survey_id)
    page.evaluate("""(id) => {
        const store = JSON.parse(localStorage.getItem('ldp-survey/ledger'));
        for (const entry of Object.values(store.keys)) entry.surveys[id].parameters = '[]';
        localStorage.setItem('ldp-survey/ledger', JSON.stringify(store));
    }""", survey_id)
    refused(page, live_server, survey_id)


def new_question_types(page, live_server, client, auth):
    """A number and a check-all-that-apply question, with their own hints; 2 questions."""
    open_form(page, live_server, create(client, auth, {"title": "Habits", "questions": [
        {"id": "drinks", "text": "How many drinks did you have last week?", "type": "numeric",
         "min": 0, "max": 30, "unit": "drinks", "epsilon": 1.0},
        {"id": "sports", "text": "Which of these did you do last week?", "type": "multi_select",
         "options": ["Run", "Swim", "Bike"], "max_selected": 2, "epsilon": 1.0}]}))
    page.click("#review")  # neither answered: the number's error at its question
    return 2


def every_type(page, live_server, client, auth):
    """One survey of every question type (helpers.EVERY_TYPE): its questions."""
    open_form(page, live_server, create(client, auth, EVERY_TYPE))
    return len(EVERY_TYPE["questions"])


def every_type_errors(page, live_server, client, auth):
    """Every type, reviewed with a number out of range and a tick past max_selected."""
    every_type(page, live_server, client, auth)
    answer_every_type(page, {**EVERY_TYPE_ANSWERS, "glasses": "500",
                             "drinks": ["Beer", "Wine", "Cider"]})
    page.click("#review")
    return len(EVERY_TYPE["questions"])


def every_type_confirm(page, live_server, client, auth):
    """Every type answered and randomized: each report in plain words."""
    every_type(page, live_server, client, auth)
    answer_every_type(page)
    randomize(page)
    return len(EVERY_TYPE["questions"])


def every_type_sent(page, live_server, client, auth):
    every_type_confirm(page, live_server, client, auth)
    then(page, "send", "#thanks:not([hidden])")
    return len(EVERY_TYPE["questions"])


def every_type_already_sent(page, live_server, client, auth):
    every_type_sent(page, live_server, client, auth)
    then(page, "reload", "#confirm:not([hidden])")
    return len(EVERY_TYPE["questions"])


OPEN = OPEN_AND_HIDDEN


def open_questions(page, live_server, client, auth):
    """Two questions answered openly (each marked) beside a randomized one, reviewed with none
    answered and an age out of range: the errors at the questions; 3 questions."""
    open_form(page, live_server, create(client, auth, OPEN))
    page.fill("#q-age-value", "17")
    page.click("#review")
    return 3


def open_sent(page, live_server, client, auth):
    """The same survey answered and sent: the thanks names the open answers."""
    open_form(page, live_server, create(client, auth, OPEN))
    page.fill("#q-age-value", "40")
    page.click("#q-sex-0")
    page.click("#q-smoked-0")
    randomize(page)
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    return 3


STATES = [every_type, every_type_errors, every_type_confirm, every_type_sent,
          every_type_already_sent,
          open_questions, open_sent, new_question_types, questions, missing_answers, review,
          confirm, thanks, already_sent, unreachable,
          sent_again_after_failure, kept_but_not_sent, invitation_refused, too_much_at_once,
          too_much_together, too_much_in_all, invitation_only_without_link,
          closed_while_loading, not_loaded, other_address, changed_since_answered]


@pytest.mark.parametrize("state", STATES, ids=lambda state: state.__name__)
def test_every_form_state_reads_plainly_with_the_details_one_tap_away(page, live_server, client,
                                                                      auth, state):
    asked = state(page, live_server, client, auth) or QUESTIONS
    closed = visible_text(page)
    assert problems(page, asked) == [], closed
    summary = page.locator("#protection > summary")
    assert summary.is_visible() and summary.inner_text() == "How your answers are protected"
    protection(page)
    opened = visible_text(page)
    assert words(opened) > words(closed)
    assert kept_for_details(opened), "the section holds the details"


def test_the_section_holds_the_math_the_lead_leaves_out(page, live_server, client, auth):
    """Opened, the section names epsilon, the limits and each question's exact chances; the
    first words give the concrete bound computed from the survey's own numbers."""
    from ldpsurvey.client import INTRO, bound_note

    questions(page, live_server, client, auth)
    manifest = client.get(page.url.replace("/s/", "/api/surveys/")).json
    assert page.locator("#intro").inner_text() == INTRO
    assert page.locator("#bound").inner_text() == bound_note(
        [q["epsilon"] for q in manifest["questions"]])
    assert "75 %" in page.locator("#bound").inner_text()  # smoked: ln 3 reveals most
    before = visible_text(page)
    section = protection(page).inner_text()
    assert "epsilon" in section and "8 ln 3" in section
    assert "If you answer Yes, the server receives Yes with 75 % probability" in section
    assert not kept_for_details(before) and set(kept_for_details(visible_text(page))) >= {
        "epsilon", "ln", "budget", "client"}


def test_after_sending_no_stale_privacy_line_stays(page, live_server, client, auth):
    """The ledger line counted what this browser had sent before this survey; after the send
    it counts this one too (it used to keep the old total on screen)."""
    confirm(page, live_server, client, auth)
    before = protection(page).locator("#ledger-note").inner_text()
    assert "in all" in before and "adds" in before
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    after = page.locator("#ledger-note").inner_text()
    total = client.get(page.url.replace("/s/", "/api/surveys/")).json["total_epsilon"]
    assert f"epsilon {total:.3f} in all" in after and "adds 0.000" in after
    assert after != before


def test_the_measure_itself_catches_jargon_long_text_and_hard_words(page, live_server):
    """The checks can fail: a page with the details' words, too many words, or long words in
    long sentences breaks each target."""
    page.goto(f"{live_server}/")
    page.set_content("<main><p>Your epsilon budget is ln 3.</p></main>")
    assert kept_for_details(visible_text(page)) == ["epsilon", "ln", "budget"]
    page.set_content(f"<main><p>{'word ' * 200}</p></main>")
    assert any("words for 4 questions" in p for p in problems(page, 4))
    page.set_content("<main><p>" + "Notwithstanding institutional considerations, "
                     "differential privacy guarantees quantifiable indistinguishability "
                     "characteristics irrespective of adversarial auxiliary information "
                     "availability." * 2 + "</p></main>")
    assert grade(visible_text(page)) > MAX_GRADE
    page.set_content("<main><details><summary>More</summary><p>epsilon</p></details></main>")
    assert kept_for_details(visible_text(page)) == []  # a closed section is not read first
    assert set(KEPT_FOR_DETAILS) >= {"epsilon", "ε", "ln", "budget", "ceiling", "client"}
