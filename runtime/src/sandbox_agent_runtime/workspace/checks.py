"""The checks a request asks a run to make on what it left (evaluations:
run_request.Check), made in the run's own sandbox, on the worker's side, so
nothing the agent wrote ever runs anywhere else. A check's failure is its
result, never the run's: each says in a line what it found, and never what
a file holds (a link the agent made may point at anything the sandbox can
read)."""

import hashlib
import shlex
from pathlib import PurePosixPath
from typing import Any

from agents.sandbox.errors import ExecFailureError, ExecTimeoutError

from sandbox_agent_runtime.archives import UnsafeName, safe_name
from sandbox_agent_runtime.display import visible
from sandbox_agent_runtime.run_request import Check, CheckResult

# The most of a file a check reads (file_contains, file_sha256), and the
# most of a command's output its result keeps.
LARGEST_CHECKED = 10 * 1024 * 1024
LONGEST_DETAIL = 2000


def _last_lines(stdout: bytes, stderr: bytes) -> str:
    text = (stdout + stderr).decode(errors="replace").strip()
    lines = text.splitlines()[-20:]
    shown = visible("\n".join(lines), keep_lines=True)
    return shown[-LONGEST_DETAIL:]


async def _read(session: Any, path: PurePosixPath) -> bytes | str:
    """The file's bytes, or why they cannot be had, in a line."""
    try:
        stream = await session.read(path)
    except Exception as e:  # the SDK's and each backend's own errors
        return f"it cannot be read ({type(e).__name__})"
    try:
        data: bytes = stream.read(LARGEST_CHECKED + 1)
    finally:
        stream.close()
    if isinstance(data, str):
        data = data.encode()
    if len(data) > LARGEST_CHECKED:
        return f"it is over {LARGEST_CHECKED:,} bytes, the most a check reads"
    return data


async def check(session: Any, root: str, each: Check) -> CheckResult:
    """Make one check in ``session``, whose workspace is at ``root``."""
    if each.kind == "command":
        command = f"cd {shlex.quote(root)} && {each.command}"
        try:
            result = await session.exec(command, shell=["sh", "-c"], timeout=each.timeout)
        except (TimeoutError, ExecTimeoutError):
            return CheckResult(each.kind, False, each.command, f"it ran past {each.timeout:g} s")
        except ExecFailureError as e:
            return CheckResult(
                each.kind, False, each.command, f"it could not be run ({type(e).__name__})"
            )
        passed = result.exit_code == 0
        detail = (
            ""
            if passed
            else f"exit {result.exit_code}: {_last_lines(result.stdout, result.stderr)}"
        )
        return CheckResult(each.kind, passed, each.command, detail)
    try:
        path = PurePosixPath(root) / safe_name(each.path)
    except UnsafeName as e:
        return CheckResult(each.kind, False, each.path, f"not a path in the workspace: {e}")
    if each.kind == "file_exists":
        result = await session.exec(f"test -e {shlex.quote(str(path))}", shell=["sh", "-c"])
        return CheckResult(
            each.kind,
            result.exit_code == 0,
            each.path,
            "" if result.exit_code == 0 else "no such file",
        )
    data = await _read(session, path)
    if isinstance(data, str):
        return CheckResult(each.kind, False, each.path, data)
    if each.kind == "file_contains":
        found = each.text in data.decode(errors="replace")
        return CheckResult(
            each.kind, found, each.path, "" if found else "it does not hold the text"
        )
    if each.kind == "file_sha256":
        digest = hashlib.sha256(data).hexdigest()
        same = digest == each.sha256.lower()
        return CheckResult(each.kind, same, each.path, "" if same else f"its SHA-256 is {digest}")
    return CheckResult(
        each.kind, False, each.path, f"{each.kind!r} is not a check this worker makes"
    )
