"""The worker's secrets, against a process of the worker's own user (a
command the local sandbox runs, a hostile one among them).

The worker marks its process not dumpable (``hide_from_other_processes()``):
another process of its user can no longer read ``/proc/<pid>/environ``, where
OPENAI_API_KEY is. Root reads it all the same, and so does any process of
root's here, whatever its capabilities (checked): the test runs both sides as
an ordinary user, ``nobody`` when it runs as root (as CI does)."""

import inspect
import os
import shutil
import subprocess
import sys

import pytest
from sandbox_agent.tools import ACTIVITIES
from sandbox_agent.workflow import SandboxAgentWorkflow

from sandbox_agent_runtime import worker
from sandbox_agent_runtime.settings import WorkerSettings
from sandbox_agent_runtime.testing.support import SETTINGS
from sandbox_agent_runtime.worker import hide_from_other_processes

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="prctl is Linux's")

KEY = "sk-worker-secret-0123456789"
NOBODY = 65534


def as_ordinary_user() -> tuple[list[str], str]:
    """How to run a command as an ordinary user, and a Python it can run."""
    if os.geteuid() != 0:
        return [], sys.executable
    python = "/usr/bin/python3"
    if shutil.which("setpriv") is None or not os.access(python, os.X_OK):
        pytest.skip("as root, this test needs setpriv and /usr/bin/python3 to run as nobody")
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"], python


@pytest.mark.parametrize("hidden", [True, False], ids=["hidden", "not-hidden"])
def test_a_process_of_the_workers_user_cannot_read_its_environment(hidden: bool) -> None:
    # A process holding the key, which hides as the worker does (the same
    # function's code) or does not; then a second process of the same user
    # reads its environment.
    prefix, python = as_ordinary_user()
    hide = inspect.getsource(hide_from_other_processes)
    script = f"import ctypes, sys, time\n{hide}\nif {hidden}: hide_from_other_processes()\n"
    script += "print('ready', flush=True)\ntime.sleep(30)\n"
    with subprocess.Popen(
        [*prefix, python, "-c", script], env={"OPENAI_API_KEY": KEY}, stdout=subprocess.PIPE
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == b"ready\n"
            reader = [*prefix, "cat", f"/proc/{holder.pid}/environ"]
            read = subprocess.run(reader, capture_output=True, text=True, timeout=10)
        finally:
            holder.kill()

    if hidden:
        assert read.returncode != 0 and KEY not in read.stdout
        assert "Permission denied" in read.stderr
    else:
        assert KEY in read.stdout  # so the hidden case would have found it too


def test_the_worker_hides_before_it_reads_a_credential_or_connects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    async def connected(*arguments: object) -> None:
        calls.append("connect")

    def read() -> WorkerSettings:
        calls.append("read")
        return SETTINGS

    monkeypatch.setattr(worker, "hide_from_other_processes", lambda: calls.append("hide"))
    monkeypatch.setattr(worker, "worker_settings", read)
    monkeypatch.setattr(worker, "run_worker", connected)
    worker.main(SandboxAgentWorkflow, ACTIVITIES, [])
    assert calls == ["hide", "read", "connect"]
