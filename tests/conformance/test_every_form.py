"""The respondent form on one survey of every question type (helpers.EVERY_TYPE), in Debian's
Chromium (issues 39 and 41): axe-core in every state, each type answered by keyboard alone,
24 px targets for number fields and check boxes, a number out of range and too many ticks
refused at the question (never clamped or dropped unseen), and the confirm step in plain words
with the exact reports in "How your answers are protected". The plain-word targets run on the
same survey in test_form_words.py. Per registry entry (tests/conformance/mechanisms.py): its
JavaScript scheme gives Python's epsilon and reports from the same draws (and its stored
vectors exist), and a survey of its example question alone is axe-clean, within the plain-word
limits and answered and sent by keyboard alone. One server and one Chromium for the module."""

import json
import math
from dataclasses import replace
from importlib import resources

import pytest
from plain_words import problems

from ldpsurvey.shared import parse_manifest

from form_page import (
    answer_every_type,
    axe_checker,
    create,
    group,
    protection,
    randomize,
    record,
    screenshot,
)
from helpers import EVERY_TYPE, EVERY_TYPE_ANSWERS, TECHNICAL
from mechanisms import each_entry

TARGET_PX = 24  # WCAG 2.2's 2.5.8 Target Size (Minimum)
VECTORS = json.loads((resources.files("ldpsurvey.shared") / "scheme_vectors.json").read_text())


@pytest.fixture(scope="module")
def database_url(tmp_path_factory):
    """Browser tests need one engine; test_every_surface.py covers both."""
    return f"sqlite:///{tmp_path_factory.mktemp('database') / 'browser.sqlite3'}"


def open_form(page, live_server, survey_id):
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")


@pytest.mark.parametrize("width", [360, 1280])
def test_axe_finds_nothing_in_any_state_of_every_type(browser, live_server, client, auth,
                                                      width):
    """Questions, errors shown (none answered; then a number out of range and a third tick
    of at most 2), the true answers' review, the confirm step, sent and already sent: no
    axe-core violation and no sideways scrolling, at a phone's width and a desktop's."""
    survey_id = create(client, auth, EVERY_TYPE)
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    found, check = axe_checker(page)

    open_form(page, live_server, survey_id)
    check("questions")
    protection(page)
    check("questions, details open")
    page.click("#review")
    check("every answer missing")
    answer_every_type(page, {**EVERY_TYPE_ANSWERS, "glasses": "500",
                             "sports": ["Running", "Cycling", "Rowing"]})
    page.click("#review")
    assert page.locator("#true-review").is_hidden()
    check("out of range and too many ticks")
    if width == 360:
        screenshot(page, "every-type-errors-360")
    page.fill("#q-glasses-value", "6")
    group(page, "sports").locator("label", has_text="Rowing").click()
    page.click("#review")
    page.wait_for_selector("#true-review:not([hidden])")
    check("true answers' review")
    page.click("#randomize")
    page.wait_for_selector("#confirm:not([hidden])")
    check("confirm")
    if width == 360:
        screenshot(page, "every-type-confirm-360")
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    check("sent")
    page.reload()
    page.wait_for_selector("#confirm:not([hidden])")
    check("already sent")
    protection(page)
    check("already sent, details open")
    assert found == {state: [] for state in found}
    context.close()


def test_a_number_question_is_a_group_whose_field_is_required(page, live_server, client, auth):
    """axe's aria-allowed-attr: a role="group" takes no aria-required, so the field carries
    it; each number mechanism and the open number alike."""
    open_form(page, live_server, create(client, auth, EVERY_TYPE))
    for qid in ("glasses", "steps", "screen", "age"):
        assert group(page, qid).get_attribute("role") == "group"
        assert group(page, qid).get_attribute("aria-required") is None
        assert page.get_attribute(f"#q-{qid}-value", "aria-required") == "true"


