"""The JavaScript twins of the schemes (shared/web/oue.js, olh.js, schemes.js) in real headless
Chromium: frequencies with crypto.getRandomValues, and the form answering a survey of every
mechanism end to end (the shared vectors byte for byte: tests/conformance/test_every_form.py)."""

import json
import math

import pytest
from test_browser import (  # noqa: F401 (database_url: a fixture)
    create,
    database_url,
    protection,
    randomize,
    record,
    screenshot,
)

from ldpsurvey.shared import parse_manifest

from helpers import OPEN_AND_HIDDEN, release_due

COUNTRIES = ["Austria", "Belgium", "Chile", "Denmark", "Egypt", "France", "Ghana", "Hungary",
             "India", "Japan", "Kenya", "Latvia"]
MECHANISMS = {"title": "Mechanisms", "release_batch": 1, "questions": [
    {"id": "country", "text": "Which country?", "type": "choice", "options": COUNTRIES,
     "mechanism": "oue", "epsilon": 1.0},
    {"id": "product", "text": "Which product?", "type": "choice",
     "options": ["Apples", "Bread", "Cheese", "Dates", "Eggs"], "mechanism": "olh",
     "epsilon": 1.0}]}


def review_and_randomize(page) -> tuple[str, dict]:
    """Review the answers given, then randomize them: (the true answers as the review lists
    them, the payload the confirm step shows)."""
    page.click("#review")
    page.wait_for_selector("#true-review:not([hidden])")
    reviewed = page.locator("#true-list").inner_text()
    page.click("#randomize")
    page.wait_for_selector("#confirm:not([hidden])")
    return reviewed, json.loads(page.locator("#payload").text_content())


def test_in_browser_oue_bits_follow_p_and_q(page, live_server, client, auth):
    """20 000 randomizations with crypto.getRandomValues: each bit is set with probability p
    on the true option and q elsewhere, within 5 standard errors."""
    survey_id = create(client, auth, MECHANISMS)
    page.goto(f"{live_server}/s/{survey_id}")
    manifest = json.loads(client.get(f"/api/surveys/{survey_id}").data)
    question, draws = manifest["questions"][0], 20_000
    ones = page.evaluate("""async ([question, draws]) => {
        const s = await import('/web/schemes.js');
        const scheme = s.schemeOf(question);
        const ones = question.options.map(() => 0);
        for (let i = 0; i < draws; i++) scheme.randomize(3).forEach((b, j) => { ones[j] += b; });
        return ones; }""", [question, draws])
    for j, count in enumerate(ones):
        p = question["p"] if j == 3 else question["q"]
        assert abs(count / draws - p) < 5 * math.sqrt(p * (1 - p) / draws)


def test_the_form_answers_every_mechanism_and_sends_reports_of_their_shape(
        page, live_server, client, auth):
    survey_id = create(client, auth, MECHANISMS)
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    note = protection(page).locator("#q-country-note").inner_text()
    assert "one yes/no mark per option" in note
    assert "a random seed and a number from 0 to 3" in page.locator("#q-product-note").inner_text()
    page.locator('fieldset[data-question="country"] label', has_text="Egypt").click()
    page.locator('fieldset[data-question="product"] label', has_text="Cheese").click()
    randomize(page)
    payload = json.loads(page.locator("#payload").text_content())
    country, product = payload["answers"]["country"], payload["answers"]["product"]
    assert len(country) == 12 and set(country) <= {0, 1}
    assert 0 <= product[0] < 2**32 and 0 <= product[1] < 4
    assert "marked: " in page.locator("#sent-list").inner_text() or "nothing marked" in (
        page.locator("#sent-list").inner_text())
    assert "marks " in protection(page).locator("#sent-codes").inner_text()
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    release_due(client.application)
    survey = parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    body = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    assert [q["n"] for q in body["questions"]] == [1, 1]
    assert [q.scheme.name for q in survey.questions] == ["oue", "olh"]


SPORTS = {"title": "Sports", "release_batch": 1, "questions": [
    {"id": "sports", "text": "Which sports?", "type": "multi_select",
     "options": ["Running", "Swimming", "Cycling", "Rowing"], "mechanism": "bits",
     "max_selected": 2, "epsilon": 1.0},
    {"id": "drugs", "text": "Which of these?", "type": "multi_select",
     "options": ["Alcohol", "Tobacco", "Cannabis"], "mechanism": "padding", "max_selected": 1,
     "epsilon": 1.0}]}


