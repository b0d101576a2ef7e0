"""The n-1 attack: whoever controls who may respond fills a release around one respondent.

What the design now takes away from the owner: any count of responses waiting for release
(listing, estimates, dashboard, results page), and any release at a moment a request chooses
(releases run only at scheduled instants, releases.release_due, never inside a request). What
no design can take away, and the tests hold the claims to it: an owner who mints the tokens
and answers all but one slot of a release sees the target's randomized report exactly, and
guesses the true answer as well as one report allows (shared.best_guess_accuracy)."""

import csv
import io
import json
import math
import random
import re
import threading
from collections import Counter

import pytest

from ldpsurvey.aggregator import close_app, create_app
from ldpsurvey.shared.mechanisms.randomizer import randomize, thresholds
from ldpsurvey.shared.stats.design import report_probability

from helpers import SURVEY, release_due

BATCH = 3
OWN = {"smoked": 0, "drove": 0, "sleep": 0}  # the owner's filler report, known to the owner


def create(client, auth, **fields) -> str:
    response = client.post("/api/surveys", json={**SURVEY, **fields}, headers=auth)
    assert response.status_code == 201, response.json
    return response.json["survey_id"]


def mint(client, auth, survey_id, count) -> list[str]:
    response = client.post(f"/api/surveys/{survey_id}/tokens", json={"count": count},
                           headers=auth)
    assert response.status_code == 201, response.json
    return response.json["tokens"]


def answer(client, survey_id, answers, token=None):
    headers = {"Survey-Token": token} if token else {}
    response = client.post(f"/api/surveys/{survey_id}/responses", json={"answers": answers},
                           headers=headers)
    assert response.status_code == 201, response.json


def dashboard_session(client, key) -> None:
    """Log the test client into the researcher dashboard with `key`, as a browser would."""
    form = client.get("/researcher").get_data(as_text=True)
    csrf = re.search(r'name="csrf" value="([^"]+)"', form).group(1)
    assert client.post("/researcher/login", data={"csrf": csrf, "key": key}).status_code == 302


def everything_the_owner_sees(client, auth, survey_id) -> list[bytes]:
    """Every view of the survey an owner (API key and logged-in pages) can poll."""
    return [client.get(path, headers=headers).get_data() for path, headers in (
        ("/api/surveys", auth), (f"/api/surveys/{survey_id}/estimates", auth),
        ("/researcher", {}), (f"/s/{survey_id}/results", {}))]


def randomized(answers: dict[str, int]) -> dict[str, int]:
    """The real respondent randomizer (shared.randomizer, OS CSPRNG draws) on every answer."""
    by_id = {q["id"]: q for q in SURVEY["questions"]}
    return {qid: randomize(value, mechanism_thresholds(by_id[qid]))
            for qid, value in answers.items()}


def mechanisms() -> dict[str, tuple[float, tuple[float, ...]]]:
    """(alpha, beta) of each test question, as the aggregator derives them."""
    from ldpsurvey.shared import parse_definition

    survey = parse_definition(SURVEY)
    return {q.id: (q.reported_mechanism.alpha, q.reported_mechanism.beta)
            for q in survey.questions}


def mechanism_thresholds(question: dict):
    return thresholds(*mechanisms()[question["id"]])


def exported(client, auth, survey_id) -> Counter:
    body = client.get(f"/api/surveys/{survey_id}/export.csv?codes=true",
                      headers=auth).get_data(as_text=True)
    reader = csv.DictReader(io.StringIO(body))
    return Counter(json.dumps({k: int(reader_row[k]) for k in OWN}, sort_keys=True)
                   for reader_row in reader)


def test_the_owner_sees_nothing_change_when_a_target_answers(client, auth, researcher_key):
    """(a) Between a target's submission and the release, every view the owner can poll is
    byte for byte the same: no pending count, no change. On main the listing, estimates,
    dashboard and results page showed pending + 1."""
    survey_id = create(client, auth, invitation_only=True, release_batch=BATCH)
    token, *_ = mint(client, auth, survey_id, BATCH)
    dashboard_session(client, researcher_key)
    before = everything_the_owner_sees(client, auth, survey_id)
    answer(client, survey_id, randomized({"smoked": 1, "drove": 1, "sleep": 2}), token)
    assert everything_the_owner_sees(client, auth, survey_id) == before
    assert all(b"pending" not in view for view in before)