def test_number_fields_and_check_boxes_are_at_least_24_px(browser, live_server, client, auth):
    """Measured as laid out on a 360 px phone: every number field, check box and radio
    button's own box, and the label row around each option."""
    survey_id = create(client, auth, EVERY_TYPE)
    context = browser.new_context(viewport={"width": 360, "height": 800}, is_mobile=True,
                                  has_touch=True)
    page = context.new_page()
    open_form(page, live_server, survey_id)
    boxes = page.evaluate("""() => [...document.querySelectorAll(
        '#question-list input, #question-list label.option')].map((node) => {
        const box = node.getBoundingClientRect();
        return [node.id || node.textContent.trim(), node.type || 'label', box.width,
                box.height]; })""")
    kinds = {kind for _, kind, _, _ in boxes}
    assert kinds == {"number", "checkbox", "radio", "label"}
    small = [(name, kind, width, height) for name, kind, width, height in boxes
             if min(width, height) < TARGET_PX]
    assert small == []
    context.close()


def send_by_keyboard(page, check=lambda state: None) -> dict:
    """From the top of the open form, Tab reaches each question: Space ticks a box or picks the
    focused option, arrow keys move among options, digits fill a number (EVERY_TYPE_ANSWERS);
    Enter presses Review, Randomize and Send. `check(state)` runs on the true answers' review,
    the confirm step and the thanks; the answers the form sent."""
    requests = record(page)
    focused = "(() => { const e = document.activeElement; return [e.id, e.type || '', " \
              "e.closest('fieldset')?.dataset.question ?? '']; })()"
    done = set()
    for _ in range(200):
        page.keyboard.press("Tab")
        node, kind, qid = page.evaluate(focused)
        if node == "review":
            break
        if kind == "number":
            page.keyboard.type(EVERY_TYPE_ANSWERS[qid])
        elif kind == "checkbox" and qid not in done:
            page.keyboard.press("Space")  # the first option; Tab goes on to the next boxes
        elif kind == "radio":
            page.keyboard.press("ArrowDown")  # the second option, checked as focus moves
            assert page.evaluate("document.activeElement.checked"), qid
        done.add(qid)
    assert node == "review"
    page.keyboard.press("Enter")
    for button, step in (("randomize", "true-review"), ("send", "confirm")):
        page.wait_for_selector(f"#{step}:not([hidden])")
        check(step)
        for _ in range(60):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.id") == button:
                break
        page.keyboard.press("Enter")
    page.wait_for_selector("#thanks:not([hidden])")
    check("thanks")
    [post] = [r for r in requests if r.method == "POST"]
    return json.loads(post.post_data_buffer.rstrip(b" "))["answers"]


def test_every_type_is_answered_and_sent_by_keyboard_alone(page, live_server, client, auth):
    """send_by_keyboard: every question is answered and the survey is sent."""
    open_form(page, live_server, create(client, auth, EVERY_TYPE))
    sent = send_by_keyboard(page)
    assert set(sent) == {q["id"] for q in EVERY_TYPE["questions"]}
    assert sent["age"] == 40 and sent["region"] == 1 and sent["member"] == 1


@pytest.mark.parametrize("qid, typed, message", [
    ("glasses", "500", "Too high: enter a number from 0 to 20."),
    ("steps", "-3", "Too low: enter a number from 0 to 30."),
    ("screen", "24.5", "Too high: enter a number from 0 to 24."),
    ("age", "121", "Too high: enter a whole number from 18 to 120.")])
def test_a_number_out_of_range_is_an_error_at_its_question(browser, live_server, client, auth,
                                                          qid, typed, message):
    """Never clamped: Review stays, the question says what is wrong (aria-invalid and
    aria-describedby on the group and the field), focus moves to the field, in view on a
    390 px phone; typing a number in range clears it, and that number is the one reviewed."""
    survey_id = create(client, auth, EVERY_TYPE)
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                  has_touch=True)
    page = context.new_page()
    open_form(page, live_server, survey_id)
    answer_every_type(page, {**EVERY_TYPE_ANSWERS, qid: typed})
    page.click("#review")
    assert page.locator("#true-review").is_hidden()
    field = page.locator(f"#q-{qid}-value")
    for node in (group(page, qid), field):
        assert node.get_attribute("aria-invalid") == "true"
        assert node.get_attribute("aria-describedby") == f"q-{qid}-error"
    assert page.locator(f"#q-{qid}-error").inner_text() == message
    assert page.evaluate("document.activeElement.id") == f"q-{qid}-value"
    assert page.evaluate("""(id) => { const box = document.getElementById(id)
        .getBoundingClientRect(); return box.top >= 0 && box.bottom <= innerHeight; }""",
                         f"q-{qid}-error")
    assert page.locator("#review-error").inner_text() == "Please check one question."
    field.fill(EVERY_TYPE_ANSWERS[qid])
    assert group(page, qid).get_attribute("aria-invalid") is None
    assert field.get_attribute("aria-invalid") is None
    assert page.locator(f"#q-{qid}-error").inner_text() == ""
    page.click("#review")
    page.wait_for_selector("#true-review:not([hidden])")
    context.close()


