"""A local sandbox that fails on cue, as a remote one whose service hiccups
or refuses would; and one whose workspaces are looked at as they go."""

import tarfile
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from agents.sandbox.errors import ExecTransportError, WorkspaceStartError
from agents.sandbox.sandboxes.unix_local import UnixLocalSandboxClient
from agents.sandbox.session.pty_types import PtyExecUpdate
from agents.sandbox.session.sandbox_client import BaseSandboxClient
from agents.sandbox.session.sandbox_session import SandboxSession
from agents.sandbox.session.sandbox_session_state import SandboxSessionState
from agents.sandbox.types import ExecResult
from temporalio.exceptions import ApplicationError


def unreachable_image() -> WorkspaceStartError:
    """Creating the session fails for good, as with an image that does not exist."""
    return WorkspaceStartError(
        path=Path("/workspace"), message="the sandbox image does not exist", retryable=False
    )


def deleted_sandbox() -> ExecTransportError:
    """A command fails for good, as when the sandbox was deleted under the run."""
    return ExecTransportError(command=["true"], message="the sandbox was deleted", retryable=False)


def busy_sandbox() -> ApplicationError:
    """A command fails for now, and the sandbox service asks for the next
    attempt at once, as a Retry-After would: the retry policy still counts the
    attempts, but a test need not sit through its back-off."""
    return ApplicationError(
        "the sandbox is busy", type="SandboxBusy", next_retry_delay=timedelta(milliseconds=10)
    )


class FailingSandbox(UnixLocalSandboxClient):
    """Raises the given errors, one per attempt, when creating the session
    or running a command; then behaves as the real local sandbox."""

    def __init__(
        self,
        *,
        create_errors: Sequence[Exception] = (),
        command_errors: Sequence[Exception] = (),
    ) -> None:
        super().__init__(inherit_host_environment=False)
        self.create_errors = list(create_errors)
        self.command_errors = list(command_errors)
        self.commands_attempted = 0

    async def create(self, **kwargs: object) -> SandboxSession:
        if self.create_errors:
            raise self.create_errors.pop(0)
        return self._failing_commands(await super().create(**kwargs))  # type: ignore[arg-type]

    async def resume(self, state: SandboxSessionState) -> SandboxSession:
        return self._failing_commands(await super().resume(state))

    def _failing_commands(self, session: SandboxSession) -> SandboxSession:
        run_command = session.pty_exec_start

        async def pty_exec_start(*args: object, **kwargs: object) -> object:
            self.commands_attempted += 1
            if self.command_errors:
                raise self.command_errors.pop(0)
            return await run_command(*args, **kwargs)  # type: ignore[arg-type]

        session.pty_exec_start = pty_exec_start  # type: ignore[method-assign,assignment]
        return session


class UnstoppableSandbox(UnixLocalSandboxClient):
    """A sandbox whose stop fails for good, as one at its process limit
    can (its stop runs commands in it); it can still be deleted."""

    async def create(self, **kwargs: object) -> SandboxSession:
        return self._unstoppable(await super().create(**kwargs))  # type: ignore[arg-type]

    async def resume(self, state: SandboxSessionState) -> SandboxSession:
        return self._unstoppable(await super().resume(state))

    def _unstoppable(self, session: SandboxSession) -> SandboxSession:
        async def stop() -> None:
            raise ApplicationError("the sandbox cannot start a process to stop", non_retryable=True)

        session.stop = stop  # type: ignore[method-assign]
        return session


class UncountableSandbox(UnixLocalSandboxClient):
    """A sandbox in which, once the agent has run a command, the workspace's
    census cannot start its processes, as in one that a fork bomb holds at
    its process limit; the agent's own commands run."""

    def __init__(self) -> None:
        super().__init__(inherit_host_environment=False)
        self.bombed = False

    async def create(self, **kwargs: object) -> SandboxSession:
        return self._uncountable(await super().create(**kwargs))  # type: ignore[arg-type]

    async def resume(self, state: SandboxSessionState) -> SandboxSession:
        return self._uncountable(await super().resume(state))

    def _uncountable(self, session: SandboxSession) -> SandboxSession:
        run, run_command = session.exec, session.pty_exec_start

        async def exec(*command: str | Path, **options: Any) -> ExecResult:
            if self.bombed and "find . ! -type d" in " ".join(str(part) for part in command):
                cannot = b"sh: can't fork: Resource temporarily unavailable"
                return ExecResult(stdout=b"", stderr=cannot, exit_code=2)
            return await run(*command, **options)

        async def pty_exec_start(*command: str | Path, **options: Any) -> PtyExecUpdate:
            self.bombed = True
            return await run_command(*command, **options)

        session.exec = exec  # type: ignore[method-assign]
        session.pty_exec_start = pty_exec_start  # type: ignore[method-assign]
        return session


class UndeletableSandbox(UnixLocalSandboxClient):
    """A sandbox service that refuses, for good, to delete a sandbox."""

    async def delete(self, session: SandboxSession) -> SandboxSession:
        raise ApplicationError("the sandbox service refused to delete it", non_retryable=True)


def watched(client: BaseSandboxClient, deleted: list[list[str]]) -> BaseSandboxClient:  # type: ignore[type-arg]
    """``client``, noting in ``deleted``, as it deletes each sandbox, the
    files its workspace held (as the sandbox itself archives them: any backend)."""
    delete = client.delete

    async def noting(session: SandboxSession) -> SandboxSession:
        archive = await session.persist_workspace()
        with tarfile.open(fileobj=archive, mode="r|*") as tar:
            files = [member.name.removeprefix("./") for member in tar if member.isfile()]
        deleted.append(sorted(files))
        return await delete(session)

    client.delete = noting  # type: ignore[method-assign]
    return client
