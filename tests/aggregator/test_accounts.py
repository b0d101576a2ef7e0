"""Researcher accounts, tried the way another researcher, a relay or a thief of a cookie would:
ownership, sharing, scoped relay keys, revocation and server-side sessions."""

import copy
import re

import pytest

from helpers import SURVEY, release_due

ANSWERS = {"smoked": 1, "drove": 0, "sleep": 2}


def key_for(app, role="researcher", name=None, surveys=(), existing=False):
    from ldpsurvey.aggregator import create_api_key

    issued = create_api_key(app, role, name, surveys, existing)
    return {"Authorization": f"Bearer {issued.key}"}


def publish(client, headers, **changes) -> str:
    response = client.post("/api/surveys", json={**copy.deepcopy(SURVEY), **changes},
                           headers=headers)
    assert response.status_code == 201, response.json
    return response.json["survey_id"]


# Everything a researcher can ask about a survey, as (method, path template, JSON body).
SURVEY_ENDPOINTS = [
    ("GET", "/api/surveys/{}/estimates", None),
    ("GET", "/api/surveys/{}/export.csv", None),
    ("GET", "/api/surveys/{}/export.jsonl", None),
    ("GET", "/api/surveys/{}/shares", None),
    ("PUT", "/api/surveys/{}/shares/somebody", None),
    ("DELETE", "/api/surveys/{}/shares/somebody", None),
    ("POST", "/api/surveys/{}/tokens", {"count": 1}),
    ("POST", "/api/surveys/{}/responses/batch", {"responses": [{"answers": ANSWERS}]}),
    ("POST", "/api/surveys/{}/close", None),
]
UNKNOWN = "a" * 21  # a survey id of the current form that no survey has


def test_another_researchers_survey_answers_exactly_as_an_unknown_one(app, client, auth):
    """Researcher B lists, reads, exports, mints, shares, fills and closes A's survey: every
    answer is the 404 of an unknown survey, word for word but the id, and nothing changed."""
    survey_id = publish(client, auth, invitation_only=False)
    other = key_for(app, name="bob")
    for method, path, body in SURVEY_ENDPOINTS:
        theirs = client.open(path.format(survey_id), method=method, json=body, headers=other)
        unknown = client.open(path.format(UNKNOWN), method=method, json=body, headers=other)
        assert theirs.status_code == unknown.status_code == 404, (method, path, theirs.json)
        assert theirs.json["error"] == unknown.json["error"] == "unknown_survey"
        assert theirs.json["detail"].replace(survey_id, UNKNOWN) == unknown.json["detail"]
    assert client.get("/api/surveys", headers=other).json == {"surveys": []}
    assert client.get(f"/api/surveys/{survey_id}/status").json["status"] == "open"
    assert release_due(app) == 0  # nothing was stored in the pool either
    estimates = client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json
    assert estimates["questions"][0]["n"] == 0


def test_listing_shows_own_and_shared_surveys_and_an_admin_sees_all(app, client, auth):
    alice = auth
    bob = key_for(app, name="bob")
    admin = key_for(app, "admin", name="operator")
    mine, theirs = publish(client, alice), publish(client, bob)
    shared = publish(client, bob)
    assert client.put(f"/api/surveys/{shared}/shares/{name_of(app, alice)}",
                      headers=bob).status_code == 200

    def listed(headers):
        return {s["survey_id"] for s in client.get("/api/surveys", headers=headers).json["surveys"]}

    assert listed(alice) == {mine, shared}
    assert listed(bob) == {theirs, shared}
    assert listed(admin) == {mine, theirs, shared}


def name_of(app, headers) -> str:
    from ldpsurvey.aggregator.services import accounts
    from ldpsurvey.aggregator.web.request_connection import get_db

    key = headers["Authorization"].removeprefix("Bearer ")
    with app.app_context():
        record = accounts.key_in_use(get_db(), key)
        return get_db().query("SELECT name FROM researchers WHERE researcher_id = ?",
                              (record.researcher_id,))[0][0]


