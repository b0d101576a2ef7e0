"""The respondent form and the results page in real headless Chromium (Debian's), driven by
Playwright. Screenshots go to test-artifacts/."""

import csv
import io
import json
import math
from importlib import resources
from pathlib import Path
from urllib.parse import urlparse

import pytest

from ldpsurvey.shared import Mechanism, read_definition
from ldpsurvey.shared.stats.design import compose

from form_page import (
    NO_SIDEWAYS_SCROLL,
    axe_checker,
    axe_violations,
    create,
    protection,
    randomize,
    record,
    screenshot,
)
from helpers import every_type_answered, release_due, released_n

# Released at once, so a test reads the count right after answering.
HEALTH = {**read_definition(resources.files("ldpsurvey.shared") / "examples" / "health.toml"),
          "release_batch": 1}
VECTORS = json.loads((resources.files("ldpsurvey.shared") / "testvectors.json").read_text())
TRUE_ANSWERS = {"smoked": "Yes", "drank_and_drove": "No", "cannabis": "No", "sleep": "6 to 8"}


@pytest.fixture
def database_url(tmp_path):
    """Browser tests need one engine; the storage suite covers both."""
    return f"sqlite:///{tmp_path / 'browser.sqlite3'}"


def answer_all(page, answers=TRUE_ANSWERS):
    for qid, option in answers.items():
        page.locator(f'fieldset[data-question="{qid}"] label', has_text=option).click()


def count(client, auth, survey_id):
    return released_n(client, auth, survey_id)


def test_form_sends_only_the_randomized_payload(page, live_server, client, auth):
    survey_id = create(client, auth, HEALTH)
    requests = record(page)
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    assert page.evaluate("document.querySelectorAll('form').length") == 0
    assert page.evaluate("[...document.querySelectorAll('input')].every(i => !i.name)")
    assert page.locator("noscript").count() == 1
    assert not page.locator("#q-smoked-note").is_visible()  # collapsed until asked for
    protection(page)
    note = page.locator("#q-smoked-note").inner_text()
    assert "If you answer Yes, the server receives Yes with 75 % probability" in note
    answer_all(page)
    screenshot(page, "form")
    randomize(page)
    page.locator("#body-details summary").click()
    screenshot(page, "privacy-note")
    payload = json.loads(page.locator("#payload").inner_text())
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    screenshot(page, "thanks")

    origin = urlparse(live_server).netloc
    assert all(urlparse(r.url).netloc == origin for r in requests), [r.url for r in requests]
    posts = [r for r in requests if r.method != "GET"]
    assert len(posts) == 1
    post = posts[0]
    assert urlparse(post.url).path == f"/api/surveys/{survey_id}/responses"
    assert not urlparse(post.url).query
    body = json.loads(post.post_data)
    assert body == payload and set(body) == {"answers"}
    assert set(body["answers"]) == set(TRUE_ANSWERS)
    assert all(isinstance(v, int) for v in body["answers"].values())
    assert post.headers["idempotency-key"] and "cookie" not in post.headers
    for r in requests:
        assert r.method == "GET" or r is post
        assert not urlparse(r.url).query
    assert count(client, auth, survey_id) == 1


def test_reload_after_sending_shows_already_sent_without_send(page, live_server, client, auth):
    """After a received submission a reload shows the same randomized answers as sent, with no
    Send button: exactly one POST."""
    survey_id = create(client, auth, HEALTH)
    requests = record(page)
    page.goto(f"{live_server}/s/{survey_id}")
    answer_all(page)
    randomize(page)
    sent = page.locator("#sent-list").inner_text()
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    page.reload()
    page.wait_for_selector("#confirm:not([hidden])")
    assert "You already sent this survey from this browser" in page.locator("#again").inner_text()
    assert page.locator("#confirm-title").inner_text() == "These randomized answers were sent"
    assert page.locator("#sent-list").inner_text() == sent
    assert page.locator("#send").is_hidden()
    assert page.title().startswith("Already sent")
    screenshot(page, "already-sent")
    assert len([r for r in requests if r.method == "POST"]) == 1
    assert count(client, auth, survey_id) == 1


def test_an_unacknowledged_send_is_resent_with_the_same_body_and_key(page, live_server, client,
                                                                     auth):
    """The first POST never gets an answer (the connection fails): a reload offers Send with
    the same randomized answers and key, counted once."""
    survey_id = create(client, auth, HEALTH)
    requests = record(page)
    page.route(f"**/api/surveys/{survey_id}/responses", lambda route: route.abort())
    page.goto(f"{live_server}/s/{survey_id}")
    answer_all(page)
    randomize(page)
    page.click("#send")
    page.wait_for_selector("#send-error:not(:empty)")
    page.unroute(f"**/api/surveys/{survey_id}/responses")
    page.reload()
    page.wait_for_selector("#confirm:not([hidden])")
    assert "may not have arrived" in page.locator("#again").inner_text()
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    posts = [r for r in requests if r.method == "POST"]
    assert len(posts) == 2
    assert posts[0].post_data == posts[1].post_data
    assert posts[0].headers["idempotency-key"] == posts[1].headers["idempotency-key"]
    assert count(client, auth, survey_id) == 1


def test_a_survey_above_the_ceiling_is_refused_in_the_page(page, live_server, client, auth):
    greedy = {"title": "Too revealing", "questions": [
        {"id": "q", "text": "Tell us everything?", "type": "yes_no", "alpha": 0.9}]}
    survey_id = create(client, auth, greedy)
    requests = record(page)
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#refused:not([hidden])")
    assert "could reveal too much about you" in page.locator("#refused-text").inner_text()
    assert "above this page's limit of 1.099 per question" in protection(page).locator(
        "#refused-detail").inner_text()
    screenshot(page, "refused")
    assert page.locator("#questions").is_hidden()
    assert not [r for r in requests if r.method != "GET" or "/responses" in r.url]


