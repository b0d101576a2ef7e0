"""The aggregator's Ed25519 key: manifests are signed as bytes, never re-serialized JSON.

Development creates the key pair in the instance folder (mode 0600) on first start.
Production requires KEY_FILE, so every replica serves the same key.
"""

import base64
import os
import warnings
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ldpsurvey.aggregator.config.instance import exposed, private_file
from ldpsurvey.aggregator.exceptions import ConfigurationError
from ldpsurvey.shared.survey.manifest import key_id


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


def parse_key(pem: bytes, source: str) -> SigningKey:
    """A PEM (PKCS#8) Ed25519 private key."""
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{source} does not hold an Ed25519 private key")
    return SigningKey(key)


def load_key(path: Path, refuse_exposed: bool) -> SigningKey:
    """The key file; one that its group or others can read is refused (ConfigurationError)
    with refuse_exposed (production), else loaded with a warning."""
    if exposed(path):
        message = (f"the signing key file {path} can be read by others than its owner: "
                   f"chmod 600 {path} (or create it with install -m 600)")
        if refuse_exposed:
            raise ConfigurationError(message)
        warnings.warn(message, stacklevel=3)
    return parse_key(path.read_bytes(), str(path))


def new_key_pem() -> bytes:
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())


def write_key_file(path: Path) -> None:
    """A new key in a new file readable only by its owner (mode 0600, whatever the umask)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(new_key_pem())


def load_or_create(path: Path) -> SigningKey:
    """The development behaviour: use the key file, creating it (0600) on first start."""
    return parse_key(private_file(path, new_key_pem), str(path))
