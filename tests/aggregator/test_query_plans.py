"""Every query on the request path and in a release reads by index: each statement the
aggregator runs while respondents answer, researchers read and a release runs is EXPLAINed on
both databases (EXPLAIN QUERY PLAN on SQLite; EXPLAIN (FORMAT JSON) on PostgreSQL, with
sequential scans disabled, so the planner picks an index whenever one applies however small the
test's tables), and none may read a table that grows with responses or releases whole. Plans,
not timings: bench/history.py measures what that buys."""

import threading

import pytest

from ldpsurvey.aggregator.store.connection import Connection
from ldpsurvey.aggregator.web.request_connection import get_db

from helpers import SURVEY, release_due

# Tables whose rows grow with responses, releases, minted tokens or days of release; the rest
# (surveys and their counters and release totals, researchers, keys, sessions) grow with
# surveys, researchers and logins only.
GROWING = {"responses", "pending", "releases", "idempotency_keys", "invitation_tokens",
           "release_days"}
PLAIN = {**SURVEY, "public_results": True}
INVITED = {**PLAIN, "title": "Invited", "invitation_only": True, "release_batch": 2,
           "crosstabs": [["smoked", "sleep"]]}


def full_scans_sqlite(db: Connection, sql: str, params) -> list[str]:
    """The plan's steps that read a growing table or one of its indexes whole: a SCAN, or a
    SEARCH through no index (what MIN over a table without one shows)."""
    plan = [row[3] for row in db.query(f"EXPLAIN QUERY PLAN {sql}", params)]
    return [step for step in plan if step.split()[0] in ("SCAN", "SEARCH")
            and step.split()[1] in GROWING
            and (step.startswith("SCAN ") or " USING " not in step)]


def full_scans_postgres(db: Connection, sql: str, params) -> list[str]:
    """The plan's nodes that read a growing table whole: a sequential scan, or an index scan
    with no index condition, unless a Limit above it stops it early (MIN by index), or a
    bitmap scan of one whose index scans have none (a whole partial index)."""
    found: list[str] = []

    def bitmaps(node: dict) -> list[dict]:
        return ([node] if node["Node Type"] == "Bitmap Index Scan" else []) + [
            scan for child in node.get("Plans", []) for scan in bitmaps(child)]

    def walk(node: dict, limited: bool) -> None:
        relation = node.get("Relation Name")
        kind = node["Node Type"]
        if relation in GROWING and kind == "Seq Scan":
            found.append(f"{kind} on {relation}")
        if (relation in GROWING and kind in ("Index Scan", "Index Only Scan")
                and "Index Cond" not in node and not limited):
            found.append(f"{kind} on {relation} without a condition")
        if (relation in GROWING and kind == "Bitmap Heap Scan"
                and any("Index Cond" not in scan for scan in bitmaps(node))):
            found.append(f"{kind} on {relation} through an index without a condition")
        for child in node.get("Plans", []):
            walk(child, limited or kind == "Limit")

    db.execute("SET enable_seqscan = off")
    try:
        walk(db.query(f"EXPLAIN (FORMAT JSON) {sql}", params)[0][0][0]["Plan"], False)
    finally:
        db.execute("RESET enable_seqscan")
    return found


def full_scans(db: Connection, sql: str, params) -> list[str]:
    scans = full_scans_postgres if db.dialect == "postgresql" else full_scans_sqlite
    return scans(db, sql, params)


class Recorder:
    """Every statement (SQL with ? placeholders, parameters) run through a Connection, from any
    thread, while installed."""

    def __init__(self, monkeypatch):
        self.statements: dict[str, tuple] = {}
        lock = threading.Lock()
        for name in ("query", "execute"):
            original = getattr(Connection, name)

            def recording(self_, sql, params=(), *args, _original=original, **kwargs):
                with lock:
                    self.statements.setdefault(sql.strip(), tuple(params))
                return _original(self_, sql, params, *args, **kwargs)

            monkeypatch.setattr(Connection, name, recording)
        original_many = Connection.executemany

        def recording_many(self_, sql, rows):
            rows = list(rows)
            with lock:
                if rows:
                    self.statements.setdefault(sql.strip(), tuple(rows[0]))
            return original_many(self_, sql, rows)

        monkeypatch.setattr(Connection, "executemany", recording_many)