def test_js_randomizer_matches_the_shared_test_vectors(page, live_server, client, auth):
    survey_id = create(client, auth, HEALTH)
    page.goto(f"{live_server}/s/{survey_id}")
    results = page.evaluate("""async (cases) => {
        const r = await import('/web/randomizer.js');
        return cases.map(c => {
            const t = r.thresholds(c.alpha, c.beta);
            return {keep: t.keep, cumulative: t.cumulative, eps: r.realizedEpsilon(t),
                    outputs: c.draws.map(d => { const u = [...d.u];
                                                 return r.randomize(d.true, t, () => u.shift()); })};
        });
    }""", VECTORS["cases"])
    for case, got in zip(VECTORS["cases"], results, strict=True):
        assert got["keep"] == case["keep_threshold"]
        assert got["cumulative"] == case["cumulative_thresholds"]
        assert math.isclose(got["eps"], case["realized_epsilon"], rel_tol=1e-12)
        assert got["outputs"] == [d["output"] for d in case["draws"]]
    constants = page.evaluate("""async () => { const r = await import('/web/randomizer.js');
        return [r.DEFAULT_MAX_EPSILON, r.DEFAULT_MAX_TOTAL_EPSILON,
                r.DEFAULT_MAX_LIFETIME_EPSILON, r.EPSILON_TOLERANCE, r.DEFAULT_IRR_ALPHA]; }""")
    from ldpsurvey.client.ceilings import (
        DEFAULT_MAX_EPSILON,
        DEFAULT_MAX_LIFETIME_EPSILON,
        DEFAULT_MAX_TOTAL_EPSILON,
    )
    from ldpsurvey.shared import EPSILON_TOLERANCE
    from ldpsurvey.shared.survey.manifest import DEFAULT_IRR_ALPHA

    assert constants == [DEFAULT_MAX_EPSILON, DEFAULT_MAX_TOTAL_EPSILON,
                         DEFAULT_MAX_LIFETIME_EPSILON, EPSILON_TOLERANCE, DEFAULT_IRR_ALPHA]
    cases = [(0.5, [0.2, 0.8], 0.75, [0.5, 0.5]), (0.4, [0.5, 0.3, 0.2], 0.6, [1 / 3] * 3)]
    composed = page.evaluate("""async (cases) => { const r = await import('/web/randomizer.js');
        return cases.map(([a, b, ai, bi]) => r.compose(a, b, ai, bi)); }""", cases)
    assert [(c["alpha"], tuple(c["beta"])) for c in composed] == [compose(*c) for c in cases]


def test_in_browser_frequencies_match_the_mechanism(page, live_server, client, auth):
    """10^5 randomizations per true option with crypto.getRandomValues (which cannot be seeded:
    the 5-SE tolerance makes a false failure about a one-in-a-million event)."""
    survey_id = create(client, auth, HEALTH)
    page.goto(f"{live_server}/s/{survey_id}")
    alpha, beta, draws = 0.4, [0.5, 0.3, 0.2], 100_000
    counts = page.evaluate("""async ([alpha, beta, draws]) => {
        const r = await import('/web/randomizer.js');
        const t = r.thresholds(alpha, beta);
        return beta.map((_, truth) => {
            const c = beta.map(() => 0);
            for (let i = 0; i < draws; i++) c[r.randomize(truth, t)] += 1;
            return c;
        });
    }""", [alpha, beta, draws])
    m = Mechanism(alpha, beta)
    for truth, row in enumerate(counts):
        for j, observed in enumerate(row):
            p = m.probability(truth, j)
            assert abs(observed / draws - p) < 5 * math.sqrt(p * (1 - p) / draws)


def test_results_page_with_login(page, live_server, client, auth, researcher_key):
    survey_id = create(client, auth, {**HEALTH, "public_results": False})
    responses = [{"answers": {"smoked": i % 2, "drank_and_drove": int(i % 7 == 0),
                              "cannabis": int(i % 3 == 0), "sleep": i % 3}} for i in range(400)]
    client.post(f"/api/surveys/{survey_id}/responses/batch", json={"responses": responses},
                headers=auth)
    assert release_due(client.application) == 400
    page.goto(f"{live_server}/s/{survey_id}/results")
    page.fill("#key", "wrong-key")
    page.click("button[type=submit]")
    assert page.locator(".error").is_visible()
    page.fill("#key", researcher_key)
    page.click("button[type=submit]")
    page.wait_for_selector("svg.chart")
    assert page.locator("section.result:not(.timeline) svg.chart").count() == 4
    assert page.locator("section.timeline svg.chart").count() == 1
    assert page.locator("section.result:not(.crosstab) table tbody tr").count() == 9
    assert page.locator("section.crosstab table tbody tr").count() == 6  # smoked x sleep, declared
    cookie = next(c for c in page.context.cookies() if c["name"] == "ldp_researcher")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    screenshot(page, "results")
    page.emulate_media(media="print")
    screenshot(page, "results-print")
    export = page.request.get(f"{live_server}/api/surveys/{survey_id}/export.csv")
    assert export.status == 200 and export.text().count("\n") > 400


def test_closed_and_unknown_surveys_get_a_friendly_page(page, live_server, client, auth):
    survey_id = create(client, auth, HEALTH)
    client.post(f"/api/surveys/{survey_id}/close", headers=auth)
    response = page.goto(f"{live_server}/s/{survey_id}")
    assert response.status == 410 and "This survey is closed" in page.content()
    response = page.goto(f"{live_server}/s/does-not-exist")
    assert response.status == 404 and "Survey not found" in page.content()
    screenshot(page, "unknown")


def test_the_form_states_the_release_batch_as_the_servers_promise(page, live_server, client,
                                                                   auth):
    """The same words as the Python client's note, for the batch signed in the manifest."""
    from ldpsurvey.client import release_note, release_summary

    survey_id = create(client, auth, {**HEALTH, "release_batch": 250})
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    answer_all(page)
    randomize(page)
    assert page.locator("#release-summary").inner_text() == release_summary(250)
    assert protection(page).locator("#release-note").inner_text() == release_note(250)