def test_a_shared_survey_can_be_read_but_only_its_owner_or_an_admin_controls_it(app, client,
                                                                                 auth):
    survey_id = publish(client, auth, invitation_only=True)
    bob = key_for(app, name="bob")
    shared = client.put(f"/api/surveys/{survey_id}/shares/bob", headers=auth)
    assert shared.status_code == 200 and shared.json["shared_with"] == ["bob"]
    again = client.put(f"/api/surveys/{survey_id}/shares/bob", headers=auth)
    assert again.json["shared_with"] == ["bob"]  # sharing twice changes nothing
    assert client.get(f"/api/surveys/{survey_id}/estimates", headers=bob).status_code == 200
    assert client.get(f"/api/surveys/{survey_id}/export.csv", headers=bob).status_code == 200
    for method, path, body in [("POST", "/api/surveys/{}/tokens", {"count": 1}),
                               ("POST", "/api/surveys/{}/close", None),
                               ("PUT", "/api/surveys/{}/shares/bob", None),
                               ("DELETE", "/api/surveys/{}/shares/bob", None),
                               ("GET", "/api/surveys/{}/shares", None)]:
        response = client.open(path.format(survey_id), method=method, json=body, headers=bob)
        assert response.status_code == 403, (method, path)
        assert "only the survey's owner or an admin" in response.json["detail"]
    admin = key_for(app, "admin")
    assert client.post(f"/api/surveys/{survey_id}/tokens", json={"count": 2},
                       headers=admin).status_code == 201
    assert client.get(f"/api/surveys/{survey_id}/shares", headers=admin).json["shared_with"] == [
        "bob"]
    unshared = client.delete(f"/api/surveys/{survey_id}/shares/bob", headers=auth)
    assert unshared.status_code == 200 and unshared.json["shared_with"] == []
    assert client.get(f"/api/surveys/{survey_id}/estimates", headers=bob).status_code == 404
    assert client.post(f"/api/surveys/{survey_id}/close", headers=admin).status_code == 200


def test_sharing_names_a_researcher_who_exists_and_is_not_the_owner(app, client, auth):
    survey_id = publish(client, auth)
    unknown = client.put(f"/api/surveys/{survey_id}/shares/nobody", headers=auth)
    assert unknown.status_code == 404 and unknown.json["error"] == "unknown_researcher"
    owner = client.put(f"/api/surveys/{survey_id}/shares/{name_of(app, auth)}", headers=auth)
    assert owner.status_code == 422 and owner.json["error"] == "invalid_share"


def test_public_results_stay_open_to_anyone_without_researcher_details(app, client, auth):
    survey_id = publish(client, auth, public_results=True)
    client.post(f"/api/surveys/{survey_id}/responses", json={"answers": ANSWERS})
    release_due(app)
    bob = key_for(app, name="bob")
    for headers in ({}, bob):
        body = client.get(f"/api/surveys/{survey_id}/estimates", headers=headers).json
        assert body["questions"][0]["n"] == 1 and "pending" not in body
    assert client.get(f"/api/surveys/{survey_id}/export.csv", headers=bob).status_code == 404
    assert "pending" not in client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).json


def stored(app, survey_id) -> int:
    from ldpsurvey.aggregator.web.request_connection import get_db

    with app.app_context():
        db = get_db()
        return sum(db.query(f"SELECT COALESCE({count}, 0) FROM {table} WHERE survey_id = ?",
                            (survey_id,))[0][0]
                   for count, table in (("SUM(size)", "pending"), ("COUNT(*)", "responses")))


def test_a_relay_key_fills_only_its_surveys(app, client, auth):
    ours, other = publish(client, auth), publish(client, auth)
    relay = key_for(app, "relay", surveys=(ours,))
    batch = {"responses": [{"answers": ANSWERS}] * 3}
    assert client.post(f"/api/surveys/{ours}/responses/batch", json=batch,
                       headers=relay).status_code == 201
    outside = client.post(f"/api/surveys/{other}/responses/batch", json=batch, headers=relay)
    assert outside.status_code == 403 and outside.json["error"] == "forbidden"
    assert (stored(app, ours), stored(app, other)) == (3, 0)
    for method, path, body in SURVEY_ENDPOINTS[:-2]:  # a relay key reads and controls nothing
        response = client.open(path.format(ours), method=method, json=body, headers=relay)
        assert response.status_code in (401, 403), (method, path)


