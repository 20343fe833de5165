"""Who may decide: signed decisions, so only a person can approve.

Anything that reaches the Temporal frontend can send the ``decide`` update,
the agent's own commands included, so a decision counts only when one of the
approvers the worker trusts (``APPROVERS``, their Ed25519 public keys) signed
it, over what they were shown (``message()``); a signature is good once, and
one that does not verify is refused before it reaches history. The guarantee
rests on the private keys: keep them where the worker's user, and so the
agent's commands, cannot read them. The keys are set once, at start
(``trust()``); a replay runs no validator and needs none.
"""

import base64
import binascii
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from sandbox_agent_runtime.service import current

# The worker's approvers: comma-separated NAME=PUBLIC_KEY (base64).
APPROVERS_VARIABLE = "APPROVERS"
# The approver's private key, for the starter.
KEY_FILE_VARIABLE = "APPROVER_KEY_FILE"


def default_key_file() -> Path:
    """Where the starter keeps the approver's private key unless
    ``APPROVER_KEY_FILE`` says.

    Returns:
        ``~/.config/<service>/approver.pem``, not expanded.
    """
    return Path(f"~/.config/{current().name}/approver.pem")


# The approvers this worker trusts: public key (base64) -> name.
_trusted: dict[str, str] = {}


class BadKey(ValueError):
    """The approver's key file is missing or not a key."""


def public_text(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def trust(approvers: Mapping[str, str]) -> None:
    """The approvers (public key -> name) whose decisions this worker takes."""
    _trusted.clear()
    _trusted.update(approvers)


def digest(text: str) -> str:
    """What a signature says the person was shown."""
    return hashlib.sha256(text.encode()).hexdigest()


def message(
    workflow_id: str,
    run_id: str,
    request: Mapping[str, object],
    approve: bool,
    always: bool,
    reason: str,
) -> bytes:
    """The bytes an approver signs: the request as shown, and the decision.

    The compact, key-sorted JSON of the run, the call, the digest of what was
    shown, the decision and its reason, every character outside " " to "~"
    escaped as \\uXXXX (as ``json.dumps`` does): a client that signs in
    another language writes exactly these bytes (the API's page does, in
    ``canonicalJson``)."""
    return json.dumps(
        {
            "workflow_id": workflow_id,
            "run_id": run_id,
            "call_id": request.get("call_id"),
            "tool": request.get("tool"),
            "shown": digest(str(request.get("detail", ""))),
            "approve": approve,
            "always": always,
            "reason": reason,
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode()


def sign(key: Ed25519PrivateKey, signed: bytes) -> tuple[str, str]:
    """(the approver's public key, the signature), both base64."""
    return public_text(key.public_key()), base64.b64encode(key.sign(signed)).decode()


def signed_decision(
    key: Ed25519PrivateKey,
    workflow_id: str,
    run_id: str,
    request: Mapping[str, object],
    approve: bool,
    reason: str = "",
    always: bool = False,
) -> dict[str, object]:
    """A person's decision on a request for approval, signed with their key.

    Args:
        key: the approver's private key (``load_key``).
        workflow_id: the run's workflow id.
        run_id: the run's id (in its chain).
        request: the request, as the run listed it.
        approve: whether to approve the call.
        reason: why, for the run's history and the model.
        always: approve this kind of call for the rest of the run.

    Returns:
        The ``decide`` update's argument (the approver's public key and the
        signature among it).
    """
    approver, signature = sign(key, message(workflow_id, run_id, request, approve, always, reason))
    return {
        "call_id": request.get("call_id"),
        "approve": approve,
        "reason": reason,
        "always": always,
        "approver": approver,
        "signature": signature,
    }


def refusal(signed: bytes, approver: str, signature: str) -> str | None:
    """Why a decision does not count (None: it does): its signer is not an
    approver of this worker, or the signature is not over ``signed``."""
    name = _trusted.get(approver)
    if name is None:
        if not approver:
            return "the decision is not signed by an approver (decide with the starter: docs/approvals.md)"
        return "the decision is signed by a key that is not one of this worker's APPROVERS"
    try:
        Ed25519PublicKey.from_public_bytes(base64.b64decode(approver)).verify(
            base64.b64decode(signature, validate=True), signed
        )
    except (InvalidSignature, binascii.Error, ValueError):
        return f"the signature of approver {name!r} does not match this request and decision"
    return None


def load_key(path: Path) -> Ed25519PrivateKey:
    """The approver's private key.

    Args:
        path: a PEM file holding an unencrypted Ed25519 private key.

    Returns:
        The key; ``BadKey``, in one line, if the file is missing or holds none.
    """
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except OSError as e:
        raise BadKey(
            f"{KEY_FILE_VARIABLE}: cannot read the approver's key {str(path)!r} ({e.strerror}); "
            "make one with --new-approver-key NAME, or set the variable to yours."
        ) from e
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:
        raise BadKey(
            f"{KEY_FILE_VARIABLE}: {str(path)!r} is not an unencrypted PEM private key."
        ) from e
    if not isinstance(key, Ed25519PrivateKey):
        raise BadKey(f"{KEY_FILE_VARIABLE}: {str(path)!r} holds a key that is not Ed25519.")
    return key


def new_key(path: Path) -> Ed25519PublicKey:
    """A new key pair: the private key written to ``path`` (readable by its
    owner only; never over an existing file), the public key returned."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(pem)
    return key.public_key()
