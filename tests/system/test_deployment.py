"""Proof of reliability with the real parts: gunicorn killed with SIGKILL mid-stream, two
replicas behind Debian's nginx on one PostgreSQL, and nginx's rate limit."""

import contextlib
import http.client
import random
import signal
import socket
import ssl
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from ldpsurvey.aggregator import close_app
from ldpsurvey.aggregator.web.request_connection import get_db
from ldpsurvey.shared import read_definition

from helpers import MEMCACHED, memcached_available, require
from processes import (
    NGINX,
    exchange,
    free_port,
    kill,
    production,
    released_all,
    request,
    response_head,
    start_gunicorn,
    start_nginx,
)

HEALTH = read_definition(Path(__file__).resolve().parents[2] / "shared" / "examples" /
                         "health.toml")
SIZES = {"smoked": 2, "drank_and_drove": 2, "cannabis": 2, "sleep": 3}


def random_answers(rng: random.Random) -> dict:
    return {"answers": {qid: rng.randrange(k) for qid, k in SIZES.items()}}


def stored_state(app, survey_id):
    """(responses stored, released or pending; counters == recount of the released rows;
    idempotency key hashes, released or pending; integrity check; responses pending)."""
    import json

    from ldpsurvey.aggregator.web.request_connection import get_db

    with app.app_context():
        db = get_db()
        rows = [json.loads(a) for (a,) in db.query(
            "SELECT answers FROM responses WHERE survey_id = ?", (survey_id,))]
        pending = db.query("SELECT COALESCE(SUM(size), 0) FROM pending WHERE survey_id = ?",
                           (survey_id,))[0][0]
        counters = {(q, j): int(c) for q, j, c in db.query(
            "SELECT question_id, option_index, count FROM counts WHERE survey_id = ?",
            (survey_id,))}
        found = [h for (h,) in db.query(  # a pending group keeps its claim until released
            "SELECT key_hash FROM idempotency_keys WHERE survey_id = ? UNION ALL "
            "SELECT key_hash FROM pending WHERE survey_id = ? AND key_hash IS NOT NULL",
            (survey_id, survey_id))]
        keys = set(found)
        assert len(keys) == len(found)  # no key both pending and released
        integrity = None if db.dialect == "postgresql" else db.query("PRAGMA integrity_check")[0][0]
    recount = Counter((q, j) for row in rows for q, j in row.items())
    consistent = all(counters[k] == recount.get(k, 0) for k in counters)
    return len(rows) + pending, consistent, keys, integrity, pending


def test_kill_9_mid_stream_loses_no_acknowledged_answer(tmp_path, database_url):
    env, key, app = production(tmp_path, database_url)
    port = free_port()
    server = start_gunicorn(env, port, tmp_path / "gunicorn.log")
    base = f"http://127.0.0.1:{port}"
    status, created = request("POST", f"{base}/api/surveys", HEALTH,
                              {"Authorization": f"Bearer {key}"})
    assert status == 201
    survey_id = created["survey_id"]
    sent: list[tuple[str, dict, bool]] = []
    lock, stop = threading.Lock(), threading.Event()

    def client(number: int) -> None:
        rng = random.Random(number)
        for n in range(100_000):
            if stop.is_set():
                return
            body, idempotency_key = random_answers(rng), f"crash-{number}-{n:06d}"
            try:
                status, _ = request("POST", f"{base}/api/surveys/{survey_id}/responses", body,
                                    {"Idempotency-Key": idempotency_key}, timeout=5)
                acknowledged = status == 201
            except (OSError, http.client.HTTPException):  # e.g. a response cut off mid-way
                acknowledged = False
            with lock:
                sent.append((idempotency_key, body, acknowledged))
            if not acknowledged:
                return

    threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    time.sleep(2.0)
    kill(server, signal.SIGKILL)  # master and workers, mid-stream
    stop.set()
    for thread in threads:
        thread.join()
    acknowledged = [(k, b) for k, b, ok in sent if ok]
    unacknowledged = [(k, b) for k, b, ok in sent if not ok]
    assert len(acknowledged) >= 100 and unacknowledged

    server = start_gunicorn(env, port, tmp_path / "gunicorn.log")
    try:
        stored, consistent, key_hashes, integrity, _ = stored_state(app, survey_id)
        keys = app.extensions["ldp_database"].keys
        assert {keys.idempotency_id(k) for k, _ in acknowledged} <= key_hashes  # all acks kept
        assert stored == len(key_hashes) and consistent
        assert integrity in (None, "ok")
        # Retrying every unacknowledged submission with its key never double counts.
        for idempotency_key, body in unacknowledged + acknowledged[:20]:
            status, _ = request("POST", f"{base}/api/surveys/{survey_id}/responses", body,
                                {"Idempotency-Key": idempotency_key})
            assert status == 201
        stored, consistent, key_hashes, integrity, pending = stored_state(app, survey_id)
        assert stored == len(sent) == len(key_hashes) and consistent
        assert integrity in (None, "ok")
        # What was pending when the server died is released with the rest at close.
        assert request("POST", f"{base}/api/surveys/{survey_id}/close", None,
                       {"Authorization": f"Bearer {key}"})[0] == 200
        released, consistent, _, _, left = stored_state(app, survey_id)
        assert released == len(sent) and left == 0 and consistent
    finally:
        kill(server)
        close_app(app)
    print(f"\nkill -9 on {database_url.split(':')[0]}: {len(acknowledged)} acknowledged, "
          f"all stored; {len(unacknowledged)} unacknowledged retried; {stored} stored in all, "
          f"{pending} of them pending until the close released them")