def test_batches_are_refused_on_invitation_only_surveys_whoever_sends_them(app, client, auth):
    """The audit's attack: 10,000 'Yes' answers through a relay key without a token."""
    survey_id = publish(client, auth, invitation_only=True)
    yes = {"responses": [{"answers": ANSWERS}] * 10_000}
    for headers in (auth, key_for(app, "relay", surveys=(survey_id,)), key_for(app, "admin")):
        response = client.post(f"/api/surveys/{survey_id}/responses/batch", json=yes,
                               headers=headers)
        assert response.status_code == 403 and response.json["error"] == "invitation_only"
    assert stored(app, survey_id) == 0


def test_key_requests_are_checked(app, survey_id):
    from ldpsurvey.aggregator import DomainError

    for role, name, surveys, message in [
            ("relay", None, (), "needs the surveys"),
            ("researcher", None, (survey_id,), "only relay keys"),
            ("owner", None, (), "role must be one of"),
            ("researcher", "Alice Smith", (), "a name is 1 to 64"),
            ("relay", None, ("b" * 21,), "no survey with id")]:
        with pytest.raises(DomainError, match=message):
            key_for(app, role, name, surveys)
    with pytest.raises(DomainError, match="no researcher named 'nobody'"):
        key_for(app, name="nobody", existing=True)


def test_a_researcher_holds_several_keys_and_nobody_else_gets_their_name(app, client):
    from ldpsurvey.aggregator import DomainError

    first = key_for(app, name="carol")
    survey_id = publish(client, first)
    second = key_for(app, name="carol", existing=True)  # another key, asked for as such
    assert client.get(f"/api/surveys/{survey_id}/estimates", headers=second).status_code == 200
    revoke_all_keys_of(app, "carol")
    assert client.get("/api/surveys", headers=first).status_code == 401
    # An admin naming a new person "carol" is refused, not handed her surveys.
    with pytest.raises(DomainError, match="the name 'carol' is taken"):
        key_for(app, name="carol")
    third = key_for(app, name="carol", existing=True)
    assert client.get(f"/api/surveys/{survey_id}/estimates", headers=third).status_code == 200


def revoke_all_keys_of(app, name: str) -> None:
    from ldpsurvey.aggregator.services import accounts
    from ldpsurvey.aggregator.web.request_connection import get_db

    with app.app_context():
        for entry in accounts.list_keys(get_db()):
            if entry.name == name:
                accounts.revoke(get_db(), entry.api_key_id)


def test_keys_are_listed_with_their_days_and_revoked_at_once(app, client, auth):
    from ldpsurvey.aggregator import DomainError
    from ldpsurvey.aggregator.services import accounts
    from ldpsurvey.aggregator.store.connection import today
    from ldpsurvey.aggregator.web.request_connection import get_db

    survey_id = publish(client, auth)
    dave = key_for(app, name="dave")
    with app.app_context():
        listing = {entry.name: entry for entry in accounts.list_keys(get_db())}
    assert listing["dave"].role == "researcher" and listing["dave"].created == today()
    assert listing["dave"].last_used is None and listing["dave"].api_key_id.startswith("key-")
    assert client.get("/api/surveys", headers=dave).status_code == 200
    with app.app_context():
        listing = {entry.name: entry for entry in accounts.list_keys(get_db())}
        assert listing["dave"].last_used == today()
        accounts.revoke(get_db(), listing["dave"].api_key_id)
        with pytest.raises(DomainError, match="no API key with id"):
            accounts.revoke(get_db(), listing["dave"].api_key_id)
    assert client.get("/api/surveys", headers=dave).status_code == 401
    assert client.get(f"/api/surveys/{survey_id}/estimates", headers=auth).status_code == 200


# --- results-page sessions -----------------------------------------------------------------------

def log_in(client, survey_id: str, headers) -> None:
    page = client.get(f"/s/{survey_id}/results").get_data(as_text=True)
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    key = headers["Authorization"].removeprefix("Bearer ")
    response = client.post(f"/s/{survey_id}/login", data={"csrf": csrf, "key": key})
    assert response.status_code == 302 and "error" not in response.headers["Location"]


def logged_in(client, survey_id: str) -> bool:
    page = client.get(f"/s/{survey_id}/results")
    assert page.status_code == 200
    return "Log out" in page.get_data(as_text=True)


