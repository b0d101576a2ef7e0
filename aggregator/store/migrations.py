"""The schema, as numbered steps run in order at start: step k turns version k - 1 into k.

Each step runs in its own transaction under a lock that serializes replicas starting together,
and records its number in `schema_version`. A database newer than this release (a downgrade,
or an old release started after a newer one migrated it) is refused at start rather than
misread; the version is checked only at start.
A change to the schema is always one more step at the end; released steps never change.

What the tables hold (since step 3): surveys, their signed manifests, owners and shares;
responses waiting for release (`pending`); released responses under random keys with the day of
their release; per-option counters of released responses; each release's day and size; per
idempotency key its SHA-256 and an HMAC of the body keyed by the idempotency key itself; hashes
of unspent invitation tokens; researchers, the hashes of their API keys and the hashes of their
results-page sessions; and (since step 4) per declared cross-tab of a survey, joint counters
of released responses; (since step 6) the storage key's check value, and per released response
and per release the release's number; (since step 7) drafts, and the day a survey was archived;
(since step 8) per survey the totals of its releases and per survey and day the responses
released; (since step 9) per released response its bucket (eight random bits of its id); (since step
10) per released idempotency record the day of its release, deleted IDEMPOTENCY_DAYS later;
(since step 11) a pending request's responses sealed together, with their number; (since step
12) with the keyed hash and body MAC of its Idempotency-Key, which become its idempotency record
when it is released (since step 13, that keyed hash is also the group's id); (since step 14)
the keyed hashes of spent invitation tokens: a token minted since proves itself (storage_key.py)
and is stored only once spent, so `invitation_tokens` holds only unspent tokens minted before.
Token hashes and idempotency records are keyed by the storage key and pending answers encrypted
under it (storage_key.py), so a copy of the files alone matches and reads none of them. Nothing
about respondents but their randomized answers and their release's day and number: no column
for an IP address, user agent, cookie, token or precise time, and nothing links a token to a
response (the spent tokens' hashes are kept apart from the responses, and the pending group a
token was spent with is released in a random order).
Statements may contain {without_rowid}, which the connection fills in for its dialect; a step
may also hold a function of the connection, for what SQL alone cannot compute (the storage
key's forms).
"""

from collections.abc import Callable

from ldpsurvey.aggregator.config.ids import bucket_sql
from ldpsurvey.aggregator.exceptions import ConfigurationError
from ldpsurvey.aggregator.store.connection import Connection, today
from ldpsurvey.aggregator.store.storage_key import keyed


class WrongStorageKey(ConfigurationError):
    """The storage key is not the one the database was written with."""


def check_key(db: Connection) -> None:
    """Inside a transaction, on a database of step 6 or later: refuse a storage key other than
    the one its check value was made with (keyed tokens would match nothing and pending answers
    would not open: acknowledged data lost); record the key's check value if none is kept."""
    stored = db.query("SELECT check_value FROM storage_key")
    if not stored:
        db.execute("INSERT INTO storage_key (check_value) VALUES (?)", (db.keys.check_value(),))
    elif stored[0][0] != db.keys.check_value():
        raise WrongStorageKey(
            "the storage key (LDP_SURVEY_STORAGE_KEY, or the instance folder's storage-key) "
            "is not the one this database was written with: start with that key")


def _key_stored_secrets(db: Connection) -> None:
    """Step 6: the plain SHA-256 token and idempotency-key hashes and the body MACs become
    HMACs of themselves under the storage key's subkeys, the pending answers are sealed, and
    the key's check value is recorded, in one transaction. Rows go back in the order of their
    (random) keys."""
    keys = db.keys
    tokens = db.query("SELECT survey_id, token_hash FROM invitation_tokens")
    records = db.query("SELECT survey_id, key_hash, body_mac, accepted, released "
                       "FROM idempotency_keys")
    pending = db.query("SELECT survey_id, pending_id, answers FROM pending")
    for table in ("invitation_tokens", "idempotency_keys", "pending"):
        db.execute(f"DELETE FROM {table}")  # noqa: S608  # nosec B608
    db.insert_rows("invitation_tokens", ("survey_id", "token_hash"),
                   sorted((survey_id, keyed(keys.tokens, digest)) for survey_id, digest in tokens))
    db.insert_rows("idempotency_keys", ("survey_id", "key_hash", "body_mac", "accepted",
                                        "released"),
                   sorted((survey_id, keyed(keys.idempotency, digest),
                           None if mac is None else keyed(keys.idempotency, mac), accepted,
                           released) for survey_id, digest, mac, accepted, released in records))
    db.insert_rows("pending", ("survey_id", "pending_id", "answers"),
                   [(survey_id, pending_id, keys.seal(survey_id, answers))
                    for survey_id, pending_id, answers in sorted(pending)])
    check_key(db)