@pytest.fixture
def nginx_available():
    require(Path(NGINX).exists(), "nginx is not installed (apt-get install nginx-light)")


@contextlib.contextmanager
def replicas_behind_nginx(tmp_path, database_url, rate=None, rsa_key=False, settings=None):
    """Two production replicas on one database behind nginx with the shipped config, each
    named in a Served-By header (replica-PORT), with `settings` added to their environment;
    yields (https base URL, researcher key, checker app, replica ports, plain-HTTP base URL)."""
    env, key, app = production(tmp_path, database_url)
    env |= settings or {}
    ports = [free_port(), free_port()]
    replicas = [start_gunicorn({**env, "LDP_SURVEY_SERVED_BY": f"replica-{p}"}, p,
                               tmp_path / f"replica-{p}.log") for p in ports]
    proxy, base, plain = start_nginx(tmp_path, ports, rate=rate, rsa_key=rsa_key)
    try:
        yield base, key, app, ports, plain
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)
        for replica in replicas:
            kill(replica)
        close_app(app)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_two_replicas_behind_nginx_on_postgresql(tmp_path, database_url, nginx_available):
    with replicas_behind_nginx(tmp_path, database_url, rate="100000r/s") as (base, key, app,
                                                                             ports, _):
        auth = {"Authorization": f"Bearer {key}"}
        _, created = request("POST", f"{base}/api/surveys", HEALTH, auth)
        survey_id = created["survey_id"]
        keys = {str(request("GET", f"{base}/api/key")[1]) for _ in range(10)}
        assert len(keys) == 1  # both replicas serve the same signing key
        per_client = 60
        answers = [random_answers(random.Random(i)) for i in range(8 * per_client)]

        served_by: Counter = Counter()

        def client(number: int) -> None:
            for n in range(per_client):
                index = number * per_client + n
                status, body, headers = exchange(
                    "POST", f"{base}/api/surveys/{survey_id}/responses", answers[index],
                    {"Idempotency-Key": f"scale-{index:06d}"})
                assert status == 201, (status, body)
                served_by[headers["Served-By"]] += 1

        threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # Closing releases the last, smaller batch: then every response counts.
        assert request("POST", f"{base}/api/surveys/{survey_id}/close", None, auth)[0] == 200
        _, estimates = request("GET", f"{base}/api/surveys/{survey_id}/estimates",
                               headers=auth)
        expected = Counter((q, j) for a in answers for q, j in a["answers"].items())
        for question in estimates["questions"]:
            assert question["n"] == len(answers)
            for option in question["options"]:
                assert option["reported_count"] == expected[(question["id"], option["index"])]
        # a single process given the same answers estimates exactly the same
        single = app.test_client()
        single_id = single.post("/api/surveys", json=HEALTH, headers=auth).json["survey_id"]
        single.post(f"/api/surveys/{single_id}/responses/batch",
                    json={"responses": answers}, headers=auth)
        single.post(f"/api/surveys/{single_id}/close", headers=auth)
        reference = single.get(f"/api/surveys/{single_id}/estimates", headers=auth).json
        assert [q["options"] for q in estimates["questions"]] == \
            [q["options"] for q in reference["questions"]]
        # both replicas took part, as their Served-By headers show (no log line says so)
        assert set(served_by) == {f"replica-{port}" for port in ports}
        assert min(served_by.values()) > 10, served_by
        request("GET", f"{base}/healthz?who=secret-query-value")
        access = (tmp_path / "ldp-survey.access.log").read_text()
        assert "secret-query-value" not in access and "127.0.0.1" not in access
        assert '"POST /api/surveys" 201' in access  # other requests are logged
        assert "/responses" not in access
        for port in ports:
            assert "/responses" not in (tmp_path / f"replica-{port}.log").read_text()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_replicas_release_each_pool_once_at_their_scheduled_instants(tmp_path, database_url,
                                                                      nginx_available):
    """Two replicas of two workers: four release clocks firing at the same instants (every
    0.2 s) while eight clients answer through nginx. Every response is released exactly once
    (no close): the released rows are those sent, the counters recount them, every release
    recorded took at least the survey's release_batch, and only a last pool below it waits."""
    survey = {**HEALTH, "release_batch": 5}
    with replicas_behind_nginx(tmp_path, database_url, rate="100000r/s",
                               settings={"LDP_SURVEY_RELEASE_EVERY": "0.2"}) as (base, key,
                                                                                 app, *_):
        auth = {"Authorization": f"Bearer {key}"}
        survey_id = request("POST", f"{base}/api/surveys", survey, auth)[1]["survey_id"]
        per_client = 60
        answers = [random_answers(random.Random(i)) for i in range(8 * per_client)]
        statuses: Counter = Counter()

        def client(number: int) -> None:
            for index in range(number * per_client, (number + 1) * per_client):
                statuses[request("POST", f"{base}/api/surveys/{survey_id}/responses",
                                 answers[index], {"Idempotency-Key": f"clock-{index:06d}"})[0]] += 1

        threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert statuses == {201: len(answers)}
        # Once all but a last pool below the batch of 5 is released, no release is left to
        # come: the state is final.
        released = released_all(base, survey_id, key, len(answers) - 4)
        stored, consistent, _, _, pending = stored_state(app, survey_id)
        assert consistent and stored == len(answers)
        assert released == len(answers) - pending and pending < 5
        with app.app_context():
            sizes = [size for (size,) in get_db().query(
                "SELECT size FROM releases WHERE survey_id = ?", (survey_id,))]
        assert sum(sizes) == released and min(sizes) >= 5 and len(sizes) > 1, sizes
        assert request("GET", f"{base}/api/surveys/{survey_id}/status")[1]["status"] == "open"


