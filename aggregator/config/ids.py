"""Random identifiers and secrets from the OS's CSPRNG, and the one-way hash of the secrets
(they are 128 or 256 random bits, so no salt or stretching is needed). Researchers' API keys
and sessions are stored under it; respondents' tokens and idempotency keys under an HMAC of it
keyed by the storage key (storage_key.py)."""

import base64
import hashlib
import hmac
import re
import secrets


def new_ids(count: int) -> list[str]:
    """`count` random opaque identifiers (96 bits each, URL-safe), from one CSPRNG call."""
    text = base64.urlsafe_b64encode(secrets.token_bytes(12 * count)).decode()
    return [text[i:i + 16] for i in range(0, 16 * count, 16)]  # 12 bytes: 16 characters each


# Released responses are stored by (survey, bucket, release, id), the bucket being the first 8
# bits of the random id (its first character's 6 and the second's top 2, in base64url's
# alphabet): a release appends at the end of each of the BUCKETS buckets, a few pages that stay
# in memory, however large the table (random ids alone would land each insert on a random
# page of an index that outgrows memory); an export reads bucket after bucket, each sorted by
# id, which is the order of the random ids, uniformly random. More buckets would make export
# statements smaller (released / BUCKETS rows at the most) but cost each release a page per
# bucket: SQLite writes each page a transaction touches whole to its log (bench/HISTORY.md).
BUCKETS = 256
BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_INDEX = {c: i for i, c in enumerate(BASE64URL)}


def _bucket(prefix: str) -> int:
    return _INDEX.get(prefix[0:1], 0) * 4 + _INDEX.get(prefix[1:2], 0) // 16


_BUCKET_OF_PREFIX = {a + b: _bucket(a + b) for a in BASE64URL for b in BASE64URL}


def bucket_of(response_id: str) -> int:
    """The response's bucket, 0 to BUCKETS - 1 (bucket_sql in SQL), looked up by its first two
    characters (any other id, as computed)."""
    bucket = _BUCKET_OF_PREFIX.get(response_id[:2])
    return _bucket(response_id) if bucket is None else bucket


def bucket_sql(column: str) -> str:
    """bucket_of as an SQL expression over a column, the same in SQLite and PostgreSQL."""
    def index(position: int) -> str:
        cases = " ".join(f"WHEN '{c}' THEN {i}" for i, c in enumerate(BASE64URL))
        return f"(CASE substr({column}, {position}, 1) {cases} ELSE 0 END)"
    return f"({index(1)} * 4 + {index(2)} / 16)"


# Any survey id this aggregator ever made: base64url (release 0.1.0) or base32 (since).
SURVEY_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


API_KEY_ID = re.compile(r"key-[0-9a-f]{16}")  # what `new_api_key_id` makes (and migration 3)


def new_api_key_id() -> str:
    """An API key's public id (64 random bits): named in listings and revocations, never a
    secret."""
    return f"key-{secrets.token_hex(8)}"


def new_survey_id() -> str:
    """A survey id: 104 random bits in lowercase base32 (a-z, 2-7), so it is safe in URLs and
    shells and never starts with '-', which a command line would read as an option."""
    return base64.b32encode(secrets.token_bytes(13)).decode().rstrip("=").lower()


def hash_text(text: str | bytes) -> str:
    """Hex SHA-256: how API keys and sessions are stored, and what the storage key's HMACs of
    tokens and idempotency keys are taken of."""
    return hashlib.sha256(text if isinstance(text, bytes) else text.encode()).hexdigest()


def body_mac(idempotency_key: str, body: str) -> str:
    """Hex HMAC-SHA256 of a request's canonical body, keyed by its Idempotency-Key: it tells a
    retry from a different body, yet without the key (which only the client holds) it reveals
    nothing of the answers, unlike a plain hash of so small an answer space. Stored as an HMAC
    of it under the storage key."""
    return hmac.new(idempotency_key.encode(), body.encode(), hashlib.sha256).hexdigest()
