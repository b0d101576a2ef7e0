"""Attacks on per-client rate limits (limits.py): a flood from one client gets 429 with
Retry-After, in its class of endpoints only, on every replica sharing the limit's storage, and
no address reaches the storage or a log. These apps have the real default limits (conftest.py
sets the rest of the suite's out of reach)."""

import logging
import secrets
from importlib import resources

import pytest

from ldpsurvey.aggregator import DEFAULTS, ConfigurationError, close_app, create_api_key, create_app
from ldpsurvey.aggregator.web.limits import SETTINGS, client_key
from ldpsurvey.shared import read_definition

from helpers import MEMCACHED, SURVEY, memcached_available, require

ATTACKER = "203.0.113.7"
NEIGHBOUR = "198.51.100.20"


@pytest.fixture
def make_app(tmp_path):
    """Apps with the default limits and `config`, on one SQLite file; closed at the end."""
    apps = []

    def make(**config):
        defaults = {name: DEFAULTS[name] for name in SETTINGS.values()}
        app = create_app({"DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", **defaults,
                          **config}, instance_path=tmp_path / "instance")
        apps.append(app)
        return app

    yield make
    for app in apps:
        close_app(app)


def public_survey(app) -> tuple[str, dict]:
    auth = {"Authorization": f"Bearer {create_api_key(app).key}"}
    response = app.test_client().post("/api/surveys", json={**SURVEY, "public_results": True},
                                      headers=auth)
    assert response.status_code == 201, response.json
    return response.json["survey_id"], auth


def client_at(app, address: str):
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    return client


def assert_limited(response, name: str, limit: str, json: bool = True) -> None:
    """What a client over a limit gets: 429 naming the class, its setting and the limit, and
    a Retry-After of whole seconds within the window."""
    assert response.status_code == 429
    assert 1 <= int(response.headers["Retry-After"]) <= 61
    text = (f"too many {name} requests from this client: the limit is {limit} "
            f"({SETTINGS[name]})")
    if json:
        assert response.json["error"] == "rate_limited"
        assert response.json["detail"].startswith(text)
    else:
        assert "Too many requests" in response.get_data(as_text=True)


def test_a_flood_of_anonymous_results_requests_gets_429_with_retry_after(make_app):
    """The attack: one anonymous client asks a public survey's estimates, cross-tabs and
    results page over and over. It gets its 60 per minute, then 429 on all three, while the
    same client may still answer and another client still reads."""
    app = make_app()
    survey_id, _ = public_survey(app)
    attacker = client_at(app, ATTACKER)
    estimates = f"/api/surveys/{survey_id}/estimates"
    for _ in range(60):
        assert attacker.get(estimates).status_code == 200
    assert_limited(attacker.get(estimates), "results", "60 per 1 minute")
    assert_limited(attacker.get(f"/api/surveys/{survey_id}/crosstab?rows=smoked&cols=sleep"),
                   "results", "60 per 1 minute")
    assert_limited(attacker.get(f"/s/{survey_id}/results"), "results", "60 per 1 minute",
                   json=False)
    answer = attacker.post(f"/api/surveys/{survey_id}/responses",
                           json={"answers": {"smoked": 0, "drove": 1, "sleep": 2}})
    assert answer.status_code == 201
    assert client_at(app, NEIGHBOUR).get(estimates).status_code == 200
    assert attacker.get("/healthz").status_code == 200


def _submit(client, survey_id, auth):
    return client.post(f"/api/surveys/{survey_id}/responses",
                       json={"answers": {"smoked": 0, "drove": 1, "sleep": 2}})


def _researcher(client, survey_id, auth):
    return client.get("/api/surveys", headers=auth)


def _login(client, survey_id, auth):
    return client.post(f"/s/{survey_id}/login", data={"key": "ldp_res_wrong"})


def _other(client, survey_id, auth):
    return client.get(f"/api/surveys/{survey_id}")


@pytest.mark.parametrize("name, request_once, json", [
    ("submit", _submit, True), ("researcher", _researcher, True), ("login", _login, False),
    ("other", _other, True)])
def test_every_class_passes_under_its_default_limit_and_refuses_over_it(make_app, name,
                                                                        request_once, json):
    app = make_app()
    survey_id, auth = public_survey(app)
    client = client_at(app, ATTACKER)
    amount = int(DEFAULTS[SETTINGS[name]].split()[0])
    for _ in range(amount):
        assert request_once(client, survey_id, auth).status_code != 429
    assert_limited(request_once(client, survey_id, auth), name, f"{amount} per 1 minute", json)