def from_address(base: str, source: str, path: str) -> int:
    """The status of GET `path` sent from the loopback address `source` (another client)."""
    address = urlsplit(base)
    connection = http.client.HTTPSConnection(address.hostname, address.port, timeout=10,
                                             source_address=(source, 0),
                                             context=ssl._create_unverified_context())
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    finally:
        connection.close()


def test_nginx_rate_limits_per_client(tmp_path, nginx_available):
    """The shipped burst (20 beyond the first request) at a rate so low (1 a minute) that the
    bucket cannot refill during the flood unless it lasts minutes: a client flooding from a
    fresh address gets exactly 21 answers, plus one per whole minute the flood took, however
    loaded the machine; the assets under content-addressed names are never counted, before or
    after its limit; another address keeps its own bucket."""
    from ldpsurvey.aggregator.web.assets import bundle

    shipped = (Path(__file__).resolve().parents[2] / "deploy" / "nginx" /
               "ldp-survey.conf").read_text()
    assert "rate=10r/s;" in shipped and "burst=20 nodelay;" in shipped
    asset = f"/web/{bundle().digest}/form.js"
    with replicas_behind_nginx(tmp_path, f"sqlite:///{tmp_path}/rate.sqlite3",
                               rate="1r/m") as (base, *_):
        assets = Counter(from_address(base, "127.0.0.2", asset) for _ in range(40))
        started = time.monotonic()
        statuses = Counter(from_address(base, "127.0.0.2", "/healthz") for _ in range(60))
        minutes = int((time.monotonic() - started) // 60)
        assert 21 <= statuses[200] <= 21 + minutes and statuses[429] == 60 - statuses[200], \
            statuses
        assets += Counter(from_address(base, "127.0.0.2", asset) for _ in range(40))
        assert assets == {200: 80}
        assert from_address(base, "127.0.0.3", "/healthz") == 200
        assert from_address(base, "127.0.0.2", "/web/0123456789abcdef/../../healthz") == 429
        status, _ = request("POST", f"{base}/api/surveys/x/responses/batch",
                            {"pad": "x" * (17 * 2**20)})
        assert status == 413  # nginx's client_max_body_size, before any replica


def test_replicas_behind_nginx_share_one_rate_limit_through_memcached(tmp_path, nginx_available):
    """The deployment of deploy/: two replicas of two workers each, behind nginx, counting in
    one memcached. A client flooding through nginx gets the limit once in all, whichever
    process answers, then 429 with Retry-After from both replicas (with memory:// it would get
    it once per process, 4 times)."""
    require(memcached_available(), f"no memcached at {MEMCACHED[0]}:{MEMCACHED[1]}")
    settings = {"LDP_SURVEY_RATE_LIMIT_STORAGE": f"memcached://{MEMCACHED[0]}:{MEMCACHED[1]}",
                "LDP_SURVEY_RATE_LIMIT_OTHER": "6 per minute"}
    with replicas_behind_nginx(tmp_path, f"sqlite:///{tmp_path}/shared.sqlite3",
                               rate="100000r/s", settings=settings) as (base, *_):
        replies = [exchange("GET", f"{base}/api/key") for _ in range(30)]
    assert [status for status, _, _ in replies] == [200] * 6 + [429] * 24
    for _, body, headers in replies[6:]:
        assert body["error"] == "rate_limited" and "6 per 1 minute" in body["detail"]
        assert 1 <= int(headers["Retry-After"]) <= 61
    assert len({headers["Served-By"] for _, _, headers in replies}) == 2


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    """The shipped nginx config with an RSA certificate (so that a client can offer suites
    without forward secrecy at all) before two replicas on SQLite, shared by the tests below;
    yields (https base URL, researcher key, checker app, replica ports, plain-HTTP base URL)."""
    require(Path(NGINX).exists(), "nginx is not installed (apt-get install nginx-light)")
    folder = tmp_path_factory.mktemp("proxy")
    with replicas_behind_nginx(folder, f"sqlite:///{folder}/proxy.sqlite3", rate="100000r/s",
                               rsa_key=True) as running:
        yield running


def test_plain_http_redirect_never_decodes_the_path(proxy):
    *_, plain = proxy
    status, fields = response_head(plain, b"GET /%0d%0aSet-Cookie:%20x=1?who=secret HTTP/1.1\r\n"
                                          b"Host: survey.example.org\r\nConnection: close\r\n\r\n")
    assert status.startswith("HTTP/1.1 301"), status
    assert "set-cookie" not in dict(fields), fields  # no header injected by a decoded CR LF
    # the path still percent-encoded, as sent, and no query string
    assert dict(fields)["location"] == "https://survey.example.org/%0d%0aSet-Cookie:%20x=1"
    assert dict(fields)["server"] == "nginx"


def test_nginx_drops_a_client_sent_forwarded_prefix(proxy):
    base, key, *_ = proxy
    # The app's ProxyFix trusts one X-Forwarded-Prefix: only nginx may set it (to nothing).
    # (gunicorn would take a SCRIPT_NAME header from nginx's address; nginx drops header names
    # with underscores.)
    headers = {"Authorization": f"Bearer {key}", "X-Forwarded-Prefix": "/evil",
               "SCRIPT_NAME": "/evil"}
    status, created, received = exchange("POST", f"{base}/api/surveys",
                                         {**HEALTH, "invitation_only": True}, headers)
    assert status == 201, created
    survey_id = created["survey_id"]
    assert created["manifest_url"] == received["Location"]
    assert created["manifest_url"].startswith(f"/api/surveys/{survey_id}")
    status, minted, _ = exchange("POST", f"{base}/api/surveys/{survey_id}/tokens",
                                 {"count": 1}, headers)
    assert status == 201, minted
    assert urlsplit(minted["links"][0]).path == f"/s/{survey_id}"


def test_nginx_names_no_version_and_pins_https_with_subdomains(proxy):
    base, *_ = proxy
    for path in ("/healthz", "/api/surveys/nope"):
        _, _, headers = exchange("GET", base + path)
        assert headers["Server"] == "nginx"  # no version
        assert headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"


def tls12_cipher(url: str, ciphers: str) -> str:
    """The suite a TLS 1.2 handshake offering only `ciphers` agrees on (ssl.SSLError if none)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # our own self-signed test certificate
    context.minimum_version = context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(ciphers)
    address = urlsplit(url)
    with socket.create_connection((address.hostname, address.port), timeout=5) as sock, \
            context.wrap_socket(sock) as tls:
        assert tls.version() == "TLSv1.2"
        return tls.cipher()[0]


def test_tls_1_2_only_with_forward_secret_aead_suites(proxy):
    base, *_ = proxy
    for suite in ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384",
                  "ECDHE-RSA-CHACHA20-POLY1305"):
        assert tls12_cipher(base, suite) == suite
    # RSA key exchange (no forward secrecy), and ECDHE with CBC: no handshake
    for suites in ("AES128-GCM-SHA256:AES256-GCM-SHA384:AES128-SHA:AES256-SHA",
                   "ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA384"):
        with pytest.raises(ssl.SSLError):
            tls12_cipher(base, suites)


def test_nginx_body_limits_per_endpoint(proxy):
    base, key, *_ = proxy
    auth = {"Authorization": f"Bearer {key}"}
    # One response: 64 KiB, the app's MAX_RESPONSE_BYTES, refused by nginx (no replica's
    # Served-By header) before any replica reads it.
    status, _, headers = exchange("POST", f"{base}/api/surveys/x/responses",
                                  {"pad": "x" * (70 * 2**10)})
    assert status == 413 and "Served-By" not in headers
    # Batches (and survey definitions) up to 16 MiB reach a replica.
    for path in ("/api/surveys/x/responses/batch", "/api/surveys"):
        status, _, headers = exchange("POST", base + path, {"pad": "x" * 2**20}, auth)
        assert status != 413 and "Served-By" in headers, (path, status)
    # Anything else: 1 MiB.
    status, _, headers = exchange("POST", f"{base}/api/surveys/x/tokens",
                                  {"pad": "x" * (2 * 2**20)}, auth)
    assert status == 413 and "Served-By" not in headers


@pytest.mark.parametrize("length, source", [(9000, "gunicorn"), (20000, "nginx")])
def test_an_over_long_request_line_is_refused_in_json_with_the_apps_headers(proxy, length,
                                                                             source):
    """Over gunicorn's bound (8,190 bytes) the line reaches gunicorn, which refuses it in the
    app's JSON; over nginx's buffers (16 KiB) nginx refuses it itself, the same way."""
    from ldpsurvey.aggregator.web.security import HEADERS

    base, *_ = proxy
    pad = "x" * (length - len("GET /api/surveys/nope?pad= HTTP/1.1"))
    status, body, headers = exchange("GET", f"{base}/api/surveys/nope?pad={pad}")
    assert (status, body["error"]) == (414, "request_line_too_long"), (source, body)
    assert headers["Content-Type"] == "application/json"
    for name, value in HEADERS.items():
        assert headers[name] == value, name
    assert ("Served-By" in headers) == (source == "gunicorn")
    assert exchange("GET", f"{base}/request-line-too-long")[0] == 404  # nginx's own, inside
