"""Payloads encrypted end to end: AES-256-GCM, keys the Temporal server never sees.

With ``PAYLOAD_ENCRYPTION_KEYS`` set, every client of the service encrypts
each payload before it leaves the process (the prompt, model inputs and
answers, commands and their output, files, snapshots): Temporal's server, its
Web UI and the object store see ciphertext. The first key encrypts, every key
decrypts (rotation); a process that lacks a key says which one, never a
garbage decode; a payload that is not encrypted is read as it is. What is not
a payload (ids, activity names, failure messages, sizes) stays readable: a
render's docs/encryption.md says what. Unset: no encryption.
"""

import base64
import binascii
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

KEYS_VARIABLE = "PAYLOAD_ENCRYPTION_KEYS"

# The metadata of an encrypted payload.
ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"

KEY_BYTES = 32
NONCE_BYTES = 12
_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

# How a key is made (docs/encryption.md).
GENERATE = 'python -c "import base64, os; print(base64.b64encode(os.urandom(32)).decode())"'

ALLOWED = (
    f"KEY_ID=BASE64 pairs separated by commas, each key {KEY_BYTES} random bytes in base64 "
    f"(make one with: {GENERATE}), the key that encrypts first"
)


class BadKeys(ValueError):
    """PAYLOAD_ENCRYPTION_KEYS cannot be used; one line, which names the key
    id or position that is wrong but never shows a key."""


class UnknownKey(Exception):
    """A payload encrypted with a key this process does not hold."""


class WrongKey(Exception):
    """A payload that does not decrypt with the key of its key id."""


@dataclass(frozen=True)
class Keys:
    """The keys, by id; ``current`` encrypts."""

    current: str
    by_id: Mapping[str, bytes]


def parse_keys(value: str) -> Keys:
    """The keys of a PAYLOAD_ENCRYPTION_KEYS value; ``BadKeys`` for the
    first entry it cannot use."""
    by_id: dict[str, bytes] = {}
    entries = value.split(",")
    for number, entry in enumerate(entries, 1):
        entry = entry.strip()
        where = f"{KEYS_VARIABLE}: entry {number} of {len(entries)}"
        key_id, equals, encoded = entry.partition("=")
        key_id, encoded = key_id.strip(), encoded.strip()
        if not entry:
            raise BadKeys(f"{where} is empty: use {ALLOWED}.")
        if not equals:
            raise BadKeys(f"{where} has no '=' between its key id and its key: use {ALLOWED}.")
        if not encoded.strip("="):
            if len(key_id) >= 40:
                # A key alone, its base64 padding taken for the '=': its
                # "id" is the key, which a message never shows.
                raise BadKeys(f"{where} has no key id before its key: use {ALLOWED}.")
            raise BadKeys(f"{where}: the key of {key_id!r} is empty: use {ALLOWED}.")
        if not _KEY_ID.fullmatch(key_id):
            raise BadKeys(
                f"{where} has the key id {key_id[:64]!r}: a key id is 1 to 64 letters, digits, "
                f"'.', '_' or '-', starting with a letter or digit."
            )
        if key_id in by_id:
            raise BadKeys(f"{where}: the key id {key_id!r} is given twice; each id names one key.")
        try:
            key = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise BadKeys(f"{where}: the key of {key_id!r} is not base64: use {ALLOWED}.") from None
        if len(key) != KEY_BYTES:
            raise BadKeys(
                f"{where}: the key of {key_id!r} is {len(key)} bytes, not {KEY_BYTES}: use {ALLOWED}."
            )
        by_id[key_id] = key
    return Keys(current=next(iter(by_id)), by_id=by_id)


def keys_from(environ: Mapping[str, str]) -> Keys | None:
    """The keys PAYLOAD_ENCRYPTION_KEYS holds; None when it is unset. Set
    but empty, it is refused: a secret that did not reach the process (an
    empty Kubernetes Secret, a CI variable unset) must not turn encryption
    off unnoticed."""
    value = environ.get(KEYS_VARIABLE)
    if value is None:
        return None
    if not value.strip():
        raise BadKeys(
            f"{KEYS_VARIABLE} is set but empty: give the keys ({ALLOWED}), "
            "or unset it to run without encryption."
        )
    return parse_keys(value)


def _associated(key_id: str, context: bytes = b"") -> bytes:
    """GCM's associated data: the encoding and the key id, and what the
    ciphertext is bound to (``context``), if anything."""
    bound = ENCODING + b"\0" + key_id.encode()
    return bound + b"\0" + context if context else bound


class EncryptionCodec(PayloadCodec):
    """AES-256-GCM over each whole payload (its metadata and data), a fresh
    random nonce for each."""

    def __init__(self, keys: Keys) -> None:
        self.keys = keys
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys.by_id.items()}

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(payload) for payload in payloads]

    def encrypt(self, payload: Payload, context: bytes = b"") -> Payload:
        """``payload`` encrypted; with ``context``, it decrypts only with the
        same ``context`` (a workspace snapshot's: its conversation and key)."""
        key_id = self.keys.current
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[key_id].encrypt(
            nonce, payload.SerializeToString(), _associated(key_id, context)
        )
        return Payload(
            metadata={"encoding": ENCODING, KEY_ID: key_id.encode()}, data=nonce + sealed
        )

    def decrypt(self, payload: Payload, context: bytes = b"") -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        key_id = payload.metadata.get(KEY_ID, b"").decode(errors="replace")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise UnknownKey(
                f"a payload is encrypted with the key {key_id!r}, which {KEYS_VARIABLE} here "
                f"does not hold (it holds {', '.join(map(repr, self.keys.by_id))}): add that key"
            )
        nonce, sealed = payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:]
        try:
            plain = cipher.decrypt(nonce, sealed, _associated(key_id, context))
        except InvalidTag:
            raise WrongKey(
                f"a payload encrypted with the key {key_id!r} does not decrypt with the key "
                f"{KEYS_VARIABLE} here gives that id: the key was changed under the same id, "
                "or the payload was altered"
                + (", or it was encrypted for another place" if context else "")
            ) from None
        decrypted = Payload()
        decrypted.ParseFromString(plain)
        return decrypted


def codec_of(keys: Keys | None) -> EncryptionCodec | None:
    return EncryptionCodec(keys) if keys is not None else None
