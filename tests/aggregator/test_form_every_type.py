"""The respondent form on one survey of every question type (helpers.EVERY_TYPE), in Debian's
Chromium (issue 39): axe-core in every state, each type answered by keyboard alone, 24 px
targets for number fields and check boxes, a number out of range and too many ticks refused at
the question (never clamped or dropped unseen), and the confirm step in plain words with the
exact reports in "How your answers are protected". The plain-word targets run on the same
survey in test_form_words.py."""

import json

import pytest
from test_browser import (  # noqa: F401 (database_url: the browser tests' SQLite fixture)
    axe_checker,
    create,
    database_url,
    protection,
    randomize,
    record,
    screenshot,
)

from ldpsurvey.shared import parse_manifest
from ldpsurvey.shared.mechanisms import multi_select, numeric, registry

from helpers import EVERY_TYPE, EVERY_TYPE_ANSWERS, TECHNICAL

TARGET_PX = 24  # WCAG 2.2's 2.5.8 Target Size (Minimum)


def open_form(page, live_server, survey_id):
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")


def group(page, qid):
    return page.locator(f'fieldset[data-question="{qid}"]')


def answer_every_type(page, answers=EVERY_TYPE_ANSWERS):
    """Answer each question by pointer: a number typed, options ticked, one option picked."""
    for qid, answer in answers.items():
        if page.locator(f"#q-{qid}-value").count():
            page.fill(f"#q-{qid}-value", answer)
            continue
        for option in [answer] if isinstance(answer, str) else answer:
            group(page, qid).locator("label", has_text=option).click()


def test_the_fixture_holds_every_question_type_the_registries_know(client, auth):
    """Every choice mechanism, every type's mechanisms, every design, and an open question of
    each type that takes one: a mechanism added to a registry and not to EVERY_TYPE fails."""
    survey = parse_manifest(client.get(f"/api/surveys/{create(client, auth, EVERY_TYPE)}").data)
    held = {(q.type, q.scheme.name) for q in survey.questions}
    wanted = registry.offered()
    assert held == wanted
    assert any(q.concept for q in survey.questions)
    limited = {q.scheme.name for q in survey.questions if q.type == multi_select.TYPE}
    assert limited == {"bits", "padding"} and all(
        q.scheme.max_selected == 2 for q in survey.questions if q.type == multi_select.TYPE)
    assert {q.scheme.name for q in survey.questions if q.type == numeric.TYPE} >= {
        "duchi", "piecewise", "hybrid"}


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


def test_every_type_is_answered_and_sent_by_keyboard_alone(page, live_server, client, auth):
    """From the top of the page, Tab reaches each question: Space ticks a box or picks the
    focused option, arrow keys move among options, digits fill a number; Enter presses
    Review, Randomize and Send. Every question is answered and the survey is sent."""
    survey_id = create(client, auth, EVERY_TYPE)
    requests = record(page)
    open_form(page, live_server, survey_id)
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
        for _ in range(60):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.id") == button:
                break
        page.keyboard.press("Enter")
    page.wait_for_selector("#thanks:not([hidden])")
    [post] = [r for r in requests if r.method == "POST"]
    sent = json.loads(post.post_data_buffer.rstrip(b" "))["answers"]
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
    from click.testing import CliRunner

    from ldpsurvey.cli import main

    from helpers import doc_blocks

    (block,) = doc_blocks("question-types-example")
    path = tmp_path / "example.toml"
    path.write_text(block)
    result = CliRunner().invoke(main, ["survey", "check", str(path), "--json"])
    assert result.exit_code == 0, result.output
    checked = json.loads(result.stdout)
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
    ([{"id": "q", "text": "Q?", "type": "yes_no", "disclosed": True}], 7)])
def test_survey_file_md_names_the_format_each_survey_is_published_as(client, auth, questions,
                                                                     version):
    """What docs/survey-file.md says each survey is published as, and that it says it."""
    from helpers import doc_text

    survey_id = create(client, auth, {"title": "T", "questions": questions})
    manifest = json.loads(client.get(f"/api/surveys/{survey_id}").data)
    assert manifest["format"] == f"ldp-survey-manifest/{version}"
    assert "origin" in manifest
    text = " ".join(doc_text("survey-file").split())
    said = {5: "else `/5`, with the `origin`", 6: "else `/6` when a question uses another "
            "mechanism than forced response", 7: "`ldp-survey-manifest/7` when a question has "
            "a `design`, a number mechanism `piecewise` or `hybrid`, or is answered openly"}
    assert said[version] in text