def test_a_copied_session_cookie_dies_with_logout(app, auth, survey_id):
    browser = app.test_client()
    log_in(browser, survey_id, auth)
    assert logged_in(browser, survey_id)
    cookie = browser.get_cookie("ldp_researcher").value
    thief = app.test_client()
    thief.set_cookie("ldp_researcher", cookie)
    assert thief.get(f"/api/surveys/{survey_id}/export.csv").status_code == 200
    csrf = re.search(r'name="csrf" value="([^"]+)"',
                     browser.get(f"/s/{survey_id}/results").get_data(as_text=True)).group(1)
    browser.post(f"/s/{survey_id}/logout", data={"csrf": csrf})
    assert not logged_in(thief, survey_id)
    assert thief.get(f"/api/surveys/{survey_id}/export.csv").status_code == 401


def test_revoking_a_key_ends_its_sessions(app, client, survey_id):
    from ldpsurvey.aggregator.services import accounts
    from ldpsurvey.aggregator.web.request_connection import get_db

    erin = key_for(app, "admin", name="erin")
    browser = app.test_client()
    log_in(browser, survey_id, erin)
    assert logged_in(browser, survey_id)
    with app.app_context():
        (entry,) = [e for e in accounts.list_keys(get_db()) if e.name == "erin"]
        accounts.revoke(get_db(), entry.api_key_id)
    assert not logged_in(browser, survey_id)


def test_sessions_expire(app, auth, survey_id, monkeypatch):
    from datetime import timedelta

    from ldpsurvey.aggregator.services import accounts

    browser = app.test_client()
    log_in(browser, survey_id, auth)
    start = accounts._now()
    monkeypatch.setattr(accounts, "_now", lambda: start + timedelta(hours=11, minutes=59))
    assert logged_in(browser, survey_id)
    monkeypatch.setattr(accounts, "_now", lambda: start + timedelta(hours=12))
    assert not logged_in(browser, survey_id)


def test_an_expired_session_is_deleted_at_the_next_login(app, auth, survey_id, monkeypatch):
    """An expired session leaves no row behind (a copy of the database shows who logged in
    when for no longer than a session lasts): the next login deletes it; a live one stays."""
    from datetime import timedelta

    from ldpsurvey.aggregator.services import accounts
    from ldpsurvey.aggregator.web.request_connection import get_db

    def sessions():
        with app.app_context():
            return get_db().query("SELECT COUNT(*) FROM sessions")[0][0]

    log_in(app.test_client(), survey_id, auth)
    start = accounts._now()
    monkeypatch.setattr(accounts, "_now", lambda: start + timedelta(hours=11))
    log_in(app.test_client(), survey_id, auth)  # the first is still live
    assert sessions() == 2
    monkeypatch.setattr(accounts, "_now", lambda: start + timedelta(hours=13))
    log_in(app.test_client(), survey_id, auth)  # the first has expired, the second not
    assert sessions() == 2
    monkeypatch.setattr(accounts, "_now", lambda: start + timedelta(hours=30))
    log_in(app.test_client(), survey_id, auth)
    assert sessions() == 1


def test_the_cookie_secret_alone_cannot_make_a_session(app, survey_id):
    """Whoever holds SECRET_KEY can sign any cookie: the old {"role": "researcher"} and a
    made-up session id both stay logged out."""
    from flask.sessions import SecureCookieSessionInterface

    serializer = SecureCookieSessionInterface().get_signing_serializer(app)
    for forged in ({"role": "researcher"}, {"sid": "x" * 43}):
        browser = app.test_client()
        browser.set_cookie("ldp_researcher", serializer.dumps(forged))
        assert not logged_in(browser, survey_id)
        assert browser.get(f"/api/surveys/{survey_id}/export.csv").status_code == 401


def test_a_logged_in_researcher_sees_only_their_surveys_pages(app, auth, survey_id):
    browser = app.test_client()
    frank = key_for(app, name="frank")
    log_in(browser, survey_id, frank)
    page = browser.get(f"/s/{survey_id}/results")
    unknown = browser.get(f"/s/{UNKNOWN}/results")
    assert page.status_code == unknown.status_code == 404
    assert page.get_data() == unknown.get_data()


def test_relay_keys_cannot_log_in(app, client, survey_id):
    relay = key_for(app, "relay", surveys=(survey_id,))
    page = client.get(f"/s/{survey_id}/results").get_data(as_text=True)
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    response = client.post(f"/s/{survey_id}/login", data={
        "csrf": csrf, "key": relay["Authorization"].removeprefix("Bearer ")})
    assert "error=1" in response.headers["Location"]