def test_a_copy_of_the_files_shows_when_a_target_answered(app, client, auth):
    """What (a) does not hold against a reader of the database files, even without the
    storage key: the pending groups and the spent tokens are rows, one more of each when the
    target answers (which of the invitees it was, the copy does not tell:
    test_storage_key.py::test_a_copy_without_the_key_does_not_tell_which_invitees_answered)."""
    from ldpsurvey.aggregator.web.request_connection import get_db

    survey_id = create(client, auth, invitation_only=True, release_batch=BATCH)
    token, *_ = mint(client, auth, survey_id, BATCH)

    def rows() -> list[int]:
        with app.app_context():
            db = get_db()
            return [db.query(f"SELECT COUNT(*) FROM {table}")[0][0]
                    for table in ("pending", "spent_tokens")]

    assert rows() == [0, 0]
    answer(client, survey_id, randomized({"smoked": 1, "drove": 1, "sleep": 2}), token)
    assert rows() == [1, 1]


def test_the_submission_that_fills_a_batch_releases_nothing(client, auth):
    """(b) Filling the pool (one by one, or with a researcher's whole batch) releases nothing;
    only the scheduled release does. On main the filling request released at once."""
    survey_id = create(client, auth, release_batch=BATCH)
    for _ in range(BATCH):
        answer(client, survey_id, OWN)
    batch = client.post(f"/api/surveys/{survey_id}/responses/batch",
                        json={"responses": [{"answers": OWN}] * BATCH}, headers=auth)
    assert batch.status_code == 201

    def n():
        return client.get(f"/api/surveys/{survey_id}/estimates",
                          headers=auth).json["questions"][0]["n"]

    assert n() == 0
    assert release_due(client.application) == 2 * BATCH
    assert n() == 2 * BATCH
    assert release_due(client.application) == 0  # a second clock at the same instant: nothing


TARGETS = 300


def test_the_owner_fill_recovers_the_report_and_no_more(client, auth):
    """(c) The owner of an invitation-only survey mints BATCH tokens per round, sends one to a
    target (who answers through the real randomizer), answers the other BATCH - 1 itself,
    runs the scheduled release, exports and subtracts what it sent: it gets the target's
    randomized report exactly, every time. Its best guess of each true answer (the answer
    most likely to give that report) is then right as often as best_guess_accuracy says, the
    bound the results page states, and no more."""
    survey_id = create(client, auth, invitation_only=True, release_batch=BATCH)
    truth_source = random.Random(23)  # the targets' true answers: any fixed distribution will do
    k = {q["id"]: len(q.get("options", (0, 1))) for q in SURVEY["questions"]}
    right = Counter()
    seen = Counter()
    for _ in range(TARGETS):
        target_token, *own_tokens = mint(client, auth, survey_id, BATCH)
        truth = {qid: truth_source.randrange(k[qid]) for qid in OWN}
        sent = randomized(truth)
        answer(client, survey_id, sent, target_token)
        for token in own_tokens:
            answer(client, survey_id, OWN, token)
        assert release_due(client.application) == BATCH
        now = exported(client, auth, survey_id)
        new = now - seen
        new[json.dumps(OWN, sort_keys=True)] -= BATCH - 1
        recovered = [json.loads(row) for row, times in new.items() for _ in range(times)]
        assert recovered == [sent]  # exactly the target's report: the claim is honest
        seen = now
        for qid, (alpha, beta) in mechanisms().items():
            report = recovered[0][qid]
            guess = max(range(k[qid]), key=lambda i: report_probability(alpha, beta, i, report))
            right[qid] += guess == truth[qid]

    page = client.get(f"/s/{survey_id}/results", headers=auth)  # no session: the login form
    assert page.status_code == 200
    for qid, (alpha, beta) in mechanisms().items():
        exact = sum(max(report_probability(alpha, beta, i, r) for i in range(k[qid]))
                    for r in range(k[qid])) / k[qid]
        stated = stated_bound(client, survey_id, qid)
        assert stated == pytest.approx(exact, abs=1e-12)
        assert exact == pytest.approx(alpha + (1 - alpha) / k[qid], abs=1e-12)
        se = math.sqrt(exact * (1 - exact) / TARGETS)
        assert abs(right[qid] / TARGETS - exact) <= 4 * se, (qid, right[qid], exact)


def stated_bound(client, survey_id, question_id) -> float:
    """The best-guess bound the service states for a question (surveys.exposure: what the
    results page and the form print)."""
    from ldpsurvey.aggregator.services import surveys
    from ldpsurvey.aggregator.web.request_connection import get_db

    with client.application.app_context():
        survey = surveys.published(get_db(), survey_id).survey
        return surveys.exposure(survey, client.application.config["RELEASE_EVERY"]
                                ).best_guess[question_id]


def test_the_results_page_and_the_form_state_the_bound(client, auth, researcher_key):
    """The bound the attack test checks is the one printed, in plain words, on the results
    page (per question) and the form (the largest), with the release schedule."""
    survey_id = create(client, auth, release_batch=BATCH, public_results=True)
    results = client.get(f"/s/{survey_id}/results").get_data(as_text=True)
    form = client.get(f"/s/{survey_id}").get_data(as_text=True)
    bounds = {q["id"]: stated_bound(client, survey_id, q["id"]) for q in SURVEY["questions"]}
    for value in bounds.values():
        assert f"right at most {100 * value:.0f} %" in results
    assert f"right at most {100 * max(bounds.values()):.0f} % of the time" in form
    assert "at most once an hour, in groups of at least 3" in form
    assert "No design can stop anyone who can open this survey from filling a group" in form
    assert "anyone who can open this survey can fill a release" in results