# --- the ledger, concepts and the form's fixes (issue 13) ----------------------------------

LN3 = math.log(3)
THREE_AT_LN_3 = {"title": "Three at ln 3", "release_batch": 1, "questions": [
    {"id": f"q{i}", "text": f"Question {i}?", "type": "yes_no", "epsilon": LN3}
    for i in range(3)]}


def stored_ledger(page) -> dict:
    return page.evaluate("JSON.parse(localStorage.getItem('ldp-survey/ledger'))")


def answer_and_send(page, live_server, survey_id, answers):
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    answer_all(page, answers)
    randomize(page)
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")


def test_the_ledger_spans_surveys_and_refuses_past_the_lifetime_limit(page, live_server, client,
                                                                      auth):
    """Two surveys at 3 ln 3 are sent; the third would take this site to 9 ln 3, above the
    8 ln 3 limit: refused before any question, nothing posted."""
    answers = {f"q{i}": "Yes" for i in range(3)}
    first, second, third = (create(client, auth, THREE_AT_LN_3) for _ in range(3))
    answer_and_send(page, live_server, first, answers)
    page.goto(f"{live_server}/s/{second}")
    page.wait_for_selector("#questions:not([hidden])")
    assert "sent this site answers with epsilon 3.296 in all" in protection(page).locator(
        "#ledger-note").inner_text()
    assert "private window or another browser starts again" in page.locator(
        "#ledger-reset").inner_text()
    answer_and_send(page, live_server, second, answers)
    charged = {sid: record["charged"] for entry in stored_ledger(page)["keys"].values()
               for sid, record in entry["surveys"].items()}
    assert charged == {first: pytest.approx(3 * LN3), second: pytest.approx(3 * LN3)}
    requests = record(page)
    page.goto(f"{live_server}/s/{third}")
    page.wait_for_selector("#refused:not([hidden])")
    assert "Nothing was sent" in page.locator("#refused-text").inner_text()
    assert not page.locator("#ledger-reset").is_visible()
    text = protection(page).locator("#refused-detail").inner_text()
    assert "above this page's lifetime limit of 8.789" in text and "Nothing was sent" in text
    assert page.locator("#ledger-reset").is_visible()
    screenshot(page, "lifetime-refused")
    assert page.locator("#question-list input").count() == 0
    assert not [r for r in requests if r.method != "GET"]
    assert count(client, auth, third) == 0


def test_a_concept_is_reused_across_surveys_in_the_browser(page, live_server, client, auth):
    """Wave 2 asks the same concept with the same settings: no true answer is asked for it, its
    note says so in the Python client's words, and only the other question is charged."""
    from ldpsurvey.client import concept_note
    from ldpsurvey.shared import parse_manifest

    def wave(title):
        return {"title": title, "release_batch": 1, "questions": [
            {"id": "smoked", "text": "Have you ever smoked?", "type": "yes_no", "alpha": 0.5,
             "concept": "smoking.ever"},
            {"id": "slept", "text": "Slept well?", "type": "yes_no", "alpha": 0.25}]}

    first, second = create(client, auth, wave("Wave 1")), create(client, auth, wave("Wave 2"))
    page.goto(f"{live_server}/s/{first}")
    page.wait_for_selector("#questions:not([hidden])")
    survey = parse_manifest(client.get(f"/api/surveys/{first}").data)
    smoked = survey.question("smoked")
    assert concept_note(smoked, "new") in protection(page).locator("#q-smoked-note").inner_text()
    answer_and_send(page, live_server, first, {"smoked": "Yes", "slept": "No"})
    requests = record(page)
    page.goto(f"{live_server}/s/{second}")
    page.wait_for_selector("#questions:not([hidden])")
    assert concept_note(smoked, "reused") in protection(page).locator(
        "#q-smoked-note").inner_text()
    assert page.locator('fieldset[data-question="smoked"] input').count() == 0
    answer_all(page, {"slept": "Yes"})
    randomize(page)
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    [post] = [r for r in requests if r.method == "POST"]
    assert set(json.loads(post.post_data)["answers"]) == {"smoked", "slept"}
    [entry] = stored_ledger(page)["keys"].values()
    [permanent] = stored_ledger(page)["concepts"].values()  # this site's, not the key's
    assert permanent["chargedBy"] == first
    epsilon = {q.id: q.epsilon for q in survey.questions}
    assert entry["surveys"][first]["charged"] == pytest.approx(sum(epsilon.values()))
    assert entry["surveys"][second]["charged"] == pytest.approx(epsilon["slept"])


def concept_wave(title):
    return {"title": title, "release_batch": 1, "questions": [
        {"id": "smoked", "text": "Have you ever smoked?", "type": "yes_no", "alpha": 0.5,
         "concept": "smoking.ever"},
        {"id": "slept", "text": "Slept well?", "type": "yes_no", "alpha": 0.25}]}


@pytest.mark.parametrize("signed, opened", [("127.0.0.1", "localhost"),
                                            ("localhost", "127.0.0.1")])
