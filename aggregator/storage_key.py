"""The storage key: a secret kept outside the database files (STORAGE_KEY), from which HKDF
derives one subkey per use, so that a copy of the files alone matches no token or idempotency
key and reads no pending answer.

- token hashes: HMAC-SHA256(token subkey, hex SHA-256(token));
- idempotency records: HMAC-SHA256(idempotency subkey, hex SHA-256(key)) as the record's id and
  HMAC-SHA256(idempotency subkey, ids.body_mac(key, body)) as its body MAC;
- pending answers: AES-256-GCM under the pending subkey, a random 96-bit nonce per request's
  group of rows, the survey id as associated data, stored as base64(nonce || ciphertext || tag).

Each keyed hash is an HMAC of what the store kept before (migration 6 converts those rows
without the secrets they came from). The database keeps a check value, HMAC(check subkey,
CHECK_LABEL), so a start with another key is refused instead of silently losing tokens and
pending answers."""

import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from functools import cached_property

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .ids import body_mac, hash_text

SUBKEYS = ("tokens", "idempotency", "pending", "check")  # HKDF info labels, one per use
CHECK_LABEL = b"ldp-survey storage key check"
NONCE_BYTES = 12  # AES-GCM's 96-bit nonce


def derive(secret: bytes, label: str) -> bytes:
    """HKDF-SHA256(secret, salt none, info "ldp-survey/<label>"): a 256-bit subkey."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                info=f"ldp-survey/{label}".encode()).derive(secret)


def keyed(subkey: bytes, stored: str) -> str:
    """Hex HMAC-SHA256(subkey, a stored hex digest): the keyed form of what was kept before."""
    return hmac.new(subkey, stored.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class StorageKeys:
    """The subkeys derived from one storage key."""

    tokens: bytes
    idempotency: bytes
    pending: bytes
    check: bytes

    @cached_property
    def _pending_cipher(self) -> AESGCM:
        """AES-256-GCM under the pending subkey, made once (each call makes its own context)."""
        return AESGCM(self.pending)

    @classmethod
    def from_secret(cls, secret: bytes) -> "StorageKeys":
        return cls(*(derive(secret, label) for label in SUBKEYS))

    def check_value(self) -> str:
        """What the database keeps to recognise this key: HMAC(check subkey, CHECK_LABEL)."""
        return hmac.new(self.check, CHECK_LABEL, hashlib.sha256).hexdigest()

    def token_hash(self, token: str) -> str:
        return keyed(self.tokens, hash_text(token))

    def idempotency_id(self, key: str) -> str:
        return keyed(self.idempotency, hash_text(key))

    def body_mac(self, key: str, body: str) -> str:
        return keyed(self.idempotency, body_mac(key, body))

    def seal(self, survey_id: str, answers: str) -> str:
        """Pending responses' canonical JSON, encrypted for the database under a random nonce
        of its own."""
        nonce = secrets.token_bytes(NONCE_BYTES)
        sealed = self._pending_cipher.encrypt(nonce, answers.encode(), survey_id.encode())
        return binascii.b2a_base64(nonce + sealed, newline=False).decode()  # base64.b64encode

    def open(self, survey_id: str, sealed: str) -> str:
        """The canonical JSON `seal` encrypted; InvalidTag if the row was not sealed under
        this key for this survey."""
        return self.open_many(survey_id, [sealed])[0]

    def open_many(self, survey_id: str, rows: list[str]) -> list[str]:
        """`open` of each row, with one cipher object."""
        cipher, survey = self._pending_cipher, survey_id.encode()
        opened = []
        for sealed in rows:
            raw = binascii.a2b_base64(sealed)  # as base64.b64decode
            opened.append(cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], survey).decode())
        return opened