def test_logging_in_again_ends_the_earlier_session(app, auth, survey_id):
    browser = app.test_client()
    log_in(browser, survey_id, auth)
    thief = app.test_client()
    thief.set_cookie("ldp_researcher", browser.get_cookie("ldp_researcher").value)
    log_in(browser, survey_id, auth)
    assert not logged_in(thief, survey_id)
    assert logged_in(browser, survey_id)


def test_a_session_reads_with_head_too_but_never_writes(app, auth, survey_id):
    browser = app.test_client()
    log_in(browser, survey_id, auth)
    assert browser.head(f"/api/surveys/{survey_id}/export.csv").status_code == 200
    assert browser.post(f"/api/surveys/{survey_id}/close").status_code == 401


def test_a_public_results_page_shows_researcher_links_only_to_its_researchers(app, client,
                                                                              auth, survey_id):
    public = publish(client, auth, public_results=True)
    browser = app.test_client()
    log_in(browser, survey_id, key_for(app, name="gina"))  # a researcher of other surveys
    assert "Export CSV" not in browser.get(f"/s/{public}/results").get_data(as_text=True)
    owner = app.test_client()
    log_in(owner, survey_id, auth)
    assert "Export CSV" in owner.get(f"/s/{public}/results").get_data(as_text=True)


def test_logins_racing_a_revoke_never_keep_the_key_alive(app, survey_id):
    """A thief logs in over and over while the key is revoked: the revoke wins every time,
    and no login gets a server error or a session."""
    import threading

    from ldpsurvey.aggregator.services import accounts
    from ldpsurvey.aggregator.web.request_connection import get_db

    for attempt in range(5):
        headers = key_for(app, name=f"thief-{attempt}")
        key = headers["Authorization"].removeprefix("Bearer ")
        with app.app_context():
            (entry,) = [e for e in accounts.list_keys(get_db()) if e.name == f"thief-{attempt}"]
        stop, failures = threading.Event(), []
        threads = [threading.Thread(target=log_in_repeatedly, args=(app, key, stop, failures))
                   for _ in range(4)]
        for thread in threads:
            thread.start()
        try:
            with app.app_context():
                accounts.revoke(get_db(), entry.api_key_id)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        assert failures == []
        with app.app_context():
            assert accounts.key_in_use(get_db(), key) is None
            assert get_db().query("SELECT COUNT(*) FROM sessions WHERE api_key_id = ?",
                                  (entry.api_key_id,))[0][0] == 0


def log_in_repeatedly(app, key: str, stop, failures: list) -> None:
    from ldpsurvey.aggregator.services import accounts
    from ldpsurvey.aggregator.web.request_connection import get_db

    try:
        while not stop.is_set():
            with app.app_context():
                accounts.open_session(get_db(), key, 12)
    except Exception as exc:  # any error is the finding
        failures.append(exc)


def test_sharing_twice_at_once_is_no_error(app, auth, survey_id):
    from concurrent.futures import ThreadPoolExecutor

    key_for(app, name="hana")
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(
            lambda _: app.test_client().put(f"/api/surveys/{survey_id}/shares/hana",
                                            headers=auth).status_code, range(16)))
    assert statuses == [200] * 16


@pytest.mark.parametrize("count, status", [("2", 200), ("²", 422), ("٣", 422), ("9" * 5000, 422),
                                           ("", 422), ("-1", 422)])
def test_the_dashboards_token_count_is_checked_like_the_apis(app, client, auth, count, status):
    """The minting form's count is a whole number in ASCII digits or the API's 422: a
    superscript two or 5,000 digits (which int() refuses) used to be a 500."""
    from test_owner_fill import dashboard_session

    invited = client.post("/api/surveys", json={**SURVEY, "invitation_only": True},
                          headers=auth).json["survey_id"]
    dashboard_session(client, auth["Authorization"].removeprefix("Bearer "))
    page = client.get("/researcher").get_data(as_text=True)
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    response = client.post(f"/researcher/surveys/{invited}/tokens",
                           data={"csrf": csrf, "count": count})
    assert response.status_code == status
    if status == 200:
        assert response.get_data(as_text=True).count("#t=") == 2
