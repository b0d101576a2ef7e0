"""Release batches: responses become visible only together, in batches of at least the survey's
release_batch (or at close), and everything that promised exactly-once keeps its promise."""

import pytest

from helpers import SURVEY, release_due

ANSWER = {"answers": {"smoked": 1, "drove": 0, "sleep": 2}}


def create(client, auth, **fields) -> str:
    response = client.post("/api/surveys", json={**SURVEY, **fields}, headers=auth)
    assert response.status_code == 201, response.json
    return response.json["survey_id"]


def post(client, survey_id, body=ANSWER, **headers):
    return client.post(f"/api/surveys/{survey_id}/responses", json=body, headers=headers)


def estimates(client, survey_id, headers=None) -> dict:
    response = client.get(f"/api/surveys/{survey_id}/estimates", headers=headers or {})
    assert response.status_code == 200, response.json
    return response.json


def test_counts_move_only_in_whole_releases(client, auth):
    """A public-results poller sees n jump by the batch, never by one response, even with a
    scheduled release after every submission; neither it nor the researcher sees a pending
    count."""
    survey_id = create(client, auth, release_batch=5, public_results=True)
    seen = []
    for _ in range(12):
        assert post(client, survey_id).status_code == 201
        release_due(client.application)
        public = estimates(client, survey_id)
        assert "pending" not in public and public["release_batch"] == 5
        seen.append(public["questions"][0]["n"])
        assert "pending" not in estimates(client, survey_id, auth)
    assert seen == [0, 0, 0, 0, 5, 5, 5, 5, 5, 10, 10, 10]
    assert all(q["n"] == 10 for q in estimates(client, survey_id)["questions"])
    assert client.post(f"/api/surveys/{survey_id}/close", headers=auth).status_code == 200
    assert estimates(client, survey_id, auth)["questions"][0]["n"] == 12


def test_a_batch_reaching_the_threshold_is_released_whole(client, auth):
    survey_id = create(client, auth, release_batch=5)
    batch = client.post(f"/api/surveys/{survey_id}/responses/batch",
                        json={"responses": [ANSWER] * 3}, headers=auth)
    assert batch.status_code == 201 and release_due(client.application) == 0
    client.post(f"/api/surveys/{survey_id}/responses/batch",
                json={"responses": [ANSWER] * 4}, headers=auth)
    assert estimates(client, survey_id, auth)["questions"][0]["n"] == 0  # until the instant
    assert release_due(client.application) == 7
    assert estimates(client, survey_id, auth)["questions"][0]["n"] == 7


def test_idempotency_holds_across_a_release(client, auth):
    survey_id = create(client, auth, release_batch=3)
    key = {"Idempotency-Key": "before-the-release-0001"}
    assert post(client, survey_id, **key).status_code == 201
    for _ in range(2):
        post(client, survey_id)
    release_due(client.application)
    assert estimates(client, survey_id, auth)["questions"][0]["n"] == 3  # released
    again = post(client, survey_id, **key)
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    other = post(client, survey_id, {"answers": {"smoked": 0, "drove": 0, "sleep": 2}}, **key)
    assert other.status_code == 409 and other.json["error"] == "idempotency_conflict"
    assert release_due(client.application) == 0
    assert estimates(client, survey_id, auth)["questions"][0]["n"] == 3


def test_tokens_across_a_release(client, auth):
    survey_id = create(client, auth, release_batch=2, invitation_only=True)
    tokens = client.post(f"/api/surveys/{survey_id}/tokens", json={"count": 3},
                         headers=auth).json["tokens"]
    for token in tokens[:2]:
        assert post(client, survey_id, **{"Survey-Token": token}).status_code == 201
    assert release_due(client.application) == 2
    assert post(client, survey_id, **{"Survey-Token": tokens[0]}).status_code == 403
    assert post(client, survey_id, **{"Survey-Token": tokens[2]}).status_code == 201
    assert release_due(client.application) == 0  # one in the pool, below the batch
    assert estimates(client, survey_id, auth)["questions"][0]["n"] == 2


def test_a_survey_below_its_batch_shows_nothing_until_closed(client, auth):
    survey_id = create(client, auth, release_batch=100)
    for _ in range(3):
        post(client, survey_id)
    assert release_due(client.application) == 0
    document = estimates(client, survey_id, auth)
    assert document["questions"][0]["n"] == 0
    assert all(o["p_hat"] is None for o in document["questions"][0]["options"])
    export = client.get(f"/api/surveys/{survey_id}/export.csv", headers=auth)
    assert export.get_data(as_text=True).rstrip().endswith("smoked,drove,sleep")  # no rows
    client.post(f"/api/surveys/{survey_id}/close", headers=auth)
    assert estimates(client, survey_id, auth)["questions"][0]["n"] == 3