def test_a_public_poller_sees_change_only_at_scheduled_releases(client, auth):
    """(d) On a public-results survey, the anonymous estimates document stays byte for byte
    the same through every submission, batch-filling ones included, and changes only when
    the scheduled release runs. On main it changed at the submission that filled a batch."""
    survey_id = create(client, auth, release_batch=BATCH, public_results=True)

    def poll() -> bytes:
        return client.get(f"/api/surveys/{survey_id}/estimates").get_data()

    seen = [poll()]
    for _ in range(2):
        for _ in range(2 * BATCH + 1):
            answer(client, survey_id, randomized({"smoked": 1, "drove": 0, "sleep": 1}))
            assert poll() == seen[-1]
        release_due(client.application)
        seen.append(poll())
        assert seen[-1] != seen[-2]
    document = json.loads(seen[-1])
    assert document["release_every"] == 3600 and "pending" not in document
    assert document["questions"][0]["n"] == 2 * (2 * BATCH + 1)


def clock_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "ldp-survey-release-clock"}


def clock_released(client, headers, survey_id: str, n: int) -> bool:
    """Whether the survey counts `n` released responses within 20 s, waiting for the app's
    release clock (asserts no duration)."""
    for _ in range(400):
        if client.get(f"/api/surveys/{survey_id}/estimates",
                      headers=headers).json["questions"][0]["n"] == n:
            return True
        threading.Event().wait(0.05)
    return False


def test_the_release_clock_runs_release_due_at_its_instants(database_url, tmp_path):
    """The app's own clock thread, with a tiny interval, releases a full pool without any
    request or test help, and close_app stops it."""
    before = clock_threads()
    app = create_app({"DATABASE_URL": database_url, "RELEASE_EVERY": 0.05},
                     instance_path=tmp_path / "clocked")
    try:
        from ldpsurvey.aggregator import create_api_key

        headers = {"Authorization": f"Bearer {create_api_key(app).key}"}
        client = app.test_client()
        survey_id = create(client, headers, release_batch=1)
        answer(client, survey_id, OWN)
        assert clock_released(client, headers, survey_id, 1)
    finally:
        close_app(app)
    assert clock_threads() <= before


def test_the_release_clock_expires_idempotency_records_after_the_configured_days(
        database_url, tmp_path):
    """The clock keeps idempotency records IDEMPOTENCY_DAYS (here 2, not the default 7): a
    record released 3 days ago is deleted at the next release, so its retry is stored anew."""
    from ldpsurvey.aggregator import create_api_key
    from ldpsurvey.aggregator.services.releases import days_before
    from ldpsurvey.aggregator.store.connection import today
    from ldpsurvey.aggregator.web.request_connection import get_db

    app = create_app({"DATABASE_URL": database_url, "RELEASE_EVERY": 0.05,
                      "IDEMPOTENCY_DAYS": 2}, instance_path=tmp_path / "clocked")
    try:
        headers = {"Authorization": f"Bearer {create_api_key(app).key}"}
        client = app.test_client()
        survey_id = create(client, headers, release_batch=1)
        key = {"Idempotency-Key": "kept-two-days-0001"}

        def released(n: int) -> bool:
            return clock_released(client, headers, survey_id, n)

        def post() -> bool:
            answer = client.post(f"/api/surveys/{survey_id}/responses", json={"answers": OWN},
                                 headers=key)
            assert answer.status_code == 201
            return answer.headers.get("Idempotent-Replayed") == "true"

        assert not post() and released(1)
        with app.app_context():
            db = get_db()
            with db.transaction():
                db.execute("UPDATE idempotency_keys SET released_day = ? WHERE survey_id = ?",
                           (days_before(today(), 3), survey_id))
        assert post()  # not expired until a release deletes it
        answer(client, survey_id, OWN)
        assert released(2) and not post() and released(3)
    finally:
        close_app(app)


@pytest.mark.parametrize(("now", "every", "expected"), [
    (0.0, 3600, 3600.0), (7199.9, 3600, 7200.0), (7200.0, 3600, 10800.0),
    (1_700_000_123.0, 60, 1_700_000_160.0), (0.26, 0.05, 0.3)])
def test_scheduled_instants_are_multiples_of_the_interval_since_the_epoch(now, every, expected):
    from ldpsurvey.shared.http_contract import next_instant

    assert next_instant(now, every) == pytest.approx(expected)