def test_the_form_refuses_to_run_at_another_origin_than_the_signed_one(
        page, app, live_server, client, auth, signed, opened):
    """One server reached as localhost and as 127.0.0.1 is two origins, so two localStorage
    memories and two budgets: the form refuses to run at the origin its manifest is not signed
    for, before anything is asked, randomized, stored or sent; at the signed one it runs."""
    port = live_server.rsplit(":", 1)[1]
    app.config["PUBLIC_URL"] = f"http://{signed}:{port}"
    survey_id = create(client, auth, concept_wave("Signed"))
    assert client.get(f"/api/surveys/{survey_id}").json["origin"] == f"http://{signed}:{port}"
    requests = record(page)
    page.goto(f"http://{opened}:{port}/s/{survey_id}")
    page.wait_for_selector("#refused:not([hidden])")
    assert page.locator("#refused-text").inner_text() == (
        f"Please answer this survey at http://{signed}:{port}. Nothing was sent.")
    assert protection(page).locator("#refused-detail").inner_text() == (
        f"This survey is signed for http://{signed}:{port}, but this page was opened at "
        f"http://{opened}:{port}. This browser keeps its memory and privacy ledger per address, "
        "so answering here would start them afresh. Nothing was randomized or sent.")
    assert page.locator("#question-list input").count() == 0
    assert page.evaluate("localStorage.length") == 0  # nothing kept at the wrong origin
    assert not [r for r in requests if r.method != "GET"]
    screenshot(page, f"wrong-origin-{opened}")
    page.goto(f"http://{signed}:{port}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    assert page.locator("#question-list input").count() == 4


def test_a_version_2_store_gives_this_site_one_permanent_answer_per_concept(page, live_server,
                                                                            client, auth):
    """A version 2 store kept a concept's permanent answer per key: two keys (rotated ones, or
    two aggregators behind one site) each drew and were charged one. Migrated, the site keeps
    the charged one of the smallest key id, and a third key's survey asks nothing for the
    concept and charges only its other question."""
    survey_id = create(client, auth, concept_wave("Wave 3"))
    concept = json.dumps(["smoking.ever", ["No", "Yes"], 0.5, [0.5, 0.5]], separators=(",", ":"))
    old = {"version": 2, "keys": {
        "bbbbbbbbbbbbbbbb": {"surveys": {}, "concepts": {concept: {"answer": 0,
                                                                   "chargedBy": "wave2"}}},
        "aaaaaaaaaaaaaaaa": {"surveys": {}, "concepts": {concept: {"answer": 1,
                                                                   "chargedBy": "wave1"}}}}}
    page.goto(f"{live_server}/healthz")
    page.evaluate("v => localStorage.setItem('ldp-survey/ledger', v)", json.dumps(old))
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    assert page.locator('fieldset[data-question="smoked"] input').count() == 0
    answer_all(page, {"slept": "Yes"})
    randomize(page)
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    stored = stored_ledger(page)
    assert stored["version"] == 3
    assert stored["concepts"] == {concept: {"answer": 1, "chargedBy": "wave1"}}
    [record] = stored["keys"][client.get("/api/key").json["key_id"]]["surveys"].values()
    slept = client.get(f"/api/surveys/{survey_id}").json["questions"][1]["epsilon"]
    assert record["charged"] == pytest.approx(slept)


def test_a_question_named_constructor_is_asked_and_sent(page, live_server, client, auth):
    """`"constructor" in {}` is true in JavaScript: the form once took such a question for
    answered and showed nothing to answer."""
    survey_id = create(client, auth, {"title": "Prototype names", "release_batch": 1,
                                      "questions": [{"id": "constructor", "text": "Built it?",
                                                     "type": "yes_no", "alpha": 0.3}]})
    requests = record(page)
    answer_and_send(page, live_server, survey_id, {"constructor": "Yes"})
    [post] = [r for r in requests if r.method == "POST"]
    assert list(json.loads(post.post_data)["answers"]) == ["constructor"]
    assert count(client, auth, survey_id) == 1


def test_a_memo_kept_by_release_0_2_is_migrated_and_shown_as_sent(page, live_server, client,
                                                                  auth):
    """localStorage as the 0.2 form left it ("ldp-survey/<survey id>", sent): migrated with its
    answers and key, shown as already sent (nothing posted), charged exactly once seen, and the
    old item is gone."""
    survey_id = create(client, auth, HEALTH)
    old = {"answers": {"smoked": 1, "drank_and_drove": 0, "cannabis": 1, "sleep": 2},
           "idempotencyKey": "kept-by-release-0.2", "submitted": True}
    page.goto(f"{live_server}/healthz")
    page.evaluate("([k, v]) => localStorage.setItem(k, v)",
                  [f"ldp-survey/{survey_id}", json.dumps(old)])
    requests = record(page)
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#confirm:not([hidden])")
    assert "You already sent this survey from this browser" in page.locator("#again").inner_text()
    assert json.loads(page.locator("#payload").text_content()) == {"answers": old["answers"]}
    assert page.locator("#send").is_hidden()
    assert not [r for r in requests if r.method == "POST"]
    assert page.evaluate(f"localStorage.getItem('ldp-survey/{survey_id}')") is None
    [entry] = stored_ledger(page)["keys"].values()
    assert entry["surveys"][survey_id]["idempotencyKey"] == "kept-by-release-0.2"
    total = client.get(f"/api/surveys/{survey_id}").json["total_epsilon"]
    assert entry["surveys"][survey_id]["charged"] == pytest.approx(total)


def test_the_status_is_checked_before_any_question(page, live_server, client, auth):
    """A page loaded while the survey was open, whose survey closed before its script ran (the
    status answer is held back until the survey is closed)."""
    survey_id = create(client, auth, HEALTH)

    def close_first(route):
        client.post(f"/api/surveys/{survey_id}/close", headers=auth)
        route.continue_()

    page.route(f"**/api/surveys/{survey_id}/status", close_first)
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#refused:not([hidden])")
    assert "This survey is closed" in page.locator("#refused-text").inner_text()
    assert page.locator("#question-list input").count() == 0


def test_the_review_screen_says_why_an_answer_may_differ_in_the_clients_words(page, live_server,
                                                                             client, auth):
    from ldpsurvey.client import WHY_IT_MAY_DIFFER

    survey_id = create(client, auth, HEALTH)
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    answer_all(page)
    randomize(page)
    assert page.locator("#why-differ").inner_text() == WHY_IT_MAY_DIFFER


# --- the review-and-change flow, focus and keyboard (issue 16) ------------------------------

def stored_answers(page, survey_id) -> dict:
    """The randomized answers this browser keeps for the survey ({} before randomizing)."""
    ledger = stored_ledger(page) or {"keys": {}}
    records = [entry["surveys"].get(survey_id) for entry in ledger["keys"].values()]
    return next((r["answers"] for r in records if r), {})


@pytest.mark.parametrize("width", [360, 1280])
def test_true_answers_are_reviewed_and_changed_before_anything_is_randomized(
        browser, live_server, client, auth, width):
    survey_id = create(client, auth, HEALTH)
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    requests = record(page)
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    answer_all(page)
    page.click("#review")
    page.wait_for_selector("#true-review:not([hidden])")
    assert page.evaluate("document.activeElement.id") == "review-title"
    assert page.title().startswith("Check your answers")
    items = page.locator("#true-list li")
    assert items.count() == 4 and "Yes" in items.nth(0).inner_text()
    assert stored_answers(page, survey_id) == {}  # nothing randomized, nothing kept
    if width == 360:
        screenshot(page, "review-true-answers-360")
    items.nth(0).get_by_role("button", name="Change").click()
    page.wait_for_selector("#questions:not([hidden])")
    focused = page.evaluate("[document.activeElement.closest('fieldset').dataset.question, "
                            "document.activeElement.checked]")
    assert focused == ["smoked", True]  # the answer chosen before
    page.locator('fieldset[data-question="smoked"] label', has_text="No").click()
    page.click("#review")
    page.wait_for_selector("#true-review:not([hidden])")
    assert "No" in items.nth(0).inner_text() and "Yes" not in items.nth(0).inner_text()
    page.click("#randomize")
    page.wait_for_selector("#confirm:not([hidden])")
    assert page.evaluate("document.activeElement.id") == "confirm-title"
    randomized = stored_answers(page, survey_id)
    assert set(randomized) == set(TRUE_ANSWERS)
    # Final: no way back to the true answers, and a reload shows the same randomized answers.
    assert page.locator("#true-list li").count() == 0
    assert page.locator("#question-list input:enabled").count() == 0
    page.reload()
    page.wait_for_selector("#confirm:not([hidden])")
    assert page.locator("#questions").is_hidden() and page.locator("#send").is_visible()
    assert stored_answers(page, survey_id) == randomized
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    posts = [r for r in requests if r.method == "POST"]
    assert len(posts) == 1 and json.loads(posts[0].post_data) == {"answers": randomized}
    assert count(client, auth, survey_id) == 1
    context.close()


def test_radio_groups_are_one_tab_stop_with_arrow_keys(page, live_server, client, auth):
    survey_id = create(client, auth, HEALTH)
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    assert page.evaluate("document.activeElement === document.body")  # focus not moved on load
    page.focus("#q-smoked-0")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.id") == "q-smoked-1"
    assert page.is_checked("#q-smoked-1") and not page.is_checked("#q-smoked-0")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "q-drank_and_drove-0"
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("document.activeElement.id") == "q-smoked-1"


def test_a_missing_answer_is_shown_at_its_question_and_takes_focus(browser, live_server,
                                                                    client, auth):
    """Errors at the question, on a 390 px phone: each unanswered question says so under its
    own text, tied to it by aria-describedby and aria-invalid; focus moves to the first one,
    whose message is in view without scrolling; answering clears it; answered questions are
    left alone; the count beside the Review button follows."""
    survey_id = create(client, auth, HEALTH)
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                  has_touch=True)
    page = context.new_page()
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    answer_all(page, {"smoked": "Yes", "cannabis": "No"})
    page.click("#review")  # scrolled to the bottom of the form to reach it
    missing = ["drank_and_drove", "sleep"]
    for qid in TRUE_ANSWERS:
        group = page.locator(f'fieldset[data-question="{qid}"]')
        assert group.get_attribute("aria-required") == "true"
        if qid in missing:
            assert group.get_attribute("aria-invalid") == "true"
            assert group.get_attribute("aria-describedby") == f"q-{qid}-error"
            assert page.locator(f"#q-{qid}-error").inner_text() == "Please choose an answer."
        else:
            assert group.get_attribute("aria-invalid") is None
            assert group.get_attribute("aria-describedby") is None
            assert page.locator(f"#q-{qid}-error").inner_text() == ""
    assert page.evaluate("document.activeElement.id") == "q-drank_and_drove-0"
    in_view = page.evaluate("""() => {
        const box = document.getElementById('q-drank_and_drove-error').getBoundingClientRect();
        return box.top >= 0 && box.bottom <= innerHeight && box.height > 0;
    }""")
    assert in_view
    screenshot(page, "missing-answer-390")
    assert page.locator("#review-error").inner_text() == "Please check 2 questions."
    page.locator('fieldset[data-question="drank_and_drove"] label', has_text="No").click()
    first = page.locator('fieldset[data-question="drank_and_drove"]')
    assert first.get_attribute("aria-invalid") is None
    assert first.get_attribute("aria-describedby") is None
    assert page.locator("#q-drank_and_drove-error").inner_text() == ""
    assert page.locator("#review-error").inner_text() == "Please check one question."
    page.locator('fieldset[data-question="sleep"] label', has_text="6 to 8").click()
    assert page.locator("#review-error").inner_text() == ""
    page.click("#review")
    page.wait_for_selector("#true-review:not([hidden])")
    context.close()