STEPS: list[tuple[str | Callable[[Connection], None], ...]] = [
    # 1: the tables of release 0.1.0, which created them without a schema_version (hence
    # IF NOT EXISTS: a database it wrote already has them).
    (
        """CREATE TABLE IF NOT EXISTS surveys (
            survey_id TEXT PRIMARY KEY,
            manifest TEXT NOT NULL,
            signature TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('open', 'closed')))""",
        """CREATE TABLE IF NOT EXISTS responses (
            response_id TEXT PRIMARY KEY,
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            answers TEXT NOT NULL,
            received_day TEXT NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS responses_by_survey ON responses (survey_id)",
        """CREATE TABLE IF NOT EXISTS counts (
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            question_id TEXT NOT NULL,
            option_index INTEGER NOT NULL,
            count BIGINT NOT NULL DEFAULT 0 CHECK (count >= 0),
            PRIMARY KEY (survey_id, question_id, option_index))""",
        """CREATE TABLE IF NOT EXISTS idempotency_keys (
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            key_hash TEXT NOT NULL,
            body_hash TEXT NOT NULL,
            accepted INTEGER NOT NULL,
            PRIMARY KEY (survey_id, key_hash))""",
        """CREATE TABLE IF NOT EXISTS invitation_tokens (
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            token_hash TEXT NOT NULL,
            PRIMARY KEY (survey_id, token_hash))""",
        """CREATE TABLE IF NOT EXISTS api_keys (
            key_hash TEXT PRIMARY KEY,
            role TEXT NOT NULL CHECK (role IN ('researcher', 'relay')))""",
    ),
    # 2: release batches; no order or link in storage. Tables whose rows arrive one by one sit
    # in the order of random keys ({without_rowid}: no hidden rowid counting insertions).
    (
        """CREATE TABLE pending (
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            pending_id TEXT NOT NULL,
            answers TEXT NOT NULL,
            PRIMARY KEY (survey_id, pending_id)){without_rowid}""",
        """CREATE TABLE released_responses (
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            response_id TEXT NOT NULL,
            answers TEXT NOT NULL,
            released_day TEXT NOT NULL,
            PRIMARY KEY (survey_id, response_id)){without_rowid}""",
        # Release 0.1.0 released every response at once: the day it arrived is its release day.
        """INSERT INTO released_responses (survey_id, response_id, answers, released_day)
            SELECT survey_id, response_id, answers, received_day FROM responses
            ORDER BY response_id""",
        """CREATE TABLE releases (
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            released_day TEXT NOT NULL,
            size INTEGER NOT NULL CHECK (size >= 1))""",
        """INSERT INTO releases (survey_id, released_day, size)
            SELECT survey_id, received_day, 1 FROM responses ORDER BY response_id""",
        "DROP TABLE responses",
        "ALTER TABLE released_responses RENAME TO responses",
        # Idempotency: an HMAC of the body keyed by the idempotency key (a plain hash of so small
        # an answer space would reveal the answers). 0.1.0's plain hashes are dropped: a retry
        # with such a key is answered as a replay whatever its body.
        """CREATE TABLE idempotency_records (
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            key_hash TEXT NOT NULL,
            body_mac TEXT,
            accepted INTEGER NOT NULL,
            released INTEGER NOT NULL CHECK (released IN (0, 1)),
            PRIMARY KEY (survey_id, key_hash)){without_rowid}""",
        """INSERT INTO idempotency_records (survey_id, key_hash, body_mac, accepted, released)
            SELECT survey_id, key_hash, NULL, accepted, 1 FROM idempotency_keys
            ORDER BY key_hash""",
        "DROP TABLE idempotency_keys",
        "ALTER TABLE idempotency_records RENAME TO idempotency_keys",
        """CREATE TABLE unspent_tokens (
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            token_hash TEXT NOT NULL,
            PRIMARY KEY (survey_id, token_hash)){without_rowid}""",
        """INSERT INTO unspent_tokens (survey_id, token_hash)
            SELECT survey_id, token_hash FROM invitation_tokens ORDER BY token_hash""",
        "DROP TABLE invitation_tokens",
        "ALTER TABLE unspent_tokens RENAME TO invitation_tokens",
    ),
    # 3: researcher accounts. A survey has an owner; it may be shared with other researchers;
    # keys have ids, an owner, a role (now also admin) and the days they were made and last
    # used; relay keys name the surveys they may fill; results-page sessions live here, so a
    # logout or a revoked key ends them. Earlier keys each become a researcher of their own
    # (named after their role and hash, made on an unknown day), every survey from before
    # owners existed is shared with every researcher key of then, and the relay keys of then
    # keep filling the surveys of then that are not invitation-only (the manifest is canonical
    # JSON: `"invitation_only":true` is how it says so), and no others.
    (
        """CREATE TABLE researchers (
            researcher_id TEXT PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            created_day TEXT)""",
        """INSERT INTO researchers (researcher_id, name, created_day)
            SELECT role || '-' || substr(key_hash, 1, 16), role || '-' || substr(key_hash, 1, 16),
                   NULL FROM api_keys ORDER BY key_hash""",
        """CREATE TABLE credentials (
            api_key_id TEXT PRIMARY KEY,
            key_hash TEXT NOT NULL UNIQUE,
            researcher_id TEXT NOT NULL REFERENCES researchers (researcher_id),
            role TEXT NOT NULL CHECK (role IN ('researcher', 'relay', 'admin')),
            created_day TEXT,
            last_used_day TEXT)""",
        """INSERT INTO credentials (api_key_id, key_hash, researcher_id, role, created_day,
                                   last_used_day)
            SELECT 'key-' || substr(key_hash, 1, 16), key_hash,
                   role || '-' || substr(key_hash, 1, 16), role, NULL, NULL
            FROM api_keys ORDER BY key_hash""",
        "DROP TABLE api_keys",
        "ALTER TABLE credentials RENAME TO api_keys",
        """CREATE TABLE relay_surveys (
            api_key_id TEXT NOT NULL REFERENCES api_keys (api_key_id),
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            PRIMARY KEY (api_key_id, survey_id))""",
        """INSERT INTO relay_surveys (api_key_id, survey_id)
            SELECT api_keys.api_key_id, surveys.survey_id FROM api_keys, surveys
            WHERE api_keys.role = 'relay'
              AND surveys.manifest NOT LIKE '%"invitation_only":true%' ORDER BY 1, 2""",
        "ALTER TABLE surveys ADD COLUMN owner_id TEXT REFERENCES researchers (researcher_id)",
        """CREATE TABLE shares (
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            researcher_id TEXT NOT NULL REFERENCES researchers (researcher_id),
            PRIMARY KEY (survey_id, researcher_id))""",
        """INSERT INTO shares (survey_id, researcher_id)
            SELECT surveys.survey_id, api_keys.researcher_id FROM surveys, api_keys
            WHERE api_keys.role = 'researcher' ORDER BY 1, 2""",
        """CREATE TABLE sessions (
            session_hash TEXT PRIMARY KEY,
            api_key_id TEXT NOT NULL REFERENCES api_keys (api_key_id),
            expires TEXT NOT NULL)""",
    ),
    # 4: cross-tabs. A survey may declare pairs of questions (manifest format /4); each pair
    # keeps a counter per (row option, col option) of released responses, updated with the
    # per-option counters at each release. Surveys of earlier releases declared none.
    (
        """CREATE TABLE joint_counts (
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            row_question TEXT NOT NULL,
            col_question TEXT NOT NULL,
            row_option INTEGER NOT NULL,
            col_option INTEGER NOT NULL,
            count BIGINT NOT NULL DEFAULT 0 CHECK (count >= 0),
            PRIMARY KEY (survey_id, row_question, col_question, row_option, col_option))""",
    ),
    # 5: the UTC day a survey was published, for researchers' listings (unknown, NULL, for
    # surveys published before).
    (
        "ALTER TABLE surveys ADD COLUMN created_day TEXT",
    ),
    # 6: a storage key outside the database (STORAGE_KEY): its check value; token hashes and
    # idempotency records keyed by it, pending answers encrypted under it. Released responses
    # and releases carry the number of their release (1, 2, ... per survey; 0 for those before
    # this step), so an export reads in short transactions exactly the releases there were
    # when it began.
    (
        "CREATE TABLE storage_key (check_value TEXT NOT NULL)",
        "ALTER TABLE responses ADD COLUMN release_number INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE releases ADD COLUMN release_number INTEGER NOT NULL DEFAULT 0",
        _key_stored_secrets,
    ),
    # 7: drafts and archiving. A draft is a survey definition its owner may still edit, with
    # the id it will be published under; it has no manifest, signature or counters until it is
    # published (its row then moves to surveys). A closed survey may be archived: hidden from
    # listings (the UTC day it was), its data kept.
    (
        """CREATE TABLE drafts (
            survey_id TEXT PRIMARY KEY,
            owner_id TEXT NOT NULL REFERENCES researchers (researcher_id),
            definition TEXT NOT NULL,
            created_day TEXT NOT NULL)""",
        "ALTER TABLE surveys ADD COLUMN archived_day TEXT",
    ),
    # 8: every request and release O(1) in the survey's history and in others'. Per survey, a
    # summary of its releases (how many responses, the smallest release, the last number) and
    # per day the responses released (the results page's timeline), kept by each release; a
    # partial index on the idempotency records not yet released, which are all a release
    # reads of them (the released ones stay until the close).
    (
        """CREATE TABLE release_totals (
            survey_id TEXT PRIMARY KEY REFERENCES surveys (survey_id),
            released BIGINT NOT NULL CHECK (released >= 1),
            smallest INTEGER NOT NULL CHECK (smallest >= 1),
            last_number INTEGER NOT NULL CHECK (last_number >= 0))""",
        """INSERT INTO release_totals (survey_id, released, smallest, last_number)
            SELECT survey_id, SUM(size), MIN(size), MAX(release_number) FROM releases
            GROUP BY survey_id ORDER BY survey_id""",
        """CREATE TABLE release_days (
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            released_day TEXT NOT NULL,
            size BIGINT NOT NULL CHECK (size >= 1),
            PRIMARY KEY (survey_id, released_day))""",
        """INSERT INTO release_days (survey_id, released_day, size)
            SELECT survey_id, released_day, SUM(size) FROM releases
            GROUP BY survey_id, released_day ORDER BY survey_id, released_day""",
        """CREATE INDEX idempotency_unreleased ON idempotency_keys (survey_id, key_hash)
            WHERE released = 0""",
    ),
    # 9: intake flat as the table grows. Released responses are keyed by survey, bucket (ids.
    # bucket_of: 8 random bits of the id), release number and id: each release appends at the
    # end of each bucket instead of at random places in one index the size of the table; an
    # export reads the buckets in order, each sorted by id (ids.py).
    (
        """CREATE TABLE responses_by_bucket (
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            bucket INTEGER NOT NULL,
            release_number INTEGER NOT NULL,
            response_id TEXT NOT NULL,
            answers TEXT NOT NULL,
            released_day TEXT NOT NULL,
            PRIMARY KEY (survey_id, bucket, release_number, response_id)){without_rowid}""",
        (f"INSERT INTO responses_by_bucket (survey_id, bucket, release_number, response_id, "  # noqa: S608  # nosec B608
         f"answers, released_day) SELECT survey_id, {bucket_sql('response_id')}, "
         "release_number, response_id, answers, released_day FROM responses ORDER BY 1, 2, 3, 4"),
        "DROP TABLE responses",
        "ALTER TABLE responses_by_bucket RENAME TO responses",
    ),
    # 10: idempotency records kept IDEMPOTENCY_DAYS after their release, not until the close:
    # each carries its release's day (those released before this step, the day of the step),
    # and a release deletes the survey's expired ones through an index by day.
    (
        "ALTER TABLE idempotency_keys ADD COLUMN released_day TEXT",
        lambda db: db.execute("UPDATE idempotency_keys SET released_day = ? WHERE released = 1",
                              (today(),)),
        """CREATE INDEX idempotency_by_day ON idempotency_keys (survey_id, released_day)
            WHERE released = 1""",
    ),
    # 11: the pending pool keeps a request's responses as one sealed group with its size (a
    # batch of 10,000 is one insert and one delete, not 10,000 of each); the rows of before
    # are groups of one. The size comes before the group, so a release reads the sizes of a
    # range of groups without their overflow pages. The first statement locks the pool until
    # the step commits (PostgreSQL: ACCESS EXCLUSIVE), so a replica still running the release
    # before cannot add a response between the copy and the drop; one that adds it after
    # writes a group of one (the default).
    (
        "ALTER TABLE pending ADD COLUMN size INTEGER NOT NULL DEFAULT 1",
        """CREATE TABLE pending_groups (
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            pending_id TEXT NOT NULL,
            size INTEGER NOT NULL DEFAULT 1 CHECK (size >= 1),
            answers TEXT NOT NULL,
            PRIMARY KEY (survey_id, pending_id)){without_rowid}""",
        """INSERT INTO pending_groups (survey_id, pending_id, size, answers)
            SELECT survey_id, pending_id, size, answers FROM pending
            ORDER BY survey_id, pending_id""",
        "DROP TABLE pending",
        "ALTER TABLE pending_groups RENAME TO pending",
    ),
    # 12: a pending group keeps its request's idempotency claim (keyed hash and body MAC) until
    # its release files it as an idempotency record: a keyed submission writes to the small
    # pending pool only, not to the records of every request of the last IDEMPOTENCY_DAYS (two
    # B-trees of them: the records and their index of unreleased ones, which goes). Records
    # made before this step and not yet released are kept as released this day (they still
    # answer retries, and expire IDEMPOTENCY_DAYS from now).
    # The records first, then the pool: the order intake of the release before takes them in.
    (
        "DROP INDEX idempotency_unreleased",
        lambda db: db.execute("UPDATE idempotency_keys SET released = 1, released_day = ? "
                              "WHERE released = 0", (today(),)),
        "ALTER TABLE pending ADD COLUMN key_hash TEXT",
        "ALTER TABLE pending ADD COLUMN body_mac TEXT",
        """CREATE UNIQUE INDEX pending_by_key ON pending (survey_id, key_hash)
            WHERE key_hash IS NOT NULL""",
    ),
    # 13: a keyed pending group's id is its claim's key hash, so the primary key finds a retry
    # and a keyed submission writes one B-tree, not two (the pool and its index of keys, which
    # goes). Ids made before are 16 characters, key hashes 64: no group's new id is another's.
    # The index goes first: that locks the pool until the step commits (PostgreSQL: ACCESS
    # EXCLUSIVE), so a replica still running the release before cannot add a keyed group under
    # a random id after the renaming (its insert names the index, and fails from then on).
    (
        "DROP INDEX pending_by_key",
        "UPDATE pending SET pending_id = key_hash WHERE key_hash IS NOT NULL",
    ),
    # 14: who answered, unseen in a copy without the key. The unspent tokens' rows lay in the
    # order they were minted (cell offsets, ctid, xmin: one mint request per invitee made one
    # row each), so the places that spent ones left empty named the invitees who answered. A
    # token minted from now on proves itself under the storage key and is stored only once
    # spent, as a keyed hash in `spent_tokens`, where no other token's row is touched. The
    # unspent tokens of before are copied, in the order of their keyed hashes, into a new
    # table in one transaction (one xmin, no gaps), which then takes the old one's name; a
    # spent one is still deleted from it, which tells nothing of which token it was.
    (
        """CREATE TABLE spent_tokens (
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            token_hash TEXT NOT NULL,
            PRIMARY KEY (survey_id, token_hash)){without_rowid}""",
        """CREATE TABLE tokens_by_hash (
            survey_id TEXT NOT NULL REFERENCES surveys (survey_id),
            token_hash TEXT NOT NULL,
            PRIMARY KEY (survey_id, token_hash)){without_rowid}""",
        """INSERT INTO tokens_by_hash (survey_id, token_hash)
            SELECT survey_id, token_hash FROM invitation_tokens ORDER BY token_hash, survey_id""",
        "DROP TABLE invitation_tokens",
        "ALTER TABLE tokens_by_hash RENAME TO invitation_tokens",
    ),
]
LATEST = len(STEPS)
KEYED = 6  # the first step whose database is keyed by the storage key


class SchemaTooNew(ConfigurationError):
    """The database was migrated by a newer release than this one."""


def version(db: Connection) -> int:
    """The schema version recorded in the database (0 for an empty one or one written before
    versions were recorded). Call inside a transaction."""
    db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    rows = db.query("SELECT version FROM schema_version")
    if not rows:
        db.execute("INSERT INTO schema_version (version) VALUES (0)")
        return 0
    return int(rows[0][0])


def migrate(db: Connection) -> int:
    """Run every step the database lacks, one transaction each; return the version reached."""
    while True:
        with db.transaction():
            db.lock_database()
            current = version(db)
            if current > LATEST:
                raise SchemaTooNew(
                    f"the database's schema is version {current}, newer than this release of "
                    f"ldp-survey knows (version {LATEST}): upgrade ldp-survey before starting "
                    "it on this database")
            if current >= KEYED:  # before anything else reads or writes keyed rows
                check_key(db)
            if current == LATEST:
                return current
            for statement in STEPS[current]:
                if callable(statement):
                    statement(db)
                else:
                    db.execute(statement.replace("{without_rowid}", db.without_rowid))
            db.execute("UPDATE schema_version SET version = ?", (current + 1,))
