"""The storage key: a secret kept outside the database files (STORAGE_KEY), from which HKDF
derives one subkey per use, so that a copy of the files alone matches no token or idempotency
key and reads no pending answer.

- invitation tokens: 16 random bytes and the first 16 bytes of HMAC-SHA256(invitation subkey,
  survey id "/" those bytes), in URL-safe base64 (43 characters): the token proves itself, so
  nothing of it is stored until it is spent;
- token hashes (of spent tokens, and of unspent ones minted before schema step 14):
  HMAC-SHA256(token subkey, hex SHA-256(token));
- idempotency records: HMAC-SHA256(idempotency subkey, hex SHA-256(key)) as the record's id and
  HMAC-SHA256(idempotency subkey, ids.body_mac(key, body)) as its body MAC;
- pending answers: AES-256-GCM under the pending subkey, a random 96-bit nonce per request's
  group of rows, the survey id as associated data, stored as base64(nonce || ciphertext || tag).

Each keyed hash is an HMAC of what the store kept before (migration 6 converts those rows
without the secrets they came from). The database keeps a check value, HMAC(check subkey,
CHECK_LABEL), so a start with another key is refused instead of silently losing tokens and
pending answers."""

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from functools import cached_property

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ldpsurvey.aggregator.config.ids import body_mac, hash_text

SUBKEYS = ("tokens", "idempotency", "pending", "check", "invitations")  # HKDF info labels
CHECK_LABEL = b"ldp-survey storage key check"
NONCE_BYTES = 12  # AES-GCM's 96-bit nonce
INVITATION_BYTES = 16  # an invitation token's random part, and its tag's length


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
    invitations: bytes

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

    def invitation(self, survey_id: str) -> str:
        """A new invitation token of the survey: random bytes (secrets) and their tag."""
        nonce = secrets.token_bytes(INVITATION_BYTES)
        return self._spelled(nonce + self._tag(survey_id, nonce))

    def invited(self, survey_id: str, token: str) -> bool:
        """Whether `token` is an invitation token this key minted for the survey (spent or
        not: the spent ones' hashes are kept apart, store.spend_token), spelled as minted (the
        last character's two spare bits zero: else one token would have four spellings, each
        spent apart)."""
        try:
            raw = base64.urlsafe_b64decode(token + "=")
        except ValueError:
            return False
        nonce, tag = raw[:INVITATION_BYTES], raw[INVITATION_BYTES:]
        return (len(raw) == 2 * INVITATION_BYTES and self._spelled(raw) == token
                and hmac.compare_digest(tag, self._tag(survey_id, nonce)))

    @staticmethod
    def _spelled(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def _tag(self, survey_id: str, nonce: bytes) -> bytes:
        """HMAC-SHA256(invitation subkey, survey id "/" nonce), its first INVITATION_BYTES."""
        message = survey_id.encode() + b"/" + nonce
        return hmac.new(self.invitations, message, hashlib.sha256).digest()[:INVITATION_BYTES]

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