# --- the landing page and the researcher dashboard (issue 16) -------------------------------

SCREENS = Path("/tmp/screens")


def log_in(page, live_server, key, path="/researcher"):
    page.goto(f"{live_server}{path}")
    page.fill("#key", key)
    page.click("button[type=submit]")


def test_the_landing_page_links_the_dashboard(page, live_server):
    response = page.goto(f"{live_server}/")
    assert response.status == 200
    assert "local differential privacy" in page.locator(".lead").inner_text()
    page.get_by_role("link", name="open the dashboard").click()
    page.wait_for_selector("#key")
    assert urlparse(page.url).path == "/researcher"


def test_the_dashboard_lists_the_callers_surveys_after_login(page, live_server, client, auth,
                                                            researcher_key):
    plain = create(client, auth, HEALTH)
    invited = create(client, auth, {**HEALTH, "title": "By invitation", "invitation_only": True})
    closed = create(client, auth, {**HEALTH, "title": "Finished"})
    client.post(f"/api/surveys/{closed}/close", headers=auth)
    log_in(page, live_server, "wrong-key")
    key = page.locator("#key")
    assert key.get_attribute("aria-invalid") == "true"
    assert page.locator("#key-error").is_visible()
    # the page moves focus to the field once loaded: waited for (it raced under load)
    page.wait_for_function("document.activeElement && document.activeElement.id === 'key'",
                           timeout=5000)
    log_in(page, live_server, researcher_key)
    page.wait_for_selector("section.survey-card")
    cards = page.locator("section.survey-card")
    assert cards.count() == 3
    text = page.locator("main").inner_text()
    for survey_id in (plain, invited, closed):
        assert survey_id in text
    respondent = page.locator(f'a.respondent-link[href$="/s/{plain}"]')
    assert respondent.count() == 1
    assert page.locator(f'a[href="/s/{closed}/results"]').count() == 1
    assert page.locator(f'a[href="/api/surveys/{plain}/export.csv"]').count() == 1
    SCREENS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENS / "dashboard.png"), full_page=True)
    export = page.request.get(f"{live_server}/api/surveys/{plain}/export.csv")
    assert export.status == 200
    card = cards.filter(has_text="By invitation")
    card.locator("input[name=count]").fill("3")
    card.get_by_role("button", name="Make invitation links").click()
    links = page.locator("#links").input_value().splitlines()
    assert len(links) == 3 and all(f"/s/{invited}#t=" in link for link in links)
    page.goto(f"{live_server}/researcher")
    page.get_by_role("button", name="Log out").click()
    page.wait_for_selector("#key")