def test_the_form_asks_check_all_that_apply_within_max_selected(page, live_server, client,
                                                                auth):
    survey_id = create(client, auth, SPORTS)
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    sports = page.locator('fieldset[data-question="sports"]')
    assert sports.get_attribute("role") == "group"
    assert "at most 2" in sports.locator(".hint").inner_text()
    for option in ("Running", "Swimming", "Cycling"):
        sports.locator("label", has_text=option).click()
    assert sports.locator("input:checked").count() == 3  # kept, and refused at the question
    assert "Please select at most 2" in sports.locator("p.error").inner_text()
    sports.locator("label", has_text="Cycling").click()
    page.locator('fieldset[data-question="drugs"] label', has_text="Tobacco").click()
    reviewed, payload = review_and_randomize(page)
    assert "Running; Swimming" in reviewed
    assert len(payload["answers"]["sports"]) == 4 and set(payload["answers"]["sports"]) <= {0, 1}
    assert payload["answers"]["drugs"] in range(4)
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    release_due(client.application)
    body = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    assert [q["n"] for q in body["questions"]] == [1, 1]


NUMBERS = {"title": "Numbers", "release_batch": 1, "questions": [
    {"id": "drinks", "text": "Drinks last week?", "type": "numeric", "min": 0, "max": 30,
     "unit": "drinks", "epsilon": 1.0}]}


def test_the_form_asks_a_number_and_sends_one_bit(page, live_server, client, auth):
    survey_id = create(client, auth, NUMBERS)
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    assert "rounded at random to 30 or 0" in protection(page).locator(
        "#q-drinks-note").inner_text()
    page.click("#review")
    assert page.locator('fieldset[data-question="drinks"]').get_attribute("aria-invalid") == (
        "true")  # no number yet
    page.fill("#q-drinks-value", "45")
    page.click("#review")  # never clamped: refused at the question
    assert page.locator("#q-drinks-error").inner_text() == (
        "Too high: enter a number from 0 to 30.")
    page.fill("#q-drinks-value", "30")
    reviewed, payload = review_and_randomize(page)
    assert "30 drinks" in reviewed
    assert payload["answers"]["drinks"] in (0, 1)
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    release_due(client.application)
    body = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    assert body["questions"][0]["n"] == 1
    results = client.get(f"/s/{survey_id}/results", headers=auth)
    assert results.status_code in (200, 302)


def test_the_form_words_each_note_as_the_python_client_does(page, live_server, client,
                                                            auth):
    from ldpsurvey.client.notes import question_note

    questions = [{**q, "epsilon": 0.8}  # 4 in all: within the page's default 4 ln 3
                 for q in (*MECHANISMS["questions"], *SPORTS["questions"], *NUMBERS["questions"])]
    survey_id = create(client, auth, {"title": "Every kind", "questions": questions})
    survey = parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    total = sum(q.scheme.realized_epsilon for q in survey.questions)
    protection(page)  # the notes are in "How your answers are protected", after the question
    for question in survey.questions:
        shown = page.locator(f"#q-{question.id}-note > span").inner_text()
        assert shown == question_note(question, question.scheme.realized_epsilon, total), (
            question.id)


CHEATING = {"title": "Honesty", "release_batch": 1, "questions": [
    {"id": "shoplifted", "text": "Have you ever shoplifted?", "type": "yes_no",
     "design": "cheating_detection", "epsilon": 1.0}]}