@pytest.mark.parametrize("enabled", [False, "false"])
def test_limits_disabled_let_a_flood_through(make_app, monkeypatch, enabled):
    """RATE_LIMITS_ENABLED false, by setting or environment: no 429 ever."""
    if enabled == "false":
        monkeypatch.setenv("LDP_SURVEY_RATE_LIMITS_ENABLED", enabled)
        app = make_app()
    else:
        app = make_app(RATE_LIMITS_ENABLED=enabled)
    assert app.config["RATE_LIMITS_ENABLED"] is False
    survey_id, _ = public_survey(app)
    attacker = client_at(app, ATTACKER)
    for _ in range(70):
        assert attacker.get(f"/api/surveys/{survey_id}/estimates").status_code == 200
    submit = int(DEFAULTS["RATE_LIMIT_SUBMIT"].split()[0])
    for _ in range(submit + 5):  # submissions are counted outside Flask (submissions.py)
        assert _submit(attacker, survey_id, None).status_code == 201


@pytest.mark.parametrize("hops", [0, 1])
def test_a_forged_forwarded_address_escapes_no_limit(make_app, hops):
    """Behind PROXY_HOPS proxies the client is the address they forward; without a proxy a
    forged X-Forwarded-For changes nothing, so rotating it does not reset the limit."""
    app = make_app(PROXY_HOPS=hops, RATE_LIMIT_OTHER="3 per minute")
    client = client_at(app, ATTACKER)
    statuses = [client.get("/api/key", headers={"X-Forwarded-For": f"192.0.2.{i}"}).status_code
                for i in range(6)]
    assert statuses == ([200] * 6 if hops else [200] * 3 + [429] * 3)


def test_no_address_reaches_the_limit_storage_or_a_log(make_app, caplog):
    """The storage holds an HMAC of the address under SECRET_KEY; neither it nor any log
    line holds the address, in any common spelling."""
    app = make_app(PROXY_HOPS=1, RATE_LIMIT_OTHER="2 per minute")
    client = client_at(app, "127.0.0.1")
    with caplog.at_level(logging.DEBUG):
        for _ in range(3):
            client.get("/api/key", headers={"X-Forwarded-For": ATTACKER})
    keys = list(app.extensions["ldp_limiter"].storage.storage)
    with app.test_request_context(environ_base={"REMOTE_ADDR": ATTACKER}):
        hashed = client_key()
    assert keys and all(hashed in key for key in keys)
    spellings = (ATTACKER, ATTACKER.replace(".", ""), ATTACKER.encode().hex(), "127.0.0.1")
    logged = " ".join(record.getMessage() for record in caplog.records)
    assert not [s for s in spellings if s in " ".join(keys) or s in logged]
    assert hashed in logged  # the breach is logged under the hash only


def test_no_address_reaches_the_storage_or_a_log_from_a_flood_of_submissions(make_app, caplog):
    """The same attack on submissions, which submissions.py counts (limits.hit): hashed in
    the storage and in the breach's log line, the address nowhere."""
    app = make_app(PROXY_HOPS=1, RATE_LIMIT_SUBMIT="2 per minute")
    survey_id, _ = public_survey(app)
    client = client_at(app, "127.0.0.1")
    with caplog.at_level(logging.DEBUG):
        statuses = [client.post(f"/api/surveys/{survey_id}/responses",
                                json={"answers": {"smoked": 0, "drove": 1, "sleep": 2}},
                                headers={"X-Forwarded-For": ATTACKER}).status_code
                    for _ in range(3)]
    assert statuses == [201, 201, 429]
    keys = list(app.extensions["ldp_limiter"].storage.storage)  # and the survey's creation's
    with app.test_request_context(environ_base={"REMOTE_ADDR": ATTACKER}):
        hashed = client_key()
    assert [key for key in keys if hashed in key] == [
        f"LIMITER/ldp-survey/{hashed}/submit/2/1/minute"]
    spellings = (ATTACKER, ATTACKER.replace(".", ""), ATTACKER.encode().hex(), "127.0.0.1")
    logged = " ".join(record.getMessage() for record in caplog.records)
    assert not [s for s in spellings if s in " ".join(keys) or s in logged]
    assert hashed in logged


def test_an_unreachable_limit_storage_lets_submissions_through_and_says_so(make_app, caplog):
    """As the limiter does for Flask's endpoints (swallow_errors): a memcached that is down
    refuses no respondent; the failure is logged by its type."""
    app = make_app(RATE_LIMIT_SUBMIT="1 per minute", RATE_LIMIT_STORAGE="memcached://127.0.0.1:9")
    survey_id, _ = public_survey(app)
    with caplog.at_level(logging.ERROR):
        statuses = {_submit(client_at(app, ATTACKER), survey_id, None).status_code
                    for _ in range(3)}
    assert statuses == {201}
    assert "rate limit storage failed" in caplog.text


