"""The tests' stand-in person: an approver's key pair.

Every worker of the tests trusts it: those in this process from the moment
this module is imported (``approvers.trust``), worker processes through
``APPROVERS`` (``ENVIRONMENT``, which processes.service_environment() adds),
and the starter as a process signs with it (``APPROVER_KEY_FILE``)."""

import json
import tempfile
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.client import WorkflowHandle

from sandbox_agent_runtime import approvals, approvers
from sandbox_agent_runtime.shared import DECIDE

KEY = Ed25519PrivateKey.generate()
PUBLIC = approvers.public_text(KEY.public_key())
approvers.trust({PUBLIC: "tests"})

_KEY_FILE = Path(tempfile.mkdtemp(prefix="approver-")) / "approver.pem"
_KEY_FILE.write_bytes(
    KEY.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
)
_KEY_FILE.chmod(0o600)
# What a worker process and a starter process need to approve as the tests.
ENVIRONMENT = {
    approvers.APPROVERS_VARIABLE: f"tests={PUBLIC}",
    approvers.KEY_FILE_VARIABLE: str(_KEY_FILE),
}


def signed(
    workflow_id: str,
    run_id: str,
    request: dict[str, Any],
    approve: bool,
    reason: str = "",
    always: bool = False,
    key: Ed25519PrivateKey = KEY,
) -> dict[str, Any]:
    """The decide update's argument, signed with ``key`` (the tests' own by default)."""
    return approvers.signed_decision(key, workflow_id, run_id, request, approve, reason, always)


async def run_id_of(handle: WorkflowHandle[Any, Any]) -> str:
    """The run of ``handle``'s chain that a decision goes to (its latest)."""
    return str((await handle.describe()).run_id)


async def decide(
    handle: WorkflowHandle[Any, Any],
    request: dict[str, Any],
    approve: bool,
    reason: str = "",
    always: bool = False,
) -> str:
    """Decide on ``request`` (as the run listed it) as a person would."""
    decision = signed(handle.id, await run_id_of(handle), request, approve, reason, always)
    return str(await handle.execute_update(DECIDE, decision, result_type=str))


def command_request(call_id: str, command: str) -> dict[str, Any]:
    """The request for ``command``, as the run shows it, without asking the
    run (a query replays a run that no worker caches)."""
    arguments = json.dumps({"cmd": command})
    return {
        "call_id": call_id,
        "tool": "exec_command",
        "detail": approvals.detail_of("exec_command", arguments),
    }