@pytest.mark.parametrize("qid", ["sports", "drinks"])  # bits, padding
def test_a_tick_past_max_selected_is_an_error_at_its_question(page, live_server, client, auth,
                                                              qid):
    """The third tick of "at most 2" stays ticked and the question says so at once (read
    out: the message is a polite live region); Review refuses it, focus at the question;
    clearing one clears it, and the review lists the two kept."""
    open_form(page, live_server, create(client, auth, EVERY_TYPE))
    options = group(page, qid).locator("label.option")
    three = [options.nth(j).inner_text().strip() for j in range(3)]
    answer_every_type(page, {**EVERY_TYPE_ANSWERS, qid: three})
    error = page.locator(f"#q-{qid}-error")
    assert group(page, qid).locator("input:checked").count() == 3
    assert error.inner_text() == ("Please select at most 2: you selected 3. Clear one to go "
                                  "on.")
    assert error.get_attribute("aria-live") == "polite"
    assert group(page, qid).get_attribute("aria-invalid") == "true"
    assert group(page, qid).get_attribute("aria-describedby") == f"q-{qid}-error"
    page.click("#review")
    assert page.locator("#true-review").is_hidden()
    assert page.evaluate("document.activeElement.closest('fieldset').dataset.question") == qid
    group(page, qid).locator("label", has_text=three[2]).click()
    assert error.inner_text() == "" and group(page, qid).get_attribute("aria-invalid") is None
    page.click("#review")
    page.wait_for_selector("#true-review:not([hidden])")
    assert f"{three[0]}; {three[1]}" in page.locator("#true-list").inner_text()


def test_the_confirm_step_says_what_is_sent_in_plain_words(page, live_server, client, auth):
    """Each report in words (the options marked, a code, the high or low end...), and the
    exact report, as the server reads it, inside the collapsed section, one line a question;
    the same on the already-sent screen."""
    survey_id = create(client, auth, EVERY_TYPE)
    open_form(page, live_server, survey_id)
    answer_every_type(page)
    randomize(page)
    for state in ("confirm", "already sent"):
        plain = page.locator("#sent-list").inner_text()
        assert plain.count("→") == len(EVERY_TYPE["questions"]), state
        assert not [word for word in TECHNICAL if word in plain], plain
        assert "a code that fits several answers" in plain
        assert "How old are you? → 40 years (as given)" in plain
        assert not page.locator("#sent-codes").is_visible()
        codes = protection(page).locator("#sent-codes").inner_text()
        assert codes.count("→") == len(EVERY_TYPE["questions"])
        for word in ("marks ", "seed ", "hash value", "randomized cell", "randomized bit"):
            assert word in codes, (state, word)
        if state == "confirm":
            page.click("#send")
            page.wait_for_selector("#thanks:not([hidden])")
            page.reload()
            page.wait_for_selector("#confirm:not([hidden])")