def test_two_replicas_sharing_memcached_share_one_limit(make_app, tmp_path):
    """Two app instances with one SECRET_KEY and memcached://: a client gets the limit once
    over both, not once per replica; with memory:// each replica counts alone."""
    require(memcached_available(), f"no memcached at {MEMCACHED[0]}:{MEMCACHED[1]}")
    secret = secrets.token_hex(32)  # a fresh key: fresh counters in the shared memcached
    shared = {"SECRET_KEY": secret, "RATE_LIMIT_OTHER": "5 per minute",
              "RATE_LIMIT_STORAGE": f"memcached://{MEMCACHED[0]}:{MEMCACHED[1]}"}
    first, second = (client_at(make_app(**shared), ATTACKER) for _ in range(2))
    assert [first.get("/api/key").status_code for _ in range(3)] == [200] * 3
    assert [second.get("/api/key").status_code for _ in range(3)] == [200, 200, 429]
    assert first.get("/api/key").status_code == 429
    apart = {**shared, "RATE_LIMIT_STORAGE": "memory://"}
    first, second = (client_at(make_app(**apart), ATTACKER) for _ in range(2))
    assert [first.get("/api/key").status_code for _ in range(5)] == [200] * 5
    assert [second.get("/api/key").status_code for _ in range(5)] == [200] * 5


@pytest.mark.parametrize("name, value, expected", [
    ("RATE_LIMIT_RESULTS", "lots", "limits such as"),
    ("RATE_LIMIT_LOGIN", "", "limits such as"),
    ("RATE_LIMIT_SUBMIT", 60, "text"),
    ("RATE_LIMIT_STORAGE", "redis://127.0.0.1:6379", "memory:// or memcached://HOST:PORT"),
    ("RATE_LIMIT_STORAGE", "file:///var/lib/limits", "memory:// or memcached://HOST:PORT"),
    ("RATE_LIMITS_ENABLED", "yes", "true or false"),
])
def test_a_bad_limit_setting_is_refused_at_start_naming_it(make_app, name, value, expected):
    with pytest.raises(ConfigurationError) as refused:
        make_app(**{name: value})
    assert f"setting {name} (LDP_SURVEY_{name}) must be" in str(refused.value)
    assert expected in str(refused.value)


def test_a_shared_address_loads_the_form_for_three_limited_requests_each(make_app, browser):
    """Respondents behind one address (a school, a proxy, a carrier's NAT) each open the form
    in a fresh browser: it costs three requests of the `other` class (the page, its manifest,
    the survey's status); the stylesheet and every module, under content-addressed names, are
    cached for good and not counted. With RATE_LIMIT_OTHER at 6 per minute two respondents
    load the whole form (before: 14 requests each), and a third is refused the page."""
    import threading

    from werkzeug.serving import make_server

    from ldpsurvey.aggregator.web.assets import IMMUTABLE, bundle

    app = make_app(RATE_LIMIT_OTHER="6 per minute")
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01},
                     daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    app.config["PUBLIC_URL"] = base  # signed into the survey: the form answers only here
    health = read_definition(resources.files("ldpsurvey.shared") / "examples" / "health.toml")
    survey_id = app.test_client().post("/api/surveys", json=health, headers={
        "Authorization": f"Bearer {create_api_key(app).key}"}).json["survey_id"]
    immutable = f"{base}/web/{bundle().digest}/"
    try:
        for respondent in range(3):
            context = browser.new_context()
            page = context.new_page()
            responses = []
            page.on("response", lambda response, kept=responses: kept.append(response))
            first = page.goto(f"{base}/s/{survey_id}")
            if respondent == 2:
                assert first.status == 429
                break
            page.wait_for_selector("#questions:not([hidden])")
            limited = sorted(r.url[len(base):] for r in responses
                             if not r.url.startswith(immutable))
            assets = [r for r in responses if r.url.startswith(immutable)]
            assert limited == [f"/api/surveys/{survey_id}", f"/api/surveys/{survey_id}/status",
                               f"/s/{survey_id}"]
            assert {r.url.rsplit("/", 1)[1] for r in assets} >= {"form.js", "randomizer.js",
                                                                "schemes.js", "style.css"}
            assert all(r.status == 200 and r.headers["cache-control"] == IMMUTABLE
                       for r in assets)
            context.close()
    finally:
        context.close()
        server.shutdown()