# --- the results page on a phone and on a desktop (issue 16) --------------------------------

LONG_OPTION = "Between six and eight hours on most nights, counting naps taken after lunch"


def released_survey(client, auth) -> str:
    """A public-results survey with a long option name and 400 released responses."""
    definition = {**HEALTH, "public_results": True, "questions": [
        *HEALTH["questions"][:3],
        {**HEALTH["questions"][3], "options": ["Under 6", LONG_OPTION, "Over 8"]}]}
    survey_id = create(client, auth, definition)
    responses = [{"answers": {"smoked": i % 2, "drank_and_drove": int(i % 7 == 0),
                              "cannabis": int(i % 3 == 0), "sleep": i % 3}} for i in range(400)]
    client.post(f"/api/surveys/{survey_id}/responses/batch", json={"responses": responses},
                headers=auth)
    assert release_due(client.application) == 400
    return survey_id


SMALLEST_CHART_TEXT = """() => Math.min(...[...document.querySelectorAll('svg.chart text')]
    .map(t => t.getBoundingClientRect().height).filter(h => h > 0))"""


@pytest.mark.parametrize("width", [360, 1280])
def test_results_fit_the_screen_with_readable_chart_text(browser, live_server, client, auth,
                                                         width):
    survey_id = released_survey(client, auth)
    context = browser.new_context(viewport={"width": width, "height": 800})
    page = context.new_page()
    page.goto(f"{live_server}/s/{survey_id}/results")
    page.wait_for_selector("svg.chart")
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    # The rendered height of a text line's box is at least its font size in CSS px.
    assert page.evaluate(SMALLEST_CHART_TEXT) >= 11
    label = page.locator("svg.chart text.label", has_text="Between six")
    assert label.locator("title").text_content() == LONG_OPTION
    box, chart = label.bounding_box(), page.locator("svg.chart").last.bounding_box()
    assert box["x"] >= chart["x"] and box["x"] + box["width"] <= chart["x"] + chart["width"]
    assert page.locator("section.result:not(.timeline) svg.chart").first.get_attribute("aria-label") == (
        f"Estimated proportions: {HEALTH['questions'][0]['text']}")
    if width == 360:
        SCREENS.mkdir(exist_ok=True)
        page.screenshot(path=str(SCREENS / "results-phone-360.png"), full_page=True)
        page.screenshot(path=str(SCREENS / "results-phone-360-top.png"))
        page.locator("section.result", has_text="How many hours").screenshot(
            path=str(SCREENS / "results-phone-360-sleep.png"))
        cell = page.locator("table.estimates td.nowrap").first.bounding_box()
        assert cell["height"] < 30  # one line, not three or four
    context.close()


def test_results_pickers_downloads_and_timeline(page, live_server, client, auth):
    survey_id = released_survey(client, auth)
    page.goto(f"{live_server}/s/{survey_id}/results")
    page.select_option("select[name=confidence]", "0.9")
    page.select_option("select[name=method]", "wilson")
    page.get_by_role("button", name="Update").click()
    page.wait_for_selector("svg.chart")
    expected = client.get(f"/api/surveys/{survey_id}/estimates?confidence=0.9&method=wilson").json
    option = expected["questions"][0]["options"][0]
    cell = page.locator("table.estimates").first.locator("tbody tr").first.locator(
        'td[data-label$="CI"]')
    assert cell.inner_text() == f"{option['ci_low'] * 100:.1f} \u2013 {option['ci_high'] * 100:.1f} %"
    assert "90 % confidence intervals (Wilson)" in page.locator(".lead").inner_text()
    with page.expect_download() as download:
        page.get_by_role("link", name="Download the estimates (CSV)").click()
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
    assert len(rows) == 9 and rows[0]["ci_method"] == "wilson"
    assert float(rows[0]["ci_low"]) == option["ci_low"]
    with page.expect_download() as download:
        page.get_by_role("link", name="Download this chart (SVG)").first.click()
    svg = Path(download.value.path()).read_text()
    assert svg.startswith("<?xml") and 'xmlns="http://www.w3.org/2000/svg"' in svg
    timeline = page.locator("section.timeline svg.chart")
    assert "400 over 1 day" in timeline.get_attribute("aria-label")
    assert timeline.locator("rect.bar").count() == 1