def test_the_page_words_each_report_as_the_python_client_does(page, live_server, client,
                                                               auth):
    """Each scheme's report in plain words (web/*.js `plain`, else `shown`) and exactly
    (`shown`), against Python's plain_report and shown_report (what `respond` prints), over
    the longest report and twenty randomizations of each question's answer."""
    from ldpsurvey.shared.mechanisms.randomizer import secure_draw

    survey_id = create(client, auth, EVERY_TYPE)
    raw = json.loads(client.get(f"/api/surveys/{survey_id}").data)
    survey = parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    open_form(page, live_server, survey_id)
    cases = []
    for question, fields in zip(survey.questions, raw["questions"], strict=True):
        answer = EVERY_TYPE_ANSWERS[question.id]
        truth = question.scheme.parse_text(answer if isinstance(answer, str) else
                                           ";".join(answer))
        reports = [question.scheme.largest_report()] + [
            question.scheme.randomize(truth, secure_draw) for _ in range(20)]
        cases += [[fields, report, question.scheme.plain_report(report),
                   question.scheme.shown_report(report)] for report in reports]
    got = page.evaluate("""async (cases) => {
        const s = await import('/web/schemes.js');
        return cases.map(([question, report]) => { const scheme = s.schemeOf(question);
            return [(scheme.plain ?? scheme.shown)(report), scheme.shown(report)]; }); }""",
                        cases)
    assert got == [[plain, shown] for _, _, plain, shown in cases]


# --- the two docs bullets of issue 39 -------------------------------------------------------

def test_the_question_types_example_passes_survey_check_with_default_limits(tmp_path):
    """docs/question-types.md's example, as written: `survey check` finds nothing a
    respondent's default limits (ln 3 a question, 4 ln 3 in all) would refuse."""
    from helpers import checked_doc_example

    _, checked = checked_doc_example("question-types-example", tmp_path)
    assert checked["refusals"] == []
    assert {q["id"] for q in checked["questions"]} == {"country", "sports", "drinks"}


@pytest.mark.parametrize("questions, version", [
    ([{"id": "q", "text": "Q?", "type": "yes_no", "epsilon": 1.0}], 5),
    ([{"id": "q", "text": "Q?", "type": "choice", "options": list("abcdefghijklmnop"),
       "mechanism": "oue", "epsilon": 1.0}], 6),
    ([{"id": "q", "text": "Q?", "type": "yes_no", "design": "cheating_detection",
       "epsilon": 1.0}], 7),
    ([{"id": "q", "text": "Q?", "type": "numeric", "min": 0, "max": 9, "mechanism": "hybrid",
       "epsilon": 1.0}], 7),
    ([{"id": "q", "text": "Q?", "type": "yes_no", "disclosed": True}], 7),
    ([{"id": "q", "text": "Q?", "type": "numeric", "min": 0, "max": 9, "mechanism": "auto",
       "distribution": True, "epsilon": 1.0}], 8)])
def test_survey_file_md_names_the_format_each_survey_is_published_as(client, auth, questions,
                                                                     version):
    """What docs/survey-file.md says each survey is published as, and that it says it."""
    from helpers import doc_text

    survey_id = create(client, auth, {"title": "T", "questions": questions})
    raw = client.get(f"/api/surveys/{survey_id}").data
    manifest = json.loads(raw)
    assert manifest["format"] == "ldp-survey-manifest/8" and "form" in manifest
    assert replace(parse_manifest(raw), form=None).manifest()["format"] == (
        f"ldp-survey-manifest/{version}")
    assert "origin" in manifest
    text = " ".join(doc_text("survey-file").split())
    assert "Every survey published since format `ldp-survey-manifest/8` is /8" in text
    said = {5: "else `/5`, with the `origin`", 6: "else `/6` when a question uses another "
            "mechanism than forced response", 7: "else `/7` when a question has a `design`, "
            "a number mechanism `piecewise` or `hybrid`, or is answered openly",
            8: "`ldp-survey-manifest/8` when a number question asks for its distribution "
            "(mechanism `square_wave`, with its `bins`)"}
    assert said[version] in text


# --- per registry entry ------------------------------------------------------------------


@pytest.fixture(scope="module")
def every_type_form(browser, live_server, app, auth):
    """A page of the form of EVERY_TYPE, open for the module, and the survey's manifest."""
    client = app.test_client()
    survey_id = create(client, auth, EVERY_TYPE)
    context = browser.new_context()
    page = context.new_page()
    open_form(page, live_server, survey_id)
    yield page, parse_manifest(client.get(f"/api/surveys/{survey_id}").data)
    context.close()


