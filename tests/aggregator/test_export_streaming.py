"""Exports stream in constant memory, in a random order that owes nothing to arrival, with
exactly the stored responses, read from one snapshot while releases go on."""

import json
import math
import random
import threading
import time
import urllib.request
from collections import Counter

from helpers import release_due
from processes import free_port, kill, production, released_all, start_gunicorn

FOUR = {"title": "Four", "release_batch": 10_000, "questions": [
    {"id": f"q{i}", "text": "?", "type": "yes_no", "alpha": 0.5} for i in range(4)]}


def post(url: str, body: dict, key: str) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.load(response)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def the_worker(master: int) -> int:
    """gunicorn's one worker: the master's child."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{master}/task/{master}/children") as children:
            pids = [int(pid) for pid in children.read().split()]
        if pids:
            return pids[0]
        time.sleep(0.05)
    raise TimeoutError("no gunicorn worker")


def test_an_export_of_200000_responses_streams_in_constant_memory(tmp_path, database_url):
    """The server's worker, sampled every few milliseconds while it exports 200,000
    responses: its resident memory grows by less than 50 MB (loading them all, as before,
    took about 560 bytes a row: 110 MB here), and the rows are exactly those sent."""
    env, key, app = production(tmp_path, database_url)
    env["LDP_SURVEY_RELEASE_EVERY"] = "0.2"  # the server's own clock releases each batch
    port = free_port()
    server = start_gunicorn(env, port, tmp_path / "gunicorn.log", workers=1)
    try:
        base = f"http://127.0.0.1:{port}"
        survey_id = post(f"{base}/api/surveys", FOUR, key)["survey_id"]
        rng, sent = random.Random(17), Counter()
        for _ in range(20):
            batch = [tuple(rng.randrange(2) for _ in range(4)) for _ in range(10_000)]
            sent.update(batch)
            post(f"{base}/api/surveys/{survey_id}/responses/batch", {"responses": [
                {"answers": {f"q{i}": row[i] for i in range(4)}} for row in batch]}, key)
        assert released_all(base, survey_id, key, 200_000) == 200_000
        worker = the_worker(server.pid)
        before, peak, done = rss_bytes(worker), [0], threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], rss_bytes(worker))
                time.sleep(0.005)

        sampler = threading.Thread(target=sample)
        sampler.start()
        exported = Counter()
        request = urllib.request.Request(f"{base}/api/surveys/{survey_id}/export.csv?codes=true",
                                         headers={"Authorization": f"Bearer {key}"})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                for line in response:
                    if not line.startswith((b"#", b"q0")):
                        exported[tuple(int(v) for v in line.split(b","))] += 1
        finally:
            done.set()
            sampler.join()
        assert exported == sent
        growth = peak[0] - before
        print(f"\nexport of 200,000 rows: worker RSS {before / 2**20:.0f} MB, peak "
              f"{peak[0] / 2**20:.0f} MB (+{growth / 2**20:.1f} MB)")
        assert growth < 50 * 2**20
    finally:
        kill(server)
        from ldpsurvey.aggregator import close_app

        close_app(app)


CODED = {"title": "Coded", "release_batch": 250, "questions": [
    {"id": f"d{i}", "text": "?", "type": "choice", "options": [str(d) for d in range(10)],
     "alpha": 0.5} for i in range(3)]}


def test_the_export_order_owes_nothing_to_arrival(client, auth):
    """1,000 responses, each coding its arrival index in three digits, in four releases: the
    rank correlation of export position and arrival is within 4.5 standard errors of 0
    (1 / sqrt(n - 1) under a uniformly random order), and both exports hold exactly what was
    sent."""
    survey_id = client.post("/api/surveys", json=CODED, headers=auth).json["survey_id"]
    digits = [(i // 100, i // 10 % 10, i % 10) for i in range(1000)]
    for start in range(0, 1000, 250):
        responses = [{"answers": {f"d{i}": d[i] for i in range(3)}}
                     for d in digits[start:start + 250]]
        response = client.post(f"/api/surveys/{survey_id}/responses/batch", headers=auth,
                               json={"responses": responses})
        assert response.status_code == 201
        assert release_due(client.application) == 250
    csv_rows = [line for line in client.get(f"/api/surveys/{survey_id}/export.csv",
                                            headers=auth).get_data(as_text=True).splitlines()
                if not line.startswith(("#", "d0"))]
    order = [int(line.replace(",", "")) for line in csv_rows]
    assert sorted(order) == list(range(1000))
    n = len(order)
    rho = 1 - 6 * sum((position - arrival) ** 2 for position, arrival in enumerate(order)) / (
        n * (n * n - 1))
    assert abs(rho) < 4.5 / math.sqrt(n - 1), rho
    jsonl = client.get(f"/api/surveys/{survey_id}/export.jsonl", headers=auth).get_data(
        as_text=True).splitlines()
    assert Counter(tuple(json.loads(line)["answers"][f"d{i}"] for i in range(3))
                   for line in jsonl[1:]) == Counter(digits)


def test_a_release_during_an_export_waits_for_nothing_and_changes_nothing_in_it(app, client,
                                                                                 auth):
    """The export reads one snapshot: a release committed while it is under way neither
    waits for it nor shows in it (its header and rows agree), and the next export has it."""
    from ldpsurvey.aggregator.services import accounts, surveys
    from ldpsurvey.aggregator.web.request_connection import get_db

    survey_id = client.post("/api/surveys", json={**FOUR, "release_batch": 100},
                            headers=auth).json["survey_id"]
    batch = {"responses": [{"answers": {f"q{i}": 1 for i in range(4)}}] * 100}

    def release() -> int:
        status = client.post(f"/api/surveys/{survey_id}/responses/batch", json=batch,
                             headers=auth).status_code
        release_due(app)
        return status

    assert release() == 201
    key = auth["Authorization"].removeprefix("Bearer ")
    with app.app_context():
        db = get_db()
        body = surveys.export(db, accounts.key_in_use(db, key), survey_id,
                              surveys.ExportOptions("csv", "rr"), 1e-6).body
        head = next(body)  # the snapshot is open from here
        during = []
        writer = threading.Thread(target=lambda: during.append(release()))
        writer.start()
        writer.join(timeout=20)
        assert during == [201]  # the writer did not wait for the export
        rows = [line for piece in body for line in piece.splitlines()]
    assert len(rows) == 100 and '"epsilon_whole_survey"' in head
    header = json.loads(head.split("# central: ")[1].splitlines()[0])
    assert header["delta"] == min(1e-6, 1 / (10 * 100))  # from the 100 it exported, not 200
    after = client.get(f"/api/surveys/{survey_id}/export.csv?format=rr", headers=auth).get_data(
        as_text=True).splitlines()
    assert len([line for line in after if not line.startswith(("#", "q0"))]) == 200
