"""The local backend: the agent's shell runs on the worker's own host.

Every command the agent runs executes as the worker's user, in a fresh
temporary directory that is removed at the end of the run. That is handy for
development and for trusted workloads; for anything you would not run on the
worker's machine yourself, generate the service with a remote sandbox
backend instead.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.sandbox.manifest import Manifest
from agents.sandbox.sandboxes.unix_local import (
    UnixLocalSandboxClient,
    UnixLocalSandboxClientOptions,
)
from agents.sandbox.session import SandboxSession
from agents.sandbox.session.sandbox_session_state import SandboxSessionState
from agents.sandbox.snapshot import SnapshotBase, SnapshotSpec
from temporalio import activity

from sandbox_agent_runtime.backends import Found, chosen_options, declared, found, run_labels

if TYPE_CHECKING:
    # Only for the type: the workflow imports this module (for the options of
    # each run) in Temporal's workflow sandbox, where the worker's settings have
    # no place (the workflow never reads them).
    from sandbox_agent_runtime.settings_types import WorkerSettings


# The SDK's own errors say which of them no retry can fix; there is no
# service behind this backend to add any, only a workspace that is gone.
NON_RETRYABLE_ERRORS: tuple[str, ...] = ("WorkspaceGone", "NotOurWorkspace")

# The SDK's default root, which the local client turns into a fresh temporary
# directory for each run (removed at the end of the run).
WORKSPACE_ROOT = "/workspace"


# Its credentials (any one set of these variables, and where to get them), its
# options (none) and whether its sandboxes live on the worker's host
# (host_bound()): the catalog's (catalog.toml).
REQUIRED_ENVIRONMENT, CREDENTIALS_URL, OPTIONS, host_bound = declared(__name__)


def options() -> dict[str, Any]:
    """The options of the local backend: it has none."""
    return chosen_options("local")


# The names the SDK gives the workspaces it makes, in the temporary directory.
WORKSPACE_PREFIX = "sandbox-local-"


def labels_file(workspace: Path) -> Path:
    """Where a workspace's labels are (its run, the service's task queue,
    ...): ``.<name>.labels.json`` beside it, out of the agent's reach."""
    return workspace.with_name(f".{workspace.name}.labels.json")


class WorkspaceGone(Exception):
    """A run's workspace is no longer on this host's disk."""


class NotOurWorkspace(Exception):
    """A session names a directory this client would never have made."""


def made_by_this_client(workspace: Path) -> bool:
    """Whether ``workspace`` is one this client makes for a run: a directory
    ``sandbox-local-*`` right in this host's temporary directory."""
    return workspace.parent == Path(tempfile.gettempdir()) and workspace.name.startswith(
        WORKSPACE_PREFIX
    )


class LocalWorkspaceClient(UnixLocalSandboxClient):
    """The SDK's local client, except that it never resumes a session whose
    workspace is gone: the SDK would make a new, empty directory in its place,
    and the agent would go on without its files and without a word. A
    workspace goes when the disk it was on does (a container recreated, a
    temporary directory cleaned up); the run then fails, saying so. Nor does
    it resume or remove a directory it would not have made for a run."""

    async def resume(self, state: SandboxSessionState) -> SandboxSession:
        workspace = Path(state.manifest.root)
        if not made_by_this_client(workspace):
            # Only a forged session state names another directory: resuming
            # it would run commands there, and the end of the run delete it.
            raise NotOurWorkspace(
                f"The run's session names {workspace}, which is not a workspace this "
                f"sandbox makes ({Path(tempfile.gettempdir()) / WORKSPACE_PREFIX}*): "
                "it is neither used nor removed."
            )
        if not workspace.is_dir():
            raise WorkspaceGone(
                f"The run's workspace {workspace} is not on this host's disk any more "
                "(the disk it was on is gone, or it was deleted): the run cannot go on."
            )
        return await super().resume(state)

    async def create(
        self,
        *,
        snapshot: SnapshotSpec | SnapshotBase | None = None,
        manifest: Manifest | None = None,
        options: UnixLocalSandboxClientOptions | None = None,
    ) -> SandboxSession:
        """A new workspace, its labels beside it when a run creates it."""
        session = await super().create(snapshot=snapshot, manifest=manifest, options=options)
        root = Path(session.state.manifest.root)
        if activity.in_activity() and made_by_this_client(root):
            labels_file(root).write_text(json.dumps(run_labels()))
        return session

    async def delete(self, session: SandboxSession) -> SandboxSession:
        """Remove the session's workspace, only if this client made it."""
        root = Path(session.state.manifest.root)
        if not made_by_this_client(root):
            return session
        deleted = await super().delete(session)
        labels_file(root).unlink(missing_ok=True)
        return deleted


def sandboxes() -> list[Found]:
    """Every workspace of this service on this host: those with labels
    (the reaper's; blocking)."""
    every = []
    for labels in Path(tempfile.gettempdir()).glob(f".{WORKSPACE_PREFIX}*.labels.json"):
        workspace = labels.with_name(labels.name[1:].removesuffix(".labels.json"))
        try:
            said = json.loads(labels.read_text())
            created = datetime.fromtimestamp(labels.stat().st_mtime, UTC)
        except (OSError, ValueError):
            continue  # removed meanwhile, or not ours to read
        if isinstance(said, dict):
            every.append(found(said, str(workspace), created))
    return [sandbox for sandbox in every if sandbox is not None]


def remove(sandbox: Found) -> None:
    """Remove the workspace ``sandbox`` and its labels (blocking)."""
    workspace = Path(sandbox.sandbox_id)
    if not made_by_this_client(workspace):
        return
    shutil.rmtree(workspace, ignore_errors=True)
    labels_file(workspace).unlink(missing_ok=True)


def sandbox_client(settings: WorkerSettings) -> UnixLocalSandboxClient:
    """Build the client the worker registers (runs on the worker only); it
    takes none of the worker's settings."""
    # By default the local sandbox hands the worker's whole environment to the
    # agent's shell, OPENAI_API_KEY included. Give it only a minimal, harmless
    # set (PATH, HOME, locale, ...) instead.
    return LocalWorkspaceClient(inherit_host_environment=False)


def sandbox_options() -> UnixLocalSandboxClientOptions:
    """Options sent with each run (they are recorded in workflow history)."""
    return UnixLocalSandboxClientOptions()