def test_js_schemes_match_the_scheme_vectors(every_type_form):
    """shared/scheme_vectors.json (tests/scheme_vectors.py) in the page's schemes: each case's
    epsilon and outputs; and olh.js's hash is Python's."""
    page, _ = every_type_form
    results = page.evaluate("""async (cases) => {
        const s = await import('/web/schemes.js');
        return cases.map(c => { const scheme = s.schemeOf(c.question);
            return {eps: scheme.epsilon, outputs: c.draws.map(d => { const u = [...d.u];
                return scheme.randomize(d.true, () => u.shift()); })}; });
    }""", VECTORS["cases"])
    for case, got in zip(VECTORS["cases"], results, strict=True):
        assert math.isclose(got["eps"], case["epsilon"], rel_tol=1e-12), case["name"]
        assert got["outputs"] == [d["output"] for d in case["draws"]], case["name"]
    hashes = page.evaluate("""async () => { const o = await import('/web/olh.js');
        return [0, 1, 2 ** 31, 2 ** 32 - 1].map(seed => [...Array(70).keys()].map(
            v => o.hashed(v, seed, 1000003))); }""")
    from ldpsurvey.shared.mechanisms.olh import hashed

    assert hashes == [[hashed(v, seed, 1000003) for v in range(70)]
                      for seed in (0, 1, 2**31, 2**32 - 1)]


@each_entry
def test_python_and_javascript_agree_on_its_vectors(every_type_form, question):
    """Its stored vectors exist if it randomizes (shared/scheme_vectors.json, checked in
    test_js_schemes_match_the_scheme_vectors; forced response's in shared/testvectors.json,
    test_browser.py), and on the published question the page's scheme (web/schemes.js) states
    Python's epsilon and gives Python's reports from the same 53-bit draws, for 20 sequences of
    draws of its EVERY_TYPE_ANSWERS answer and of a random one."""
    import random

    from scheme_vectors import scheme_of

    from ldpsurvey.shared.mechanisms.randomizer import N

    page, survey = every_type_form
    scheme = survey.question(question["id"]).scheme
    if scheme.epsilon > 0:
        stored = {scheme_of(case["question"]).name for case in VECTORS["cases"]}
        assert scheme.name in stored | {"forced_response"}, scheme.name
    answer = EVERY_TYPE_ANSWERS[question["id"]]
    truth = scheme.parse_text(answer if isinstance(answer, str) else ";".join(answer))
    rng = random.Random(question["id"])
    draws = [[rng.randrange(N) for _ in range(8)] for _ in range(20)]
    cases = [{"true": truth, "u": u} for u in draws]
    got = page.evaluate("""async ([question, cases]) => {
        const scheme = (await import('/web/schemes.js')).schemeOf(question);
        return [scheme.epsilon ?? 0, cases.map(c => { const u = [...c.u];
            return scheme.randomize(c.true, () => u.shift()); })]; }""",
                        [survey.question(question["id"]).as_dict(), cases])
    assert math.isclose(got[0], scheme.epsilon, rel_tol=1e-12), got[0]
    assert got[1] == [scheme.randomize(truth, iter(u).__next__) for u in draws]


@each_entry
def test_its_form_is_axe_clean_plain_and_answered_by_keyboard(browser, live_server, client,
                                                             auth, question):
    """A survey of its example question alone, at a phone's width: no axe-core violation and
    nothing past the plain-word limits (tests/plain_words.py) on the questions, the true
    answers' review and the confirm step, none on the thanks, and the question answered and
    sent by keyboard alone."""
    survey_id = create(client, auth, {"title": "One question", "release_batch": 1,
                                      "questions": [question]})
    context = browser.new_context(viewport={"width": 360, "height": 900})
    page = context.new_page()
    found, check = axe_checker(page)
    said = {}

    def both(state):
        check(state)
        said[state] = problems(page, 1)

    open_form(page, live_server, survey_id)
    both("questions")
    sent = send_by_keyboard(page, both)
    assert list(sent) == [question["id"]]
    assert found == {state: [] for state in found}
    assert said == {state: [] for state in said}
    context.close()