# --- accessibility: axe-core on every page and state, focus ring, forced colours (issue 16) ---

@pytest.mark.parametrize("width", [360, 1280])
def test_axe_finds_no_violations_on_any_page_or_state(browser, live_server, client, auth,
                                                     researcher_key, width):
    plain = released_survey(client, auth)
    private = create(client, auth, {**HEALTH, "title": "Private results", "public_results": False})
    greedy = create(client, auth, {"title": "Too revealing", "questions": [
        {"id": "q", "text": "Tell us everything?", "type": "yes_no", "alpha": 0.9}]})
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    found, check = axe_checker(page)

    page.goto(f"{live_server}/")
    check("landing")
    page.goto(f"{live_server}/s/{greedy}")
    page.wait_for_selector("#refused:not([hidden])")
    check("form refused")
    page.goto(f"{live_server}/s/{private}")
    page.wait_for_selector("#questions:not([hidden])")
    check("form questions")
    page.click("#review")
    check("form missing answers")
    answer_all(page)
    page.click("#review")
    page.wait_for_selector("#true-review:not([hidden])")
    check("form true-answer review")
    if width == 1280:
        SCREENS.mkdir(exist_ok=True)
        page.screenshot(path=str(SCREENS / "form-review-1280.png"), full_page=True)
    page.click("#randomize")
    page.wait_for_selector("#confirm:not([hidden])")
    check("form randomized review")
    page.click("#send")
    page.wait_for_selector("#thanks:not([hidden])")
    check("form sent")
    page.reload()
    page.wait_for_selector("#confirm:not([hidden])")
    check("form already sent")
    page.goto(f"{live_server}/s/{plain}/results")
    page.wait_for_selector("svg.chart")
    check("public results")
    page.goto(f"{live_server}/s/{private}/results")
    check("results login")
    log_in(page, live_server, "wrong-key", f"/s/{private}/results")
    check("results login error")
    log_in(page, live_server, "wrong-key")
    check("dashboard login error")
    log_in(page, live_server, researcher_key)
    page.wait_for_selector("section.survey-card")
    check("dashboard")
    page.goto(f"{live_server}/s/{private}/results")
    page.wait_for_selector("nav.actions")
    check("results as researcher")
    page.goto(f"{live_server}/s/{every_type_answered(client, auth)}/results")
    page.wait_for_selector("nav.actions")
    check("results of every question type")
    page.goto(f"{live_server}/s/does-not-exist")
    check("unknown survey")
    assert found == {state: [] for state in found}
    context.close()