def test_the_release_batch_is_signed_in_the_manifest(client, auth):
    survey_id = create(client, auth, release_batch=42)
    manifest = client.get(f"/api/surveys/{survey_id}").json
    assert manifest["format"] == "ldp-survey-manifest/8" and manifest["release_batch"] == 42


@pytest.mark.parametrize("value", [0, -1, 1.5, "10"])
def test_a_bad_release_batch_is_refused(client, auth, value):
    response = client.post("/api/surveys", json={**SURVEY, "release_batch": value}, headers=auth)
    assert response.status_code == 422 and "release_batch" in response.json["detail"]


def test_the_central_epsilon_is_reported_per_release_and_for_the_whole_survey(client, auth):
    """n per release is the smallest release so far; the whole survey's n is every released
    response; before a release there is no amplification to claim."""
    import math

    from ldpsurvey.shared.stats.shuffle import central_epsilon

    one_question = {**SURVEY, "questions": [SURVEY["questions"][0]], "release_batch": 1500}
    survey_id = client.post("/api/surveys", json=one_question, headers=auth).json["survey_id"]
    eps0 = math.log(3)  # alpha 0.5, beta 0.5
    before = estimates(client, survey_id, auth)["central"]
    assert before["epsilon_per_release"] == before["epsilon_whole_survey"] == pytest.approx(eps0)
    assert before["delta"] == 1e-6 and "honest respondents" in before["assumes"]
    batch = {"responses": [{"answers": {"smoked": i % 2}} for i in range(2000)]}
    client.post(f"/api/surveys/{survey_id}/responses/batch", json=batch, headers=auth)
    assert release_due(client.application) == 2000
    client.post(f"/api/surveys/{survey_id}/responses/batch",
                json={"responses": batch["responses"][:600]}, headers=auth)
    assert release_due(client.application) == 0
    client.post(f"/api/surveys/{survey_id}/close", headers=auth)  # a last release of 600
    central = estimates(client, survey_id, auth)["central"]
    delta = 1e-6  # min(CENTRAL_DELTA, 1 / (10 * 2600))
    assert central["delta"] == delta
    assert central["epsilon_per_release"] == central_epsilon(eps0, 600, delta) < eps0
    assert central["epsilon_whole_survey"] == central_epsilon(eps0, 2600, delta)
    assert central["epsilon_whole_survey"] < central["epsilon_per_release"]


def test_delta_shrinks_with_the_survey(app, client, auth):
    """delta = min(CENTRAL_DELTA, 1 / (10 n)): with CENTRAL_DELTA = 0.01 and 20 responses,
    1 / 200."""
    app.config["CENTRAL_DELTA"] = 0.01
    survey_id = create(client, auth, release_batch=20)
    client.post(f"/api/surveys/{survey_id}/responses/batch",
                json={"responses": [ANSWER] * 20}, headers=auth)
    release_due(app)
    assert estimates(client, survey_id, auth)["central"]["delta"] == pytest.approx(1 / 200)


