"""What storage may hold, and that an acknowledged answer is on disk."""

import re

import pytest

from helpers import release_due

SENSITIVE = re.compile(r"ip|addr|agent|cookie|token|user|time|host|session|email", re.I)


def columns(app) -> dict[str, list[str]]:
    from ldpsurvey.aggregator.web.request_connection import get_db

    with app.app_context():
        db = get_db()
        if db.dialect == "postgresql":
            rows = db.query("SELECT table_name, column_name FROM information_schema.columns "
                            "WHERE table_schema = current_schema()")
        else:
            tables = [t for (t,) in db.query("SELECT name FROM sqlite_master WHERE type='table'")]
            rows = [(t, c[1]) for t in tables for c in db.query(f"PRAGMA table_info({t})")]
    result: dict[str, list[str]] = {}
    for table, column in rows:
        result.setdefault(table, []).append(column)
    return result


def test_no_column_can_hold_an_ip_user_agent_token_or_time(app):
    schema = columns(app)
    assert set(schema) == {"surveys", "responses", "counts", "idempotency_keys", "api_keys",
                           "invitation_tokens", "schema_version", "pending", "releases",
                           "researchers", "relay_surveys", "shares", "sessions",
                           "joint_counts", "storage_key", "release_totals", "release_days",
                           "drafts", "spent_tokens"}
    # A draft is its owner's definition (researcher text, nothing from respondents).
    assert sorted(schema["drafts"]) == ["created_day", "definition", "owner_id", "survey_id"]
    # The release a response came in (its number), which the day alone told when there was
    # one release that day: what an export needs to read only the releases it began with.
    # And its bucket: eight bits of its random id (ids.bucket_of), so a release appends.
    assert sorted(schema["responses"]) == ["answers", "bucket", "release_number", "released_day",
                                           "response_id", "survey_id"]
    assert sorted(schema["storage_key"]) == ["check_value"]  # HMAC of a label: no secret
    # Summaries of the releases table, per survey and per survey and day: nothing per response.
    assert sorted(schema["release_totals"]) == ["last_number", "released", "smallest",
                                                "survey_id"]
    assert sorted(schema["release_days"]) == ["released_day", "size", "survey_id"]
    # A pending request's responses sealed together, how many, and its idempotency claim
    # (keyed hashes, as its record keeps them once released, with that number too).
    assert sorted(schema["pending"]) == ["answers", "body_mac", "key_hash", "pending_id", "size",
                                         "survey_id"]
    # An idempotency record: keyed hashes, a count, and once released the release's day.
    assert sorted(schema["idempotency_keys"]) == ["accepted", "body_mac", "key_hash", "released",
                                                  "released_day", "survey_id"]
    # Hashes of unspent invitation tokens minted before step 14, deleted when spent, and of
    # spent tokens minted since: nothing joins them to a response.
    assert sorted(schema["invitation_tokens"]) == ["survey_id", "token_hash"]
    assert sorted(schema["spent_tokens"]) == ["survey_id", "token_hash"]
    # Researchers' results-page sessions (hashed; nothing in them refers to a respondent).
    assert sorted(schema["sessions"]) == ["api_key_id", "expires", "session_hash"]
    for table, names in schema.items():
        for name in names:
            if (table, name) not in {("invitation_tokens", "token_hash"),
                                     ("spent_tokens", "token_hash"),
                                     ("sessions", "session_hash")}:
                assert not SENSITIVE.search(name), f"{table}.{name}"


def test_sqlite_is_durable_wal(app):
    from ldpsurvey.aggregator.web.request_connection import get_db

    with app.app_context():
        db = get_db()
        if db.dialect == "postgresql":
            assert db.query("SHOW synchronous_commit")[0][0] == "on"
            assert db.query("SHOW fsync")[0][0] == "on"
            return
        assert db.query("PRAGMA journal_mode")[0][0] == "wal"
        assert db.query("PRAGMA synchronous")[0][0] == 2  # FULL
        assert db.query("PRAGMA secure_delete")[0][0] == 1


