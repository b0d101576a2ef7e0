"""Attacks with a copy of the database's files (and, as the survey's owner, every token it
minted), but without the storage key: what the copy matches and reads. Also: a start with the
wrong key, and a database of schema 5 (plain SHA-256 hashes, plain pending answers) upgraded.

The copy is read as bytes: SQLite's file, -wal and -shm; on PostgreSQL, after CHECKPOINT, the
relation files of a table and its indexes (pg_relation_filepath, readable as root here)."""

import base64
import hashlib
import json
import secrets
import shutil
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from test_migrations import schema  # noqa: F401  (a fixture: a new PostgreSQL schema)
from test_unlinkable_storage import ORDERED, forms, heap_rows, sqlite_files, wait_for_scrub

from ldpsurvey.aggregator import ConfigurationError, close_app, create_api_key, create_app
from ldpsurvey.aggregator.web.request_connection import get_db
from ldpsurvey.cli import main

from helpers import POSTGRES_URL, postgres_url, release_due

WRONG = b"a key of 32 bytes or more that is not the storage key"
FIXTURE = Path(__file__).parents[1] / "fixtures" / "schema-5"


def keys_of(app):
    return app.extensions["ldp_database"].keys


def keyless_forms(token: str) -> list[bytes]:
    """What someone holding a token can compute without the storage key: the token, its hex
    SHA-256 and raw digest, and its keyed hash under a key that is not the storage key."""
    from ldpsurvey.aggregator.store.storage_key import StorageKeys

    return forms(token, StorageKeys.from_secret(WRONG).token_hash(token))