def test_the_form_answers_a_cheating_detection_question_with_group_and_answer(
        page, live_server, client, auth):
    """The page's scheme (web/cheating.js) randomizes with crypto.getRandomValues: the group
    is 1 or 2 half the time each and, given the group, Yes is reported at its rate for the
    true answer, within 5 standard errors; the form sends [group, answer] and shows both."""
    survey_id = create(client, auth, CHEATING)
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    question = json.loads(client.get(f"/api/surveys/{survey_id}").data)["questions"][0]
    draws = 20_000
    counts = page.evaluate("""async ([question, draws]) => {
        const s = await import('/web/schemes.js');
        const scheme = s.schemeOf(question);
        const counts = [0, 0, 0, 0];
        for (let i = 0; i < draws; i++) { const [g, y] = scheme.randomize(1); counts[2 * g + y]++; }
        return counts; }""", [question, draws])
    sizes = [counts[0] + counts[1], counts[2] + counts[3]]
    assert abs(sizes[0] / draws - 0.5) < 5 * math.sqrt(0.25 / draws)
    for g, group in enumerate(question["groups"]):
        lam = group["alpha"] + (1 - group["alpha"]) * group["beta"][1]
        assert abs(counts[2 * g + 1] / sizes[g] - lam) < 5 * math.sqrt(lam * (1 - lam) / sizes[g])
    assert "one of two groups at random" in protection(page).locator(
        "#q-shoplifted-note").inner_text()
    page.locator('fieldset[data-question="shoplifted"] label', has_text="Yes").click()
    randomize(page)
    payload = json.loads(page.locator("#payload").text_content())
    group, answer = payload["answers"]["shoplifted"]
    assert group in (0, 1) and answer in (0, 1)
    assert f"group {group + 1}: " in page.locator("#sent-list").inner_text()
PIECEWISE = {"title": "Wide numbers", "release_batch": 1, "questions": [
    {"id": "income", "text": "Income (thousands)?", "type": "numeric", "min": 0, "max": 200,
     "epsilon": 1.0, "mechanism": "piecewise"},
    {"id": "hours", "text": "Hours online?", "type": "numeric", "min": 0, "max": 24,
     "epsilon": 1.0, "mechanism": "auto"}]}