def every_request_and_release(app, client, auth) -> None:
    """What respondents, researchers and the release clock do, through every endpoint that
    reads or writes responses, releases, pools, tokens or idempotency records."""
    plain = client.post("/api/surveys", json=PLAIN, headers=auth).json["survey_id"]
    invited = client.post("/api/surveys", json=INVITED, headers=auth).json["survey_id"]
    tokens = client.post(f"/api/surveys/{invited}/tokens", json={"count": 4},
                         headers=auth).json["tokens"]
    answers = {"answers": {"smoked": 1, "drove": 0, "sleep": 2}}
    for i, token in enumerate(tokens[:3]):
        headers = {"Survey-Token": token, "Idempotency-Key": f"plan-key-{i:04d}"}
        assert client.post(f"/api/surveys/{invited}/responses", json=answers,
                           headers=headers).status_code == 201
    assert client.post(f"/api/surveys/{invited}/responses", json=answers,  # a replay
                       headers={"Survey-Token": tokens[0],
                                "Idempotency-Key": "plan-key-0000"}).status_code == 201
    for i in range(3):
        client.post(f"/api/surveys/{plain}/responses", json=answers,
                    headers={"Idempotency-Key": f"plain-key-{i:04d}"} if i else {})
    client.post(f"/api/surveys/{plain}/responses/batch", json={"responses": [answers] * 5},
                headers={**auth, "Idempotency-Key": "batch-key-0001"})
    assert release_due(app) == 8 + 3  # each pool whole: the plain survey's 8, the invited 3
    assert client.post(f"/api/surveys/{invited}/responses", json=answers,  # left for the close
                       headers={"Survey-Token": tokens[3]}).status_code == 201
    for survey_id in (plain, invited):
        for path in ("", "/status", "/estimates", "/crosstab?rows=smoked&cols=sleep",
                     "/crosstab?rows=smoked&cols=drove", "/export.csv", "/export.jsonl",
                     "/codebook.json"):
            assert client.get(f"/api/surveys/{survey_id}{path}", headers=auth).status_code == 200
        for path in ("/results", "/results/estimates.csv", "/results/smoked.svg"):
            assert client.get(f"/s/{survey_id}{path}", headers=auth).status_code == 200
    assert client.get("/api/surveys", headers=auth).status_code == 200
    for survey_id in (plain, invited):
        assert client.post(f"/api/surveys/{survey_id}/close", headers=auth).status_code == 200


def test_no_request_or_release_reads_a_growing_table_whole(app, client, auth, monkeypatch):
    recorder = Recorder(monkeypatch)
    every_request_and_release(app, client, auth)
    monkeypatch.undo()
    statements = recorder.statements
    touched = {table for sql in statements for table in GROWING if table in sql}
    assert touched == GROWING  # the scenario reached every growing table
    with app.app_context():
        db = get_db()
        # The release's staging table (store.stage_released) exists only inside its
        # transaction and holds that release alone, which it reads whole by design.
        scans = {sql: found for sql, params in statements.items()
                 if sql.split()[0].upper() in ("SELECT", "WITH", "UPDATE", "DELETE", "INSERT")
                 and "releasing" not in sql and (found := full_scans(db, sql, params))}
    assert not scans, "\n".join(f"{sql}\n  -> {found}" for sql, found in scans.items())
    # Intake finds a retry's pending group by its whole primary key (a group's id is its
    # claim's key hash), not by ranging over the survey's pool.
    [pending] = [sql for sql in statements if sql.startswith("SELECT body_mac, size FROM pending")]
    with app.app_context():
        db = get_db()
        plan = plan_text(db, pending, statements[pending])
        assert ("PRIMARY KEY (survey_id=? AND pending_id=?)" in plan if db.dialect == "sqlite"
                else "_pkey on pending" in plan and "(pending_id = " in plan), plan
        # A release deletes expired records through the index of released ones by day.
        [expire] = [sql for sql in statements if "released_day <" in sql]
        assert "idempotency_by_day" in plan_text(db, expire, statements[expire]), expire


def plan_text(db: Connection, sql: str, params) -> str:
    if db.dialect == "postgresql":
        db.execute("SET enable_seqscan = off")
        try:
            return " ".join(row[0] for row in db.query(f"EXPLAIN {sql}", params))
        finally:
            db.execute("RESET enable_seqscan")
    return " ".join(row[3] for row in db.query(f"EXPLAIN QUERY PLAN {sql}", params))


@pytest.mark.parametrize("sql", [
    "SELECT MIN(size) FROM releases WHERE survey_id = ?",              # no index on releases
    "SELECT key_hash FROM idempotency_keys WHERE released = 0",        # no survey: all of them
    "SELECT COUNT(*) FROM responses WHERE answers = ?",                # not a key column
])
def test_the_check_finds_a_full_scan(app, sql):
    """The check is not blind: statements that read a growing table whole are caught."""
    with app.app_context():
        db = get_db()
        params = ("x",) * sql.count("?")
        assert full_scans(db, sql, params)