def test_request_headers_are_not_stored(app, client, survey_id):
    """Send identifying headers; none of their values appears anywhere in the database."""
    from ldpsurvey.aggregator.web.request_connection import get_db

    marker = "marker-7f3e9a"
    client.post(f"/api/surveys/{survey_id}/responses",
                json={"answers": {"smoked": 1, "drove": 0, "sleep": 2}},
                headers={"User-Agent": marker, "Cookie": f"c={marker}",
                         "X-Forwarded-For": "203.0.113.9", "Idempotency-Key": f"{marker}-key"},
                environ_base={"REMOTE_ADDR": "198.51.100.7"})
    with app.app_context():
        db = get_db()
        for table in columns(app):
            for row in db.query(f"SELECT * FROM {table}"):
                text = " ".join(map(str, row))
                for needle in (marker, "203.0.113.9", "198.51.100.7"):
                    assert needle not in text, (table, row)


def test_stored_answers_are_canonical_json():
    from ldpsurvey.aggregator.store.responses import answers_json
    from ldpsurvey.shared import parse_definition
    from ldpsurvey.shared.survey import strict_json

    from helpers import SURVEY

    survey = parse_definition(SURVEY)
    responses = [(1, 0, 2), (0, 1, 0)]
    ids = [q.id for q in survey.questions]
    assert answers_json(survey, responses) == [
        strict_json.dumps(dict(zip(ids, r, strict=True))).decode() for r in responses]


def test_response_ids_are_random_and_distinct():
    from ldpsurvey.aggregator.config.ids import new_ids

    ids = new_ids(1000)
    assert len(set(ids)) == 1000 and all(len(i) == 16 for i in ids)