def test_a_release_holds_one_chunk_of_the_pool_at_a_time(app, client, auth, monkeypatch):
    """However full the pool, a release (here the close's) opens RELEASE_CHUNK pending rows at
    a time and files the idempotency claims as many at a time; every row is released once,
    under one release number, with the counts and replays of a release in one piece."""
    from ldpsurvey.aggregator.services import releases
    from ldpsurvey.aggregator.store import idempotency as idempotency_store
    from ldpsurvey.aggregator.store import pending as pending_store
    from ldpsurvey.aggregator.store.connection import Connection, today
    from ldpsurvey.aggregator.store.releases import smallest_release
    from ldpsurvey.aggregator.store.storage_key import StorageKeys
    from ldpsurvey.aggregator.store.surveys import get_survey
    from ldpsurvey.aggregator.web.request_connection import get_db

    monkeypatch.setattr(pending_store, "RELEASE_CHUNK", 3)
    opened: list[int] = []
    open_many = StorageKeys.open_many
    monkeypatch.setattr(StorageKeys, "open_many", lambda self, survey, rows: (
        opened.append(len(rows)) or open_many(self, survey, rows)))
    moved: list[int] = []  # idempotency records filed, per statement
    execute = Connection.execute

    def filing(self, sql, params=()):
        if "INTO idempotency_keys" in sql:
            moved.append(len(params) // 5)  # five values a record
        return execute(self, sql, params)

    monkeypatch.setattr(Connection, "execute", filing)
    monkeypatch.setattr(idempotency_store, "FILED_AT_ONCE", 2)
    survey_id = create(client, auth, release_batch=100)
    answers = [{"answers": {"smoked": i % 2, "drove": 0, "sleep": i % 3}} for i in range(10)]
    for i, body in enumerate(answers):
        assert post(client, survey_id, body,
                    **{"Idempotency-Key": f"chunked-{i:04d}"}).status_code == 201
    assert release_due(app) == 0  # below the batch
    with app.app_context():
        db = get_db()
        assert releases.release(db, get_survey(db, survey_id).survey, 1, 7) == 10
        assert db.query("SELECT COUNT(*) FROM pending WHERE survey_id = ?", (survey_id,)) == [(0,)]
        assert db.query("SELECT COUNT(*), COUNT(DISTINCT release_number), MIN(released_day) "
                        "FROM responses WHERE survey_id = ?",
                        (survey_id,)) == [(10, 1, today())]
        assert db.query("SELECT released, released_day, COUNT(*) FROM idempotency_keys "
                        "WHERE survey_id = ? GROUP BY released, released_day",
                        (survey_id,)) == [(1, today(), 10)]
        assert smallest_release(db, survey_id) == 10
    assert opened == [3, 3, 3, 1] and moved == [2, 1, 2, 1, 2, 1, 1]  # chunks, then statements
    document = estimates(client, survey_id, auth)
    assert [o["reported_count"] for o in document["questions"][0]["options"]] == [5, 5]
    assert [o["reported_count"] for o in document["questions"][2]["options"]] == [4, 3, 3]
    again = post(client, survey_id, answers[7], **{"Idempotency-Key": "chunked-0007"})
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"


def test_idempotency_records_are_kept_idempotency_days_after_their_release(app, client, auth):
    """A retry within IDEMPOTENCY_DAYS of its response's release is a replay; a record released
    longer ago is deleted by the survey's next release (which scrubs after it), and a retry
    then is stored as a new response. A record of exactly IDEMPOTENCY_DAYS days is kept; none
    is deleted without a release."""
    from ldpsurvey.aggregator.services.releases import days_before
    from ldpsurvey.aggregator.store.connection import today
    from ldpsurvey.aggregator.web.request_connection import get_db

    app.config["IDEMPOTENCY_DAYS"] = 7
    survey_id = create(client, auth, release_batch=2)
    keys = [f"kept-for-days-{i:04d}" for i in range(3)]
    for key in keys:
        assert post(client, survey_id, **{"Idempotency-Key": key}).status_code == 201
    assert release_due(app) == 3

    def age(key: str, days: int) -> None:  # as if released `days` days ago
        with app.app_context():
            db = get_db()
            with db.transaction():
                db.execute("UPDATE idempotency_keys SET released_day = ? WHERE survey_id = ? "
                           "AND key_hash = ?", (days_before(today(), days), survey_id,
                                                db.keys.idempotency_id(key)))

    def replayed(key: str) -> bool:
        answer = post(client, survey_id, **{"Idempotency-Key": key})
        assert answer.status_code == 201
        return answer.headers.get("Idempotent-Replayed") == "true"

    age(keys[0], 8)
    age(keys[1], 7)
    post(client, survey_id)
    assert release_due(app) == 0  # a pool below its batch: no release, nothing expires either
    assert replayed(keys[0]) and replayed(keys[1]) and replayed(keys[2])
    post(client, survey_id)
    assert release_due(app) == 2
    assert not replayed(keys[0])  # expired: stored again
    assert replayed(keys[1]) and replayed(keys[2])
    assert release_due(app) == 0  # the new one waits for a batch
    client.post(f"/api/surveys/{survey_id}/close", headers=auth)
    assert estimates(client, survey_id, auth)["questions"][0]["n"] == 6


def test_a_request_waits_as_one_sealed_group_and_releases_whole(app, client, auth, monkeypatch):
    """A batch is one pending row holding its size (one insert and one delete, not one per
    response); a release takes whole groups, about RELEASE_CHUNK responses at a time (never
    fewer but at the end, never a batch more), and releases every response once."""
    from ldpsurvey.aggregator.services import releases
    from ldpsurvey.aggregator.store import pending as pending_store
    from ldpsurvey.aggregator.store.pending import pending_count
    from ldpsurvey.aggregator.store.surveys import get_survey
    from ldpsurvey.aggregator.web.request_connection import get_db

    monkeypatch.setattr(pending_store, "RELEASE_CHUNK", 3)
    chunks: list[int] = []
    take_pending = pending_store.take_pending
    monkeypatch.setattr(pending_store, "take_pending", lambda db, survey_id: (
        chunks.append(len(rows)) or (rows, claims)
        for rows, claims in take_pending(db, survey_id)))
    survey_id = create(client, auth, release_batch=100)
    batch = [{"answers": {"smoked": 1, "drove": i % 2, "sleep": 2}} for i in range(7)]
    assert client.post(f"/api/surveys/{survey_id}/responses/batch", json={"responses": batch},
                       headers=auth).status_code == 201
    for _ in range(4):
        assert post(client, survey_id).status_code == 201
    with app.app_context():
        db = get_db()
        assert sorted(db.query("SELECT size FROM pending WHERE survey_id = ?",
                               (survey_id,))) == [(1,), (1,), (1,), (1,), (7,)]
        assert pending_count(db, survey_id, 2) in (2, 8)  # whole groups, up to 2 of them
        assert pending_count(db, survey_id, 100) == 11
        assert releases.release(db, get_survey(db, survey_id).survey, 1, 7) == 11
    assert sum(chunks) == 11 and all(3 <= n < 3 + 7 for n in chunks[:-1]) and chunks[-1] < 10
    drove = estimates(client, survey_id, auth)["questions"][1]["options"]
    assert [o["reported_count"] for o in drove] == [4 + 4, 3]


def test_a_failed_release_leaves_nothing_staged_and_the_next_is_exact(app, client, auth,
                                                                      monkeypatch):
    """A release that fails after staging some chunks is undone whole (the staging table
    with it): the next release stores and counts each response once."""
    from ldpsurvey.aggregator.store import counts as count_store
    from ldpsurvey.aggregator.store import pending as pending_store

    monkeypatch.setattr(pending_store, "RELEASE_CHUNK", 2)
    survey_id = create(client, auth, release_batch=5)
    for _ in range(5):
        post(client, survey_id)
    add_counts = count_store.add_counts

    def fail(*args):
        raise RuntimeError("the database went away mid-release")

    monkeypatch.setattr(count_store, "add_counts", fail)
    assert release_due(app) == 0  # logged; the clock goes on (test_one_surveys_failed_...)
    monkeypatch.setattr(count_store, "add_counts", add_counts)
    assert estimates(client, survey_id, auth)["questions"][0]["n"] == 0
    assert release_due(app) == 5
    assert [o["reported_count"] for o in
            estimates(client, survey_id, auth)["questions"][0]["options"]] == [0, 5]
    export = client.get(f"/api/surveys/{survey_id}/export.csv", headers=auth).text
    assert len(export.strip().splitlines()) == 1 + 5


def test_a_claim_whose_key_has_a_record_already_is_released_all_the_same(app, client, auth):
    """A replica of the release before schema step 12, running beside a migrated one, writes
    an idempotency record for a key whose claim a new replica keeps pending (a retry it
    cannot know for one): the release keeps that record and goes through, instead of failing
    on the duplicate key at every instant from then on."""
    from ldpsurvey.aggregator.store.pending import pending_count
    from ldpsurvey.aggregator.web.request_connection import get_db

    survey_id = create(client, auth, release_batch=1)
    key = "claimed-and-recorded-0001"
    assert post(client, survey_id, **{"Idempotency-Key": key}).status_code == 201
    with app.app_context():
        db = get_db()
        with db.transaction():  # what the replica of the release before wrote for the retry
            db.execute("INSERT INTO idempotency_keys (survey_id, key_hash, body_mac, accepted, "
                       "released) VALUES (?, ?, NULL, 1, 0)",
                       (survey_id, db.keys.idempotency_id(key)))
    assert release_due(app) == 1
    with app.app_context():
        assert get_db().query("SELECT released FROM idempotency_keys") == [(0,)]
        assert pending_count(get_db(), survey_id, 10) == 0
    again = post(client, survey_id, **{"Idempotency-Key": key})
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"


def test_one_surveys_failed_release_holds_up_no_other(app, client, auth, monkeypatch, caplog):
    """A release that fails is undone whole and logged by its survey and the error's type; the
    release clock goes on with the other surveys, and tries the failed one again at the next
    instant."""
    import logging

    from ldpsurvey.aggregator.services import releases

    failing, other = (create(client, auth, release_batch=1) for _ in range(2))
    for survey_id in (failing, other):
        assert post(client, survey_id).status_code == 201
    release = releases.release

    def broken(db, survey, minimum, keep_days):
        if survey.survey_id == failing:
            raise RuntimeError("a disk error")
        return release(db, survey, minimum, keep_days)

    monkeypatch.setattr(releases, "release", broken)
    with caplog.at_level(logging.ERROR):
        assert release_due(app) == 1
    assert [r.getMessage() for r in caplog.records] == [
        f"the release of survey {failing} failed (RuntimeError); the others go on"]
    monkeypatch.undo()
    assert release_due(app) == 1  # the failed one, at the next instant
