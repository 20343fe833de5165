"""What goes into a run's workspace and what comes out of it (worker side).

Operations beside the SDK's own, so they run wherever the provider's
sandboxes are reached, are retried and show in history like any other
sandbox operation: a run's inputs and repository placed, its outputs and a
repository's patch collected, and a conversation's workspace kept in
snapshots that outlive its sandbox (``WorkspaceProvider``, ``SnapshotStore``).
The worker's memory stays bounded whatever a workspace holds, and git runs
only on the worker's own clone, never on a ``.git`` the agent could change.
"""

from sandbox_agent_runtime.workspace.git import STALL_SECONDS, clone_dir
from sandbox_agent_runtime.workspace.provider import WorkspaceProvider
from sandbox_agent_runtime.workspace.requests import (
    IN_STORE,
    ON_HOST,
    SNAPSHOT_FORMAT,
    CollectArgs,
    ForgetArgs,
    PlaceArgs,
    Placed,
    RestoreArgs,
    Restored,
    Snapshot,
    SnapshotArgs,
)
from sandbox_agent_runtime.workspace.snapshots import (
    SnapshotStore,
    snapshot_context,
    snapshot_store,
)

__all__ = [
    "IN_STORE",
    "ON_HOST",
    "SNAPSHOT_FORMAT",
    "STALL_SECONDS",
    "CollectArgs",
    "ForgetArgs",
    "PlaceArgs",
    "Placed",
    "RestoreArgs",
    "Restored",
    "Snapshot",
    "SnapshotArgs",
    "SnapshotStore",
    "WorkspaceProvider",
    "clone_dir",
    "snapshot_context",
    "snapshot_store",
]
