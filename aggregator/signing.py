"""The aggregator's Ed25519 key: manifests are signed as bytes, never re-serialized JSON.

Development creates the key pair in the instance folder (mode 0600) on first start.
Production requires KEY_FILE, so every replica serves the same key.
"""

import base64
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ldpsurvey.shared.manifest import key_id


class SigningKey:
    """The private key and what clients need to pin it: raw public key and its id."""

    def __init__(self, private_key: Ed25519PrivateKey):
        self._private_key = private_key
        self.public_bytes = private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.key_id = key_id(self.public_bytes)

    def sign(self, message: bytes) -> bytes:
        return self._private_key.sign(message)

    def public_json(self) -> dict[str, str]:
        return {"algorithm": "Ed25519", "key_id": self.key_id,
                "public_key": base64.b64encode(self.public_bytes).decode()}


def load_key(path: Path) -> SigningKey:
    """Read a PEM (PKCS#8) Ed25519 private key."""
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path} does not hold an Ed25519 private key")
    return SigningKey(key)


def create_key_file(path: Path) -> SigningKey:
    """Generate a key pair and write the private key, readable only by its owner (0600)."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(pem)
        file.flush()
        os.fsync(file.fileno())
    try:
        os.link(temporary, path)  # atomic, and refuses to replace a key another worker wrote
    finally:
        temporary.unlink()
    return SigningKey(key)


def load_or_create(path: Path) -> SigningKey:
    """The development behaviour: use the key file, creating it on first start."""
    try:
        return load_key(path)
    except FileNotFoundError:
        try:
            return create_key_file(path)
        except FileExistsError:  # another worker created it first
            return load_key(path)
