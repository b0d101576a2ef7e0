"""Helpers of the tests that drive the aggregator's pages in Debian's Chromium (Playwright):
publish a survey, record the page's requests, review and randomize, open "How your answers are
protected", screenshots, axe-core's check of a state, and the answers of the survey of every
type (helpers.EVERY_TYPE) given by pointer."""

from importlib import resources
from pathlib import Path

from helpers import EVERY_TYPE_ANSWERS, require

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
NO_SIDEWAYS_SCROLL = "document.documentElement.scrollWidth <= window.innerWidth"


def create(client, auth, definition):
    response = client.post("/api/surveys", json=definition, headers=auth)
    assert response.status_code == 201, response.json
    return response.json["survey_id"]


def record(page) -> list:
    requests = []
    page.on("request", lambda request: requests.append(request))
    return requests


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


def randomize(page):
    """Review the true answers, then randomize them: the randomized answers are shown."""
    page.click("#review")
    page.wait_for_selector("#true-review:not([hidden])")
    page.click("#randomize")
    page.wait_for_selector("#confirm:not([hidden])")


def protection(page):
    """Open "How your answers are protected" (collapsed until the respondent taps it)."""
    if page.locator("#protection").get_attribute("open") is None:
        page.click("#protection > summary")
    return page.locator("#protection")


def screenshot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def axe_checker(page):
    """(found, check): check(state) records axe-core's violations on `page` in found[state]
    and asserts that the page does not scroll sideways."""
    found = {}

    def check(state):
        found[state] = axe_violations(page)
        assert page.evaluate(NO_SIDEWAYS_SCROLL), state

    return found, check


def axe_violations(page) -> list:
    """axe-core (the copy bundled by the axe-playwright-python test dependency) run in the
    page; the violations found, as (rule, impact, first target) triples."""
    try:
        source = (resources.files("axe_playwright_python") / "axe.min.js").read_text()
    except ModuleNotFoundError:
        require(False, "axe-playwright-python is not installed (pip install 'ldp-survey[test]')")
    page.evaluate(source)  # evaluated by the browser directly: the page's CSP does not apply
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [(v["id"], v["impact"], v["nodes"][0]["target"]) for v in result["violations"]]