def relation_bytes(app, table: str) -> bytes:
    """The bytes of a PostgreSQL table's and its indexes' files, after a CHECKPOINT."""
    with psycopg.connect(app.config["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        folder = Path(conn.execute("SHOW data_directory").fetchone()[0])
        files = [path for (path,) in conn.execute(
            "SELECT pg_relation_filepath(oid) FROM pg_class WHERE oid = %s::regclass OR oid IN "
            "(SELECT indexrelid FROM pg_index WHERE indrelid = %s::regclass)", (table, table))]
    return b"".join((folder / path).read_bytes() for path in files)


def copy_of(app, table: str) -> bytes:
    """What a copy of the files holds of `table`: SQLite's files whole, PostgreSQL's the table's
    relation files."""
    if app.config["DATABASE_URL"].startswith("sqlite"):
        return sqlite_files(app)
    return relation_bytes(app, table)


def invited_survey(client, auth, count: int) -> tuple[str, list[str]]:
    survey_id = client.post("/api/surveys", json=ORDERED, headers=auth).json["survey_id"]
    return survey_id, client.post(f"/api/surveys/{survey_id}/tokens", json={"count": count},
                                  headers=auth).json["tokens"]


def answer(client, survey_id: str, token: str, arrival: int, key: str | None = None):
    headers = {"Survey-Token": token} | ({"Idempotency-Key": key} if key else {})
    return client.post(f"/api/surveys/{survey_id}/responses",
                       json={"answers": {"arrival": arrival}}, headers=headers)


BIG = {"title": "Big", "release_batch": 6000, "questions": ORDERED["questions"]}
ROWS = 12_000  # more than one store.ANSWERS_CHUNK, so the export reads a chunk after a release


def test_a_copy_taken_during_a_long_export_holds_no_spent_token(app, client, auth):
    """An export of 12,000 responses is read one piece at a time. Meanwhile respondents spend
    40 tokens (two releases) on another survey, and the export's own survey gets a release;
    with the export still open, a copy of the files holds no form of a spent token, not even
    its keyed hash under the right key: the scrub finished (it used to wait for the export's
    read snapshot: the -wal kept every spent token's SHA-256). The export holds exactly the
    releases there were when it began."""
    big = client.post("/api/surveys", json=BIG, headers=auth).json["survey_id"]
    for half in range(2):
        batch = {"responses": [{"answers": {"arrival": (half * 6000 + i) % 20}}
                               for i in range(6000)]}
        assert client.post(f"/api/surveys/{big}/responses/batch", json=batch,
                           headers=auth).status_code == 201
    assert release_due(app) == ROWS
    export = client.get(f"/api/surveys/{big}/export.jsonl", headers=auth, buffered=False)
    try:
        pieces = iter(export.response)
        read = [next(pieces), next(pieces)]  # the header, then the first rows
        during = {"responses": [{"answers": {"arrival": 20 + i % 20}} for i in range(6000)]}
        assert client.post(f"/api/surveys/{big}/responses/batch", json=during,
                           headers=auth).status_code == 201
        invited, tokens = invited_survey(client, auth, 40)
        for i, token in enumerate(tokens):
            assert answer(client, invited, token, i).status_code == 201
            if i % 20 == 19:  # the scheduled releases: the export's survey's, then these
                assert release_due(app) == (6020 if i == 19 else 20)
        copy = copy_of(app, "spent_tokens")
        assert not [t for t in tokens if any(form in copy for form in keyless_forms(t))]
        if app.config["DATABASE_URL"].startswith("sqlite"):  # scrubbed inline: the log is
            assert not app.extensions["ldp_database"].scrubber.pending()  # empty, so the key
            log = Path(app.config["DATABASE_URL"].removeprefix("sqlite:///") + "-wal")
            assert log.stat().st_size == 0  # ties no spent token to the group it came with
        else:
            wait_for_scrub(app)  # VACUUM, in the background, is not held off by the export
            with psycopg.connect(app.config["DATABASE_URL"], autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect SCHEMA public")
                assert heap_rows(conn, "pending") == 0
        rows = [json.loads(line)["answers"]["arrival"]
                for line in b"".join([*read, *pieces]).decode().splitlines()[1:]]
    finally:
        export.close()  # else its connection, mid-transaction, outlives the test
    assert len(rows) == ROWS and max(rows) < 20  # none of the release made during it
    after = client.get(f"/api/surveys/{big}/export.jsonl", headers=auth).text.splitlines()
    assert len(after) == 1 + ROWS + 6000


def test_pending_answers_are_not_in_the_files(app, client, auth):
    """15 answers wait for a release of 20: the files hold their rows (each random pending id
    is there to be found) but no answer's JSON (it used to be there in plain text)."""
    invited, tokens = invited_survey(client, auth, 15)
    for i, token in enumerate(tokens):
        assert answer(client, invited, token, i).status_code == 201
    with app.app_context():
        ids = [pending_id for (pending_id,) in get_db().query("SELECT pending_id FROM pending")]
    copy = copy_of(app, "pending")
    assert len(ids) == 15 and all(pending_id.encode() in copy for pending_id in ids)
    assert b'"arrival":' not in copy
    assert client.post(f"/api/surveys/{invited}/close", headers=auth).status_code == 200
    exported = client.get(f"/api/surveys/{invited}/export.jsonl", headers=auth).text
    assert sorted(json.loads(line)["answers"]["arrival"]
                  for line in exported.splitlines()[1:]) == list(range(15))


def test_the_owner_with_every_token_cannot_tell_spent_from_unspent(app, client, auth):
    """The owner minted 40 tokens, 30 were spent (one release of 20, 10 pending). Without the
    storage key, none of the 40 matches anything in a copy of the files (the unspent ones'
    SHA-256 used to be there, so the spent were the others), and their places tell nothing
    either (test_a_copy_without_the_key_does_not_tell_which_invitees_answered). With the key,
    the spent ones match, every one, released or pending, and no unspent one: the operator
    who holds the key and the tokens knows who answered."""
    invited, tokens = invited_survey(client, auth, 40)
    for i, token in enumerate(tokens[:30]):
        assert answer(client, invited, token, i).status_code == 201
        if i == 19:
            assert release_due(app) == 20
    wait_for_scrub(app)
    copy = copy_of(app, "invitation_tokens") + copy_of(app, "spent_tokens")
    assert not [t for t in tokens if any(form in copy for form in keyless_forms(t))]
    keyed = [t for t in tokens if keys_of(app).token_hash(t).encode() in copy]
    assert keyed == tokens[:30]


def table_rows(app) -> dict[str, list]:
    """Every table's rows."""
    with app.app_context():
        db = get_db()
        tables = db.query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "current_schema()" if db.dialect == "postgresql" else
            "SELECT name FROM sqlite_master WHERE type = 'table'")
        return {table: sorted(map(repr, db.query(f"SELECT * FROM {table}")))
                for (table,) in tables}


def test_a_start_with_another_storage_key_is_refused_and_changes_nothing(app, client, auth,
                                                                          tmp_path):
    invited, tokens = invited_survey(client, auth, 4)
    assert answer(client, invited, tokens[0], 7, key="refused-key-0001").status_code == 201
    before = table_rows(app)
    with pytest.raises(ConfigurationError) as refused:
        create_app({"DATABASE_URL": app.config["DATABASE_URL"], "STORAGE_KEY": WRONG.decode()},
                   instance_path=tmp_path / "other")
    assert "\n" not in str(refused.value)
    assert "storage key (LDP_SURVEY_STORAGE_KEY" in str(refused.value)
    assert table_rows(app) == before
    cli = CliRunner().invoke(main, ["admin", "create-key", "--instance", str(tmp_path / "other"),
                                    "--database", app.config["DATABASE_URL"]],
                             env={"LDP_SURVEY_STORAGE_KEY": WRONG.decode()})
    assert cli.exit_code == 1 and len(cli.output.strip().splitlines()) == 1, cli.output
    assert "is not the one this database was written with" in cli.output
    assert table_rows(app) == before
    # With its own key, nothing was lost: the tokens, the pending answer, the idempotency key.
    assert answer(client, invited, tokens[0], 7, key="refused-key-0001").headers[
        "Idempotent-Replayed"] == "true"
    assert answer(client, invited, tokens[1], 8).status_code == 201
    assert client.post(f"/api/surveys/{invited}/close", headers=auth).status_code == 200
    exported = client.get(f"/api/surveys/{invited}/export.jsonl", headers=auth).text
    assert sorted(json.loads(line)["answers"]["arrival"]
                  for line in exported.splitlines()[1:]) == [7, 8]


def test_development_keeps_its_storage_key_in_the_instance_folder(tmp_path):
    """Unset, the storage key is made once in the instance folder (0600, like secret-key) and
    used again at the next start: a token minted before a restart is accepted after it. A
    start whose key file was lost (a new one is made) is refused, and the tokens are kept."""
    url = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    app = create_app({"DATABASE_URL": url}, instance_path=tmp_path / "instance")
    key_file = tmp_path / "instance" / "storage-key"
    assert key_file.stat().st_mode & 0o777 == 0o600 and len(key_file.read_bytes()) == 64
    auth = {"Authorization": f"Bearer {create_api_key(app).key}"}
    invited, tokens = invited_survey(app.test_client(), auth, 2)
    close_app(app)
    again = create_app({"DATABASE_URL": url}, instance_path=tmp_path / "instance")
    assert answer(again.test_client(), invited, tokens[0], 1).status_code == 201
    close_app(again)
    key = key_file.read_bytes()
    key_file.unlink()
    with pytest.raises(ConfigurationError, match="not the one this database was written with"):
        create_app({"DATABASE_URL": url}, instance_path=tmp_path / "instance")
    key_file.write_bytes(key)
    restored = create_app({"DATABASE_URL": url}, instance_path=tmp_path / "instance")
    assert answer(restored.test_client(), invited, tokens[1], 2).status_code == 201
    close_app(restored)


def schema_5_database(kind: str, tmp_path: Path, request) -> tuple[str, dict]:
    """A copy of the database the aggregator of schema 5 wrote (fixtures/schema-5/README.md)
    and what it was given."""
    facts = json.loads((FIXTURE / f"{kind}.json").read_text())
    if kind == "sqlite":
        shutil.copy(FIXTURE / "database.sqlite3", tmp_path / "schema-5.sqlite3")
        return f"sqlite:///{tmp_path / 'schema-5.sqlite3'}", facts
    name = request.getfixturevalue("schema")
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute((FIXTURE / "postgresql.sql").read_text().replace("ldp_schema_5", name))
    return postgres_url(name), facts


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_step_6_keeps_every_unspent_token_and_pending_answer(kind, tmp_path, request):
    """Schema 5 kept six unspent tokens' SHA-256, six pending answers (and one on another
    survey) in plain JSON and six idempotency records. After step 6 none of that is in the
    files in a form computable without the key, yet every unspent token is accepted, every
    spent one refused, each idempotency key replays its body and refuses another, and the
    pending answers are released as they were given."""
    url, facts = schema_5_database(kind, tmp_path, request)
    app = create_app({"DATABASE_URL": url}, instance_path=tmp_path / "instance")
    try:
        wait_for_scrub(app)
        copy = copy_of(app, "invitation_tokens") + copy_of(app, "pending")
        assert not [t for t in facts["unspent"] if any(f in copy for f in keyless_forms(t))]
        pending = copy_of(app, "pending")  # released answers are kept in plain text, not these
        assert not [i for i in (*range(6), 23) if b'{"arrival":%d}' % i in pending]
        client, invited = app.test_client(), facts["invited"]
        auth = {"Authorization": f"Bearer {facts['researcher_key']}"}
        for key, answers in facts["idempotency"].items():
            replayed = answer(client, invited, facts["spent"][0], answers["arrival"], key=key)
            assert replayed.headers["Idempotent-Replayed"] == "true", replayed.json
            assert answer(client, invited, facts["spent"][0], 39, key=key).status_code == 409
        assert answer(client, invited, facts["spent"][1], 30).status_code == 403
        for i, token in enumerate(facts["unspent"]):
            assert answer(client, invited, token, 10 + i).status_code == 201, token
            if i == 3:  # the pool reached its batch of 10: the next scheduled release
                assert release_due(app) == 10
        exported = client.get(f"/api/surveys/{invited}/export.jsonl", headers=auth).text
        # The release of 10: the six migrated answers and the first four new ones.
        assert sorted(json.loads(line)["answers"]["arrival"]
                      for line in exported.splitlines()[1:]) == [0, 1, 2, 3, 4, 5, 10, 11, 12, 13]
        assert client.post(f"/api/surveys/{facts['open']}/close", headers=auth).status_code == 200
        opened = client.get(f"/api/surveys/{facts['open']}/export.jsonl", headers=auth).text
        assert sorted(json.loads(line)["answers"]["arrival"]
                      for line in opened.splitlines()[1:]) == [20, 21, 22, 23]
    finally:
        close_app(app)


def test_the_subkeys_are_separate_and_the_hashes_keyed():
    """HKDF gives each use its own key; every stored form is an HMAC of the plain one."""
    import hmac

    from ldpsurvey.aggregator.config.ids import body_mac, hash_text
    from ldpsurvey.aggregator.store.storage_key import StorageKeys

    keys = StorageKeys.from_secret(b"k" * 32)
    assert len({keys.tokens, keys.idempotency, keys.pending, keys.check}) == 4
    token_hash = hmac.new(keys.tokens, hash_text("t").encode(), hashlib.sha256).hexdigest()
    assert keys.token_hash("t") == token_hash
    assert keys.idempotency_id("t") == hmac.new(keys.idempotency, hash_text("t").encode(),
                                                hashlib.sha256).hexdigest()
    assert keys.body_mac("t", "b") == hmac.new(keys.idempotency, body_mac("t", "b").encode(),
                                               hashlib.sha256).hexdigest()
    sealed = keys.seal("survey-a", '{"q":1}')
    assert keys.open("survey-a", sealed) == '{"q":1}' and sealed != keys.seal("survey-a", '{"q":1}')
    from cryptography.exceptions import InvalidTag

    for survey_id, opener in (("survey-b", keys), ("survey-a", StorageKeys.from_secret(WRONG))):
        with pytest.raises(InvalidTag):  # another survey's row, or another key
            opener.open(survey_id, sealed)


WIDE = {"title": "Wide", "release_batch": 50, "questions": [
    {"id": "pick", "text": "Pick one", "type": "choice", "epsilon": 1.0,
     "options": [f"option {j}" for j in range(12)]},
    {"id": "yes", "text": "Yes or no?", "type": "yes_no", "epsilon": 1.0}]}


def test_a_sealed_pending_answer_has_one_length_whatever_the_answers(app, client, auth):
    """A copy of the files shows each pending row's sealed length: unpadded, an answer of
    option 10 or 11 sealed one byte longer than one of option 0 to 9. Padded to the survey's
    longest row, every pending row has one length, and each is released as it was given."""
    survey_id = client.post("/api/surveys", json=WIDE, headers=auth).json["survey_id"]
    given = [{"pick": pick, "yes": yes} for pick in range(12) for yes in range(2)]
    for answers in given:
        assert client.post(f"/api/surveys/{survey_id}/responses",
                           json={"answers": answers}).status_code == 201
    with app.app_context():
        lengths = {len(base64.b64decode(sealed)) for (sealed,) in get_db().query(
            "SELECT answers FROM pending WHERE survey_id = ?", (survey_id,))}
    assert len(lengths) == 1
    # A batch waits as one sealed group, whose length tells its size and nothing else: two
    # batches of three with the shortest and the longest answers seal to one length.
    for pick in (0, 11):
        assert client.post(f"/api/surveys/{survey_id}/responses/batch", headers=auth, json={
            "responses": [{"answers": {"pick": pick, "yes": 0}}] * 3}).status_code == 201
    with app.app_context():
        groups = {len(base64.b64decode(sealed)) for (sealed,) in get_db().query(
            "SELECT answers FROM pending WHERE survey_id = ? AND size = 3", (survey_id,))}
    assert len(groups) == 1 and groups != lengths
    assert client.post(f"/api/surveys/{survey_id}/close", headers=auth).status_code == 200
    exported = client.get(f"/api/surveys/{survey_id}/export.jsonl", headers=auth).text
    released = exported.splitlines()[1:]
    batches = [{"pick": pick, "yes": 0} for pick in (0, 11) for _ in range(3)]
    assert sorted(json.dumps(json.loads(line)["answers"], sort_keys=True) for line in released) \
        == sorted(json.dumps(answers, sort_keys=True) for answers in given + batches)
    assert not [line for line in released if line != line.rstrip()]


# --- who answered: the physical traces of spending a token ---------------------------------------

INVITEES = 12
EVEN, ODD = list(range(0, INVITEES, 2)), list(range(1, INVITEES, 2))


@pytest.fixture(params=["sqlite", "postgresql"])
def two_databases(request, tmp_path):
    """Two new, empty databases of one kind: two fieldworks with the same history but for which
    invitees answered."""
    if request.param == "sqlite":
        yield [f"sqlite:///{tmp_path / f'world-{world}.sqlite3'}" for world in "ab"]
        return
    from test_migrations import created

    names = [request.getfixturevalue("schema"), f"ldp_world_{secrets.token_hex(6)}"]
    try:
        yield [created(name) for name in names]
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {names[1]} CASCADE")


def fieldwork(url: str, instance: Path, answered: list[int]):
    """The owner mints one token per invitee, one request each (the way to send personal
    links), then the invitees `answered` answer, in that order: the k-th to answer answers k
    (so the answers, and their order, are the same whoever answers), which fills a release.
    Returns the running app."""
    app = create_app({"DATABASE_URL": url}, instance_path=instance)
    client = app.test_client()
    auth = {"Authorization": f"Bearer {create_api_key(app).key}"}
    survey = ORDERED | {"release_batch": len(answered)}
    survey_id = client.post("/api/surveys", json=survey, headers=auth).json["survey_id"]
    tokens = [client.post(f"/api/surveys/{survey_id}/tokens", json={"count": 1},
                          headers=auth).json["tokens"][0] for _ in range(INVITEES)]
    for k, invitee in enumerate(answered):
        assert answer(client, survey_id, tokens[invitee], k).status_code == 201
    return app


def btree_page(page: bytes, header: int) -> tuple:
    """What a SQLite B-tree page's layout shows (sqlite.org/fileformat2.html, "B-tree pages"):
    its type, cell count, content start and fragmented bytes, where its cells lie (their
    offsets, as a set: their order follows the keys, random here) and its freeblocks (offset,
    size), left by deleted cells; ("other",) for a page that is no B-tree page."""
    import struct

    kind = page[header]
    if kind not in (2, 5, 10, 13):
        return ("other",)
    freeblock, cells, start, fragmented = struct.unpack_from(">HHHB", page, header + 1)
    pointers = header + (12 if kind in (2, 5) else 8)
    offsets = sorted(struct.unpack_from(f">{cells}H", page, pointers))
    freeblocks = []
    while freeblock:
        following, size = struct.unpack_from(">HH", page, freeblock)
        freeblocks.append((freeblock, size))
        freeblock = following
    return kind, cells, start, fragmented, offsets, freeblocks


def sqlite_layout(url: str, tmp_path: Path) -> list:
    """A copy of the SQLite files as an attacker reads their layout: each page of the database
    file, after the log is replayed into the copy, and each frame the log held, in order (the
    page it wrote, that page's layout), with the table or index each page belongs to. Released
    responses' pages are left out: their rows hold a random bucket, an integer stored in 0 to 2
    bytes, so their cells' sizes differ between any two databases (they are attacked in
    test_unlinkable_storage.py)."""
    import sqlite3
    import struct

    path = Path(url.removeprefix("sqlite:///"))
    copy = tmp_path / f"copy-{path.name}"
    for suffix in ("", "-wal"):
        if Path(f"{path}{suffix}").exists():
            shutil.copy(f"{path}{suffix}", f"{copy}{suffix}")
    log = Path(f"{copy}-wal").read_bytes() if Path(f"{copy}-wal").exists() else b""
    replayed = sqlite3.connect(copy, isolation_level=None)
    replayed.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    owner = dict(replayed.execute("SELECT pageno, name FROM dbstat"))
    replayed.close()
    data = copy.read_bytes()
    size = struct.unpack_from(">H", data, 16)[0]
    pages = [(number, owner.get(number), btree_page(data[(number - 1) * size:number * size],
                                                    100 * (number == 1)))
             for number in range(1, len(data) // size + 1)]
    frames = []
    if log:
        for at in range(32, len(log) - size + 1, 24 + size):
            number = struct.unpack_from(">I", log, at)[0]
            frames.append((number, owner.get(number),
                           btree_page(log[at + 24:at + 24 + size], 100 * (number == 1))))
    return [[entry for entry in layout if entry[1] != "responses"] for layout in (frames, pages)]


def postgres_layout(url: str) -> list:
    """What a copy of a PostgreSQL schema's table files shows (pageinspect): per table, each
    item of each page, live or dead, in its place (ctid), with its flags, length, hint bits and
    the transactions that made (xmin) and deleted or locked it (xmax); a transaction id as its
    rank among those seen (their values differ between two databases of one server)."""
    name = url.split("search_path%3D")[1].split("&")[0]
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect SCHEMA public")
        conn.execute("CHECKPOINT")
        tables = [table for (table,) in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (name,))]
        items = {}
        for table in tables:
            relation = f"{name}.{table}"
            blocks = conn.execute("SELECT pg_relation_size(%s) / 8192",
                                  (relation,)).fetchone()[0]
            items[table] = [conn.execute(
                "SELECT lp, lp_flags, lp_len, t_xmin::text::bigint, t_xmax::text::bigint, "
                "t_infomask, t_ctid::text FROM public.heap_page_items(public.get_raw_page(%s, %s))"
                " ORDER BY lp", (relation, block)).fetchall() for block in range(blocks)]
    seen = sorted({xid for pages in items.values() for page in pages for row in page
                   for xid in row[3:5] if xid})
    rank = {xid: r + 1 for r, xid in enumerate(seen)} | {0: 0, None: None}
    return [(table, [[(*row[:3], rank[row[3]], rank[row[4]], *row[5:]) for row in page]
                     for page in pages]) for table, pages in items.items()]


@pytest.mark.parametrize("when", ["pending", "released"])
def test_a_copy_without_the_key_does_not_tell_which_invitees_answered(two_databases, tmp_path,
                                                                      when):
    """Two fieldworks alike but for who answered: twelve invitees, each token minted by a
    request of its own; in one the even-numbered invitees answer, in the other the odd ones,
    in the same order of time, the same answers. A copy of either, without the storage key,
    lays out alike: every page's cells, freeblocks and log frames (SQLite), every table's
    items, live or dead, their places, hint bits and transactions (PostgreSQL), before the
    release and after it. It used to name them: the token rows kept their mint order (cell
    offsets, ctid, xmin) and the spent ones' places were the gaps."""
    layouts = []
    for world, answered in enumerate((EVEN, ODD)):
        app = fieldwork(two_databases[world], tmp_path / f"instance-{world}", answered)
        try:
            if when == "released":
                assert release_due(app) == len(answered)
                wait_for_scrub(app)
            url = two_databases[world]
            layouts.append(sqlite_layout(url, tmp_path) if url.startswith("sqlite")
                           else postgres_layout(url))
        finally:
            close_app(app)
    assert layouts[0] == layouts[1]


def fieldwork_before_step_14(url: str, instance: Path, answered: list[int], monkeypatch):
    """As `fieldwork`, by the release before step 14, which kept each token's keyed hash when
    it was minted (a row per mint request here) and deleted it when it was spent. Returns the
    survey and the tokens."""
    from ldpsurvey.aggregator.store import migrations

    monkeypatch.setattr(migrations, "STEPS", migrations.STEPS[:13])
    monkeypatch.setattr(migrations, "LATEST", 13)
    app = create_app({"DATABASE_URL": url}, instance_path=instance)
    try:
        auth = {"Authorization": f"Bearer {create_api_key(app).key}"}
        survey_id = app.test_client().post("/api/surveys", json=ORDERED,
                                           headers=auth).json["survey_id"]
        tokens = [f"token-minted-before-step-14-{i:02d}" for i in range(INVITEES)]
        with app.app_context():
            db = get_db()
            for token in tokens:
                with db.transaction():
                    db.execute("INSERT INTO invitation_tokens (survey_id, token_hash) "
                               "VALUES (?, ?)", (survey_id, db.keys.token_hash(token)))
            for invitee in answered:
                with db.transaction():
                    db.execute("DELETE FROM invitation_tokens WHERE token_hash = ?",
                               (db.keys.token_hash(tokens[invitee]),))
    finally:
        close_app(app)
        monkeypatch.undo()
    return survey_id, tokens


def test_step_14_leaves_no_trace_of_who_answered_before_it(two_databases, tmp_path,
                                                           monkeypatch):
    """Two databases of the release before step 14, alike but for which invitees answered
    (even, odd): step 14 puts the unspent tokens' hashes in the order of their keyed hashes,
    one transaction, no gaps, so the copies then lay out alike. Each unspent token is still
    good once, and no spent one."""
    layouts = []
    for world, answered in enumerate((EVEN, ODD)):
        url, instance = two_databases[world], tmp_path / f"instance-{world}"
        survey_id, tokens = fieldwork_before_step_14(url, instance, answered, monkeypatch)
        app = create_app({"DATABASE_URL": url}, instance_path=instance)
        try:
            wait_for_scrub(app)
            layouts.append(sqlite_layout(url, tmp_path) if url.startswith("sqlite")
                           else postgres_layout(url))
            client = app.test_client()
            for invitee, token in enumerate(tokens):
                status = answer(client, survey_id, token, invitee).status_code
                assert status == (403 if invitee in answered else 201), (invitee, status)
                assert answer(client, survey_id, token, invitee).status_code == 403
        finally:
            close_app(app)
    assert layouts[0] == layouts[1]


def test_with_the_key_a_copy_names_who_answered_and_reads_the_answer_at_once(app, client, auth,
                                                                            tmp_path):
    """Whoever holds the files and the storage key (the operator; a backup of the whole
    server) needs no fill: a copy taken right after one invitee of five answered names that
    invitee (the spent token's keyed hash) and opens the randomized answer it sent (its
    pending group, the only one). Only the local epsilon protects that answer."""
    import sqlite3

    survey_id = client.post("/api/surveys", json=ORDERED, headers=auth).json["survey_id"]
    tokens = [client.post(f"/api/surveys/{survey_id}/tokens", json={"count": 1},
                          headers=auth).json["tokens"][0] for _ in range(5)]
    assert answer(client, survey_id, tokens[3], 17).status_code == 201
    url = app.config["DATABASE_URL"]
    if url.startswith("sqlite"):
        for suffix in ("", "-wal"):
            shutil.copy(url.removeprefix("sqlite:///") + suffix, tmp_path / f"copy{suffix}")
        with sqlite3.connect(tmp_path / "copy") as copy:
            spent = copy.execute("SELECT token_hash FROM spent_tokens").fetchall()
            sealed = copy.execute("SELECT answers FROM pending").fetchall()
    else:
        with psycopg.connect(url) as copy:
            spent = copy.execute("SELECT token_hash FROM spent_tokens").fetchall()
            sealed = copy.execute("SELECT answers FROM pending").fetchall()
    keys = keys_of(app)
    named = [i for i, token in enumerate(tokens) if (keys.token_hash(token),) in spent]
    assert named == [3]
    assert [json.loads(keys.open(survey_id, row)) for (row,) in sealed] == [{"arrival": 17}]