def test_survey_ids_are_safe_on_a_command_line_and_in_urls():
    import re

    from ldpsurvey.aggregator.config.ids import new_survey_id

    ids = {new_survey_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    assert all(re.fullmatch(r"[a-z2-7]{21}", survey_id) for survey_id in ids)  # 105 bits


def test_the_instance_folder_and_database_files_are_private(tmp_path):
    """Under the usual umask 022 too: 0700 for the folder, 0600 for the key, the secret and
    the SQLite file with its -wal and -shm."""
    import os
    import stat

    from ldpsurvey.aggregator import close_app, create_api_key, create_app

    old = os.umask(0o022)
    try:
        app = create_app(instance_path=tmp_path / "instance")
        create_api_key(app)
        instance = tmp_path / "instance"
        assert stat.S_IMODE(instance.stat().st_mode) == 0o700
        for name in ("signing-key.pem", "secret-key", "ldp-survey.sqlite3",
                     "ldp-survey.sqlite3-wal", "ldp-survey.sqlite3-shm"):
            assert stat.S_IMODE((instance / name).stat().st_mode) == 0o600, name
        close_app(app)
    finally:
        os.umask(old)


def test_a_key_file_others_can_read_is_refused_in_production(tmp_path):
    import pytest

    from ldpsurvey.aggregator import ConfigurationError, close_app, create_app
    from ldpsurvey.aggregator.config.signing import new_key_pem

    key = tmp_path / "key.pem"
    key.write_bytes(new_key_pem())
    key.chmod(0o644)
    config = {"KEY_FILE": str(key), "SECRET_KEY": "s" * 64, "STORAGE_KEY": "k" * 64,
              "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
              "PUBLIC_URL": "https://survey.example.org"}
    with pytest.raises(ConfigurationError, match="chmod 600"):
        create_app({**config, "DEPLOYMENT": "production"}, instance_path=tmp_path / "i")
    with pytest.warns(UserWarning, match="chmod 600"):
        close_app(create_app(config, instance_path=tmp_path / "i"))
    key.chmod(0o600)
    close_app(create_app({**config, "DEPLOYMENT": "production"}, instance_path=tmp_path / "i"))


def test_the_listing_shows_each_survey_with_its_counts(app, client, auth, survey_id):
    """Every survey (no researcher named): id, title, status, day and released responses; a
    researcher who owns and shares nothing sees none."""
    from ldpsurvey.aggregator.store.connection import today
    from ldpsurvey.aggregator.store.surveys import ListedSurvey, has_surveys, list_surveys
    from ldpsurvey.aggregator.web.request_connection import get_db

    from helpers import SURVEY

    client.post(f"/api/surveys/{survey_id}/responses",
                json={"answers": {"smoked": 1, "drove": 0, "sleep": 2}})
    release_due(app)
    with app.app_context():
        db = get_db()
        [listed] = list_surveys(db, None)
        assert listed == ListedSurvey(survey_id, SURVEY["title"], "open", today(),
                                            n=1, invitation_only=False, archived=False)
        assert list_surveys(db, "no-such-researcher") == []
        assert has_surveys(db)


def test_a_survey_gone_between_two_reads_is_not_found(app):
    """Looking up, or locking, an id no survey has (a survey deleted since the caller read its
    id, or a malformed id) raises SurveyNotFound, which the API answers with 404."""
    from ldpsurvey.aggregator.exceptions import SurveyNotFound
    from ldpsurvey.aggregator.store.surveys import (
        get_survey,
        has_surveys,
        lock_open_survey,
        lock_survey,
    )
    from ldpsurvey.aggregator.web.request_connection import get_db

    with app.app_context():
        db = get_db()
        assert not has_surveys(db)
        for survey_id in ("gone", "bad\x00id"):
            for read in (get_survey, lock_survey, lock_open_survey):
                with db.transaction(), pytest.raises(SurveyNotFound):
                    read(db, survey_id)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_row_locks_let_intake_share_a_survey_and_keep_releases_and_revokes_apart(
        database_url, survey_id, app):
    """PostgreSQL locks rows, so the store says how (SQLite's BEGIN IMMEDIATE serializes every
    writer anyway): many intakes hold a survey's row at once; a release or close holds it
    alone (nothing else may lock it meanwhile); a login holds its key shared and a revoke
    alone. Tried from a second connection that gives up after 100 ms."""
    import psycopg

    from ldpsurvey.aggregator import create_api_key
    from ldpsurvey.aggregator.services import releases
    from ldpsurvey.aggregator.store.accounts import delete_key, lock_key
    from ldpsurvey.aggregator.store.connection import connection_to, open_database
    from ldpsurvey.aggregator.store.surveys import get_survey, lock_open_survey, lock_survey

    api_key_id = create_api_key(app).api_key_id
    database = open_database(database_url, app.extensions["ldp_database"].keys)

    def waits(holder, hold_exclusive, taker, take_exclusive, row):
        """Whether `taker` must wait while `holder` holds `row` (exclusive=False: the default)."""
        def mode(exclusive):
            return {"exclusive": True} if exclusive else {}

        with connection_to(database) as first, connection_to(database) as second, \
                first.transaction():
            holder(first, row, **mode(hold_exclusive))
            try:
                with second.transaction():
                    second.execute("SET LOCAL lock_timeout = '100ms'")
                    taker(second, row, **mode(take_exclusive))
            except psycopg.errors.LockNotAvailable:
                return True
        return False

    try:
        for lock, row in ((lock_survey, survey_id), (lock_key, api_key_id)):
            assert not waits(lock, False, lock, False, row), lock
            assert waits(lock, False, lock, True, row), lock
            assert waits(lock, True, lock, False, row), lock
        # intakes (lock_open_survey, always shared) share the survey, a release or close waits
        # for them, and they wait for a release or close
        intake, survey_lock = lock_open_survey, lock_survey
        assert not waits(intake, False, intake, False, survey_id)
        assert waits(intake, False, survey_lock, True, survey_id)
        assert waits(survey_lock, True, intake, False, survey_id)
        assert waits(lock_key, False, delete_key, False, api_key_id)  # a login
        with connection_to(database) as db:
            survey = get_survey(db, survey_id).survey
        # an intake in flight holds the survey shared: a release waits for it
        assert waits(lock_survey, False, lambda db, row: releases.release(db, survey, 0, 7),
                     False, survey_id)
        with connection_to(database) as db:
            assert delete_key(db, api_key_id) and not delete_key(db, api_key_id)
            assert not lock_key(db, api_key_id)
    finally:
        database.close()


def test_days_are_utc_days_whatever_the_servers_time_zone(monkeypatch):
    """A replica in another time zone stores the same day: today() is the UTC date. The zone
    is chosen so that its date differs from UTC's now (14 hours ahead or 12 behind)."""
    import time
    from datetime import UTC, datetime, timedelta

    from ldpsurvey.aggregator.store.connection import today

    now = datetime.now(UTC)
    ahead = now.hour >= 12
    monkeypatch.setenv("TZ", "Etc/GMT-14" if ahead else "Etc/GMT+12")  # POSIX signs are flipped
    time.tzset()
    try:
        local = datetime.now().date()
        assert local == (now + timedelta(hours=14 if ahead else -12)).date() != now.date()
        assert today() == datetime.now(UTC).date().isoformat()
    finally:
        monkeypatch.undo()
        time.tzset()


def test_the_timeline_counts_released_responses_per_day(app, client, survey_id):
    """released_per_day: (UTC day, responses released that day) as whole numbers."""
    from ldpsurvey.aggregator.store.releases import released_per_day
    from ldpsurvey.aggregator.web.request_connection import get_db

    for _ in range(3):
        client.post(f"/api/surveys/{survey_id}/responses",
                    json={"answers": {"smoked": 1, "drove": 0, "sleep": 2}})
    release_due(app)
    with app.app_context():
        db = get_db()
        for table in ("releases", "release_days"):  # the release and its day's summary
            db.execute(f"UPDATE {table} SET released_day = '2026-01-01' WHERE survey_id = ?",
                       (survey_id,))
        assert released_per_day(db, survey_id) == [("2026-01-01", 3)]


def test_release_summaries_follow_every_release(app, client, survey_id):
    """The per-survey totals and per-day sizes that estimates, exports and listings read are
    kept by each release: releases of 3, 1 and 2 sum to 6 with the smallest 1, numbered to 3."""
    from ldpsurvey.aggregator.store.connection import today
    from ldpsurvey.aggregator.store.releases import (
        last_release_number,
        released_count,
        released_per_day,
        smallest_release,
    )
    from ldpsurvey.aggregator.web.request_connection import get_db

    with app.app_context():
        db = get_db()
        assert (released_count(db, survey_id), smallest_release(db, survey_id),
                last_release_number(db, survey_id)) == (0, None, 0)
        assert released_per_day(db, survey_id) == []
    for size in (3, 1, 2):
        for _ in range(size):
            client.post(f"/api/surveys/{survey_id}/responses",
                        json={"answers": {"smoked": 1, "drove": 0, "sleep": 2}})
        assert release_due(app) == size
    with app.app_context():
        db = get_db()
        assert (released_count(db, survey_id), smallest_release(db, survey_id),
                last_release_number(db, survey_id)) == (6, 1, 3)
        assert released_per_day(db, survey_id) == [(today(), 6)]
        assert db.query("SELECT release_number, size FROM releases WHERE survey_id = ? "
                        "ORDER BY release_number", (survey_id,)) == [(1, 3), (2, 1), (3, 2)]


def test_the_bucket_is_eight_random_bits_of_the_id_in_python_and_in_sql(app):
    """ids.bucket_of and the SQL that migration 8 computes it with agree on 4,000 fresh ids
    (and on ids of other characters, bucket 0 for each unknown one), and fresh ids fill the
    256 buckets evenly (chi-square, 255 degrees of freedom, within 4.5 SD of its mean)."""
    from collections import Counter

    from ldpsurvey.aggregator.config.ids import BUCKETS, bucket_of, bucket_sql, new_ids
    from ldpsurvey.aggregator.web.request_connection import get_db

    ids = [*new_ids(4000), "A", "AAAA", "__", "_A", "A_", "é_x"]
    with app.app_context():
        db = get_db()
        for response_id in ids:
            assert db.query(f"SELECT {bucket_sql('?')}", (response_id,) * 2) == [
                (bucket_of(response_id),)], response_id
    assert [bucket_of(i) for i in ("AA", "AP", "AQ", "_/", "__")] == [0, 0, 1, 252, 255]
    counts = Counter(bucket_of(i) for i in new_ids(100 * BUCKETS))
    assert set(counts) <= set(range(BUCKETS))
    chi2 = sum((counts[b] - 100) ** 2 / 100 for b in range(BUCKETS))
    assert abs(chi2 - (BUCKETS - 1)) < 4.5 * (2 * (BUCKETS - 1)) ** 0.5