def test_js_quotient_is_floor_division_at_the_edges(page, live_server, client, auth):
    """piecewise.js's quotient(a, b) (Math.floor of the double quotient) is floor(a / b) for
    a < 2^53, at a = n b - 1, n b, n b + 1 (the cell rule's step edges) and near 2^53."""
    survey_id = create(client, auth, PIECEWISE)
    page.goto(f"{live_server}/s/{survey_id}")
    pairs = [(n * b + d, b) for b in (2**42 + 12345, 3 * 2**40 + 7, 2**52 - 1, 2**52, 1, 3)
             for n in (0, 1, 2, 7, 1023, 2**53 // b) for d in (-1, 0, 1)
             if 0 <= n * b + d < 2**53]
    pairs += [(2**53 - 1, b) for b in (2, 3, 2**26 + 1, 2**52 - 3, 2**53 - 1)]
    got = page.evaluate("""async (pairs) => { const p = await import('/web/piecewise.js');
        return pairs.map(([a, b]) => p.quotient(a, b)); }""", pairs)
    assert got == [a // b for a, b in pairs]


def test_in_browser_piecewise_reports_are_unbiased(page, live_server, client, auth):
    """20 000 randomizations with crypto.getRandomValues of one answer, per mechanism: the mean
    decoded value within 5 standard errors of the answer's share of the range."""
    survey_id = create(client, auth, PIECEWISE)
    page.goto(f"{live_server}/s/{survey_id}")
    survey = parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    for question, answer in ((survey.question("income"), 150.0), (survey.question("hours"), 3.0)):
        s, draws = question.scheme, 20_000
        reports = page.evaluate("""async ([question, answer, draws]) => {
            const s = (await import('/web/schemes.js')).schemeOf(question);
            return Array.from({length: draws}, () => s.randomize(answer)); }""",
                                [question.as_dict(), answer, draws])
        assert all(s.check_report(r) is None for r in reports)
        decoded = [float(s.decode(r)) for r in reports]
        mean = sum(decoded) / draws
        sd = math.sqrt(sum((d - mean) ** 2 for d in decoded) / (draws - 1))
        assert abs(mean - (answer - s.low) / (s.high - s.low)) < 5 * sd / math.sqrt(draws)


def test_the_form_answers_piecewise_and_hybrid_questions(page, live_server, client, auth):
    from ldpsurvey.client.notes import question_note

    survey_id = create(client, auth, PIECEWISE)
    survey = parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    assert [q.scheme.name for q in survey.questions] == ["piecewise", "hybrid"]
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    total = sum(q.scheme.realized_epsilon for q in survey.questions)
    protection(page)
    for question in survey.questions:
        shown = page.locator(f"#q-{question.id}-note > span").inner_text()
        assert shown == question_note(question, question.scheme.realized_epsilon, total)
    assert "one of the 621 near your number" in shown
    page.fill("#q-income-value", "250")
    page.fill("#q-hours-value", "2.5")
    page.click("#review")  # never clamped: refused at the question
    assert page.locator("#q-income-error").inner_text() == (
        "Too high: enter a number from 0 to 200.")
    page.fill("#q-income-value", "200")
    reviewed, payload = review_and_randomize(page)
    assert "200" in reviewed
    income, hours = (survey.question(q).scheme for q in ("income", "hours"))
    assert income.check_report(payload["answers"]["income"]) is None
    assert hours.check_report(payload["answers"]["hours"]) is None
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    release_due(client.application)
    body = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    assert [q["n"] for q in body["questions"]] == [1, 1]


OPEN = OPEN_AND_HIDDEN


def stored(page, survey_id):
    """This browser's record of the survey (localStorage's ledger)."""
    return page.evaluate("""(id) => { const store = JSON.parse(localStorage.getItem(
        'ldp-survey/ledger')); return Object.values(store.keys)[0].surveys[id]; }""", survey_id)


def test_an_open_question_is_marked_takes_whole_numbers_and_is_sent_as_given(
        page, live_server, client, auth):
    """The plain mark beside each open question only; the first words say which answers are
    sent as given and bound the randomized one alone; an open number takes a whole number from
    min to max, its error at the question (never clamped); the answer is sent unrandomized and
    the ledger charges the randomized question's epsilon only."""
    from ldpsurvey.client import OPEN_INTRO, bound_note
    from ldpsurvey.shared.mechanisms.disclosed import WORDS

    survey_id = create(client, auth, OPEN)
    manifest = json.loads(client.get(f"/api/surveys/{survey_id}").data)
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    for qid in ("age", "sex"):
        mark = page.locator(f'fieldset[data-question="{qid}"] p.open-answer')
        assert mark.is_visible() and mark.inner_text() == WORDS
    assert page.locator('fieldset[data-question="smoked"] p.open-answer').count() == 0
    assert page.locator("#intro").inner_text() == OPEN_INTRO
    assert page.locator("#bound").inner_text() == bound_note([manifest["questions"][2]["epsilon"]])
    assert page.locator('label[for="q-age-value"]').inner_text() == (
        "A whole number from 18 to 99 (years)")
    assert page.get_attribute("#q-age-value", "step") == "1"
    age = page.locator('fieldset[data-question="age"]')
    page.click("#q-sex-1")
    page.locator('fieldset[data-question="smoked"] label', has_text="Yes").click()
    for wrong, said in (("", "Please enter"), ("17", "Too low: enter"),
                        ("100", "Too high: enter"), ("42.5", "Please enter")):
        page.fill("#q-age-value", wrong)
        page.click("#review")
        assert page.locator("#true-review").is_hidden(), wrong
        assert age.get_attribute("aria-invalid") == "true", wrong
        assert page.locator("#q-age-error").inner_text() == (
            f"{said} a whole number from 18 to 99."), wrong
        assert page.locator("#review-error").inner_text() == "Please check one question.", wrong
    screenshot(page, "open-questions-errors")
    page.fill("#q-age-value", "42")
    assert age.get_attribute("aria-invalid") is None  # cleared as it is typed
    reviewed, payload = review_and_randomize(page)
    assert "42 years" in reviewed
    assert payload["answers"]["age"] == 42 and payload["answers"]["sex"] == 1
    assert payload["answers"]["smoked"] in (0, 1)
    sent = page.locator("#sent-list").inner_text()
    assert "How old are you? → 42 years (as given)" in sent
    assert "What is your sex? → Male (as given)" in sent
    requests = record(page)
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    assert page.locator("#thanks-text").inner_text() == (
        "Your answers were sent. Your real answers never left your device, except those you "
        "gave openly.")
    [post] = [r for r in requests if r.method == "POST"]
    assert json.loads(post.post_data_buffer.rstrip(b" ")) == payload
    assert stored(page, survey_id)["charged"] == pytest.approx(manifest["total_epsilon"])
    assert manifest["total_epsilon"] == pytest.approx(manifest["questions"][2]["epsilon"])
    release_due(client.application)
    export = client.get(f"/api/surveys/{survey_id}/export.jsonl", headers=auth).text
    [row] = [json.loads(line) for line in export.splitlines()[1:]]
    assert row["answers"]["age"] == 42 and row["answers"]["sex"] == 1


def test_a_survey_asked_only_openly_promises_no_coin(page, live_server, client, auth):
    """With no randomized question the first words bound nothing and say so."""
    from ldpsurvey.client import ALL_OPEN, OPEN_INTRO

    survey_id = create(client, auth, {**OPEN, "questions": OPEN["questions"][:2]})
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    assert page.locator("#intro").inner_text() == OPEN_INTRO
    assert page.locator("#bound").inner_text() == ALL_OPEN


@pytest.mark.parametrize("questions", [slice(0, 3), slice(2, 3)], ids=["open", "none-open"])
def test_released_in_groups_open_answers_are_not_said_to_be_hidden(page, live_server, client,
                                                                  auth, questions):
    """In groups of 50 the page says the mixing, and with open questions that it does not hide
    them: the same words as respond (client.release_summary)."""
    from ldpsurvey.client import release_summary

    survey = {**OPEN, "release_batch": 50, "questions": OPEN["questions"][questions]}
    page.goto(f"{live_server}/s/{create(client, auth, survey)}")
    page.wait_for_selector("#questions:not([hidden])")
    any_open = questions.start == 0
    if any_open:
        page.fill("#q-age-value", "42")
        page.click("#q-sex-1")
    page.locator('fieldset[data-question="smoked"] label', has_text="Yes").click()
    randomize(page)
    assert page.locator("#release-summary").inner_text() == release_summary(50, any_open)


def test_the_page_remembers_an_open_question_as_the_python_client_does(
        page, live_server, client, auth):
    """web/disclosed.js's parameters() are the values of the Python scheme's fields(), which the
    client's digest (client/verify.py parameters) takes: `disclosed`, and a number's min, max
    and unit; a changed unit or range is a changed survey in both."""
    survey_id = create(client, auth, OPEN)
    survey = parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    questions = json.loads(client.get(f"/api/surveys/{survey_id}").data)["questions"]
    no_unit = {**questions[0]}
    del no_unit["unit"]
    cases = [*questions[:2], no_unit, {**questions[0], "unit": "months"},
             {**questions[0], "max": 98}]
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    got = page.evaluate("""async (questions) => { const s = await import('/web/schemes.js');
        return questions.map(q => s.schemeOf(q).parameters()); }""", cases)
    expected = [list(survey.question(q).scheme.fields().values()) for q in ("age", "sex")]
    assert got[:2] == expected == [[True, 18, 99, "years"], [True]]
    assert got[2] == [True, 18, 99]
    assert len({json.dumps(p) for p in [got[0], *got[2:]]}) == 4  # each change is seen


def test_an_open_number_of_any_length_is_sent_in_one_body_size(browser, live_server, client,
                                                              auth):
    """The padding attack: answers 7 and 1000000 to an open number (its report is the number's
    digits) give request bodies of one length, padded after the same document."""
    survey_id = create(client, auth, {"title": "Income", "release_batch": 1, "questions": [
        {"id": "income", "text": "Your income?", "type": "numeric", "min": 0, "max": 1000000,
         "disclosed": True}]})
    bodies = []
    for value in (7, 1000000):
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{live_server}/s/{survey_id}")
        page.wait_for_selector("#questions:not([hidden])")
        page.fill("#q-income-value", str(value))
        randomize(page)
        requests = record(page)
        page.click("#send")
        page.wait_for_selector("#thanks:not([hidden])")
        [post] = [r for r in requests if r.method == "POST"]
        bodies.append(post.post_data_buffer)
        assert json.loads(post.post_data_buffer) == {"answers": {"income": value}}
        context.close()
    assert len(bodies[0]) == len(bodies[1]) == 256