def luminance(rgb: str) -> float:
    """WCAG 2.x relative luminance of a computed "rgb(r, g, b)" colour."""
    channels = [int(c) / 255 for c in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3]]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(first: str, second: str) -> float:
    """WCAG 2.x contrast ratio (L1 + 0.05) / (L2 + 0.05), L1 the lighter."""
    high, low = sorted((luminance(first), luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_focus_ring_has_3_to_1_contrast_on_white_and_on_the_panel_grey(page, live_server,
                                                                           client, auth):
    survey_id = create(client, auth, HEALTH)
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#questions:not([hidden])")
    page.keyboard.press("Tab")  # keyboard focus: :focus-visible applies
    ring = page.evaluate("""() => { const s = getComputedStyle(document.activeElement);
        return [s.outlineStyle, s.outlineWidth, s.outlineColor]; }""")
    assert ring[0] == "solid" and float(ring[1].removesuffix("px")) >= 2
    white = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    panel = page.evaluate("getComputedStyle(document.querySelector('.notice, #ledger') || "
                          "document.body).getPropertyValue('--panel')")
    panel_rgb = page.evaluate("""(c) => { const e = document.createElement('div');
        e.style.color = c; document.body.append(e); const v = getComputedStyle(e).color;
        e.remove(); return v; }""", panel.strip())
    assert contrast(ring[2], white) >= 3 and contrast(ring[2], panel_rgb) >= 3


def test_forced_colors_keep_chart_text_visible(page, live_server, client, auth):
    survey_id = released_survey(client, auth)
    page.emulate_media(forced_colors="active")
    page.goto(f"{live_server}/s/{survey_id}/results")
    page.wait_for_selector("svg.chart")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    fills = page.evaluate("[...document.querySelectorAll('svg.chart text, svg.chart .whisker')]"
                          ".map(t => getComputedStyle(t)[t.tagName === 'text' ? 'fill' : 'stroke'])")
    assert fills and all(contrast(fill, background) >= 4.5 for fill in fills), set(fills)
    border = page.evaluate("getComputedStyle(document.querySelector('form.pickers button'))"
                           ".borderTopStyle")
    assert border == "solid"


def test_two_tabs_neither_randomize_one_survey_twice_nor_lose_a_record(page, live_server,
                                                                      client, auth):
    """The review's race: two tabs of one browser on one survey both randomize and send: the
    second sends the first's randomized answers (one body, one key, counted once); a tab left
    open on another survey does not erase, when it sends, what a third sent meanwhile."""
    answers = {"q0": "Yes"}
    one = {**THREE_AT_LN_3, "questions": THREE_AT_LN_3["questions"][:1]}  # 3 ln 3 in all
    shared, other, kept_open = (create(client, auth, one) for _ in range(3))
    second = page.context.new_page()
    idle = page.context.new_page()
    for tab, survey_id in ((page, shared), (second, shared), (idle, kept_open)):
        tab.goto(f"{live_server}/s/{survey_id}")
        tab.wait_for_selector("#questions:not([hidden])")
        answer_all(tab, answers)
    posts = []
    page.context.on("request", lambda r: posts.append(r.post_data) if r.method == "POST" else None)
    for tab in (page, second):
        randomize(tab)
        tab.click("#send")
        tab.wait_for_selector("#thanks:not([hidden])")
    assert len(posts) == 2 and posts[0] == posts[1]  # the same body, the same key: a replay
    assert count(client, auth, shared) == 1
    answer_and_send(page, live_server, other, answers)
    randomize(idle)
    idle.click("#send")
    idle.wait_for_selector("#thanks:not([hidden])")
    charged = {sid: record["charged"] for entry in stored_ledger(page)["keys"].values()
               for sid, record in entry["surveys"].items()}
    assert set(charged) == {shared, other, kept_open}  # nothing written over


def test_a_survey_that_changed_since_it_was_answered_is_refused(page, live_server, client,
                                                                auth):
    """A survey id whose questions or settings differ from those this browser answered
    (a re-signed survey, here the record's parameters as another version left them) would get
    fresh answers for free: refused before any question, nothing posted."""
    answers = {f"q{i}": "Yes" for i in range(3)}
    survey_id = create(client, auth, THREE_AT_LN_3)
    answer_and_send(page, live_server, survey_id, answers)
    page.evaluate("""(id) => {
        const store = JSON.parse(localStorage.getItem('ldp-survey/ledger'));
        for (const entry of Object.values(store.keys)) {
            if (entry.surveys[id]) entry.surveys[id].parameters = '[["w1q0"]]';
        }
        localStorage.setItem('ldp-survey/ledger', JSON.stringify(store));
    }""", survey_id)
    requests = record(page)
    page.goto(f"{live_server}/s/{survey_id}")
    page.wait_for_selector("#refused:not([hidden])")
    assert "This survey changed since you answered it here" in page.locator(
        "#refused-text").inner_text()
    assert "now asks other questions" in protection(page).locator("#refused-detail").inner_text()
    assert not [r for r in requests if r.method != "GET"]
    assert count(client, auth, survey_id) == 1


# Option indices from 0 to 11 (one digit or two), a yes/no question, three options; within
# the form's default ceilings.
SIZES = {"title": "Sizes", "release_batch": 1, "questions": [
    {"id": "many", "text": "Which month?", "type": "choice",
     "options": [f"month {i}" for i in range(12)], "epsilon": 1.0},
    {"id": "yn", "text": "Yes?", "type": "yes_no", "epsilon": 1.0},
    {"id": "three", "text": "Which?", "type": "choice", "options": ["a", "b", "c"],
     "epsilon": 1.0}]}


def test_every_response_the_form_sends_has_one_size(browser, live_server, client, auth):
    """Randomized answers with every index of a 12-option question (the JSON of 10 is a byte
    longer than that of 9), each kept unsent by another browser with its own key: every body
    sent has one length, padded with spaces after the same document."""
    survey_id = create(client, auth, SIZES)
    bodies = []
    for many in range(12):
        answers = {"many": many, "yn": many % 2, "three": many % 3}
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{live_server}/healthz")
        kept = {"answers": answers, "idempotencyKey": f"key-{many:02d}-" + "k" * 17,
                "submitted": False}
        page.evaluate("([k, v]) => localStorage.setItem(k, v)",
                      [f"ldp-survey/{survey_id}", json.dumps(kept)])
        requests = record(page)
        page.goto(f"{live_server}/s/{survey_id}")
        page.wait_for_selector("#confirm:not([hidden])")
        page.click("#send")
        page.wait_for_selector("#thanks:not([hidden])")
        [post] = [r for r in requests if r.method == "POST"]
        bodies.append((answers, post.post_data_buffer))
        context.close()
    assert {len(body) for _, body in bodies} == {256}
    for answers, body in bodies:
        assert json.loads(body.rstrip(b" ")) == {"answers": answers}
    assert count(client, auth, survey_id) == 12


# --- the cross-tab on a 390 px phone (issue 26) -------------------------------------------

CROSSTAB_CELLS = """() => [...document.querySelectorAll('section.crosstab table tbody tr')].map(
    row => [...row.children].map(cell => {
        const box = cell.getBoundingClientRect();
        return {left: box.left, right: box.right, width: box.width,
                font: parseFloat(getComputedStyle(cell).fontSize), text: cell.innerText,
                label: cell.dataset.label, before: getComputedStyle(cell, '::before').content};
    }))"""


def test_the_crosstab_reflows_at_390_px(browser, live_server, client, auth):
    """Each cross-tab row becomes a card: the page does not scroll sideways, every cell (the
    long option name too) lies inside the screen at a readable size and is labelled, and axe
    finds nothing. Before, the six-column table was wider than the screen, half of it out of
    sight in a sideways-scrolling box."""
    survey_id = released_survey(client, auth)
    release_due(client.application)
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(f"{live_server}/s/{survey_id}/results?rows=smoked&cols=sleep")
    page.wait_for_selector("section.crosstab table")
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    rows = page.evaluate(CROSSTAB_CELLS)
    assert len(rows) == 6 and all(len(row) == 6 for row in rows)
    for row in rows:
        for cell in row:
            assert cell["left"] >= 0 and cell["right"] <= 390, cell
            assert cell["font"] >= 12 and cell["width"] > 200, cell
    # Each value is preceded by its column's name (the header row is hidden on phones).
    assert [cell["label"] for cell in rows[1]] == ["smoked", "sleep", "Joint", "Joint CI",
                                                   "Conditional", "Conditional CI"]
    assert all(cell["before"] not in ("none", "normal") for cell in rows[1]), rows[1]
    assert rows[1][1]["text"] == LONG_OPTION
    SCREENS.mkdir(exist_ok=True)
    page.locator("section.crosstab").screenshot(path=str(SCREENS / "crosstab-phone-390.png"))
    assert axe_violations(page) == []
    context.close()
