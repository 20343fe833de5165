"""What goes into a run's workspace and what comes out of it (worker side).

Two sandbox operations beside the SDK's own, registered with them under each
provider's name (``WorkspaceProvider``), so they run wherever that provider's
sandboxes are reached (on their host, for a host-bound one), are retried and
show in history like every other sandbox operation:

- ``<provider>-sandbox_workspace_place``, before the agent's first turn: the
  run's inputs (archives from the starter) and its git repository (cloned
  here, on the worker, at its ref: the sandbox needs neither git nor a
  network) go into the workspace, beside the files of the agent's own
  ``default_manifest``. It returns what every file then holds (a checksum
  each): the baseline the outputs are measured against. Placing again (a
  retry) gives the same workspace.
- ``<provider>-sandbox_workspace_collect``, after the answer: every file
  that is new or changed since the baseline, in one archive, and for a
  repository its changes as a patch ``git apply`` takes on the ref. Links,
  devices, FIFOs and names that climb out of the workspace are left out,
  saying so.

And two for conversations (workflow.py, phases/between.py), whose workspace outlives its
sandbox:

- ``<provider>-sandbox_workspace_snapshot``, after each answer and before a
  run continues as new: the whole workspace, gzipped, into the object store
  under ``snapshots/`` (``SnapshotStore``; without a store, a host-bound
  backend keeps it on its host's disk). It answers with the worker's
  SESSION_IDLE_TIMEOUT and SESSION_LIFETIME, so the workflow waits by the
  settings of the worker that holds the sandbox, the same on every replay.
- ``<provider>-sandbox_workspace_restore``, in a fresh sandbox: the
  snapshot's files, in place of what the sandbox started with.

A snapshot is bound to what it is: the snapshot operation answers with the
SHA-256 of exactly what it stored, which the workflow keeps in its own state
(history, and what a run of the chain carries to the next), and restore
refuses an object whose digest differs (replaced or altered in the store:
another conversation's snapshot, an older one of this conversation, any
other archive) before anything of it reaches the workspace, failing the
follow-up at once. With PAYLOAD_ENCRYPTION_KEYS, the ciphertext also names
its conversation and its object (AES-GCM's associated data), so a copy does
not decrypt anywhere else. A snapshot recorded before this (its record has
no ``format``) is restored as it was then: unchecked.

Each snapshot replaces the one before (which is deleted), and
``<provider>-sandbox_workspace_forget`` deletes the last once the
conversation ends.

A repository is cloned only once the worker has checked it again (repos.py:
its scheme, host and every address its host resolves to, against the
REPO_ALLOWED_* settings), over the transports allowed alone, following no
redirect; a clone that fails says so in one line whatever git said.

Every git process runs in a process group of its own, under a time limit
(GIT_TIMEOUT_MINUTES, and all of one operation's git a margin within the
operation's own timeout, so that git's line wins: ``Limit``): when the limit passes, or the attempt ends any other
way (cancelled, timed out, failed), the whole group is killed. On Linux the
group also dies with the worker, however the worker dies (a parent-death
signal to the shell git runs under, which kills the group: ``_GUARD``). And
git's transport gives up on a server that stops answering (``STALLED``), a
bound on its helpers (``git-remote-http``, ``ssh``) wherever that signal is
not to be had.

Place and collect move whole files through the activity's input or result: the data
converter keeps any payload over the threshold in the object store
(object_store.py), and a run's files are refused over the limits in
shared.py, in bytes and in number. Before reading a workspace, each of
place, collect and snapshot counts its files and bytes in the sandbox
(``census``: one command), and reads nothing of one over the limits; then
it reads the workspace's archive as a stream (files checksummed in chunks,
archives built in temporary files), so the worker's memory is bounded
whatever the workspace holds. Git runs only on the worker's own clone: the
workspace's ``.git`` (which the agent could have changed, hooks and config
included) is never run here, nor any other ``.git`` in the repository's
directory (``repo_tree``), which could lead git elsewhere on the host.

The package's modules, one concern each, import only from those below
them (pyproject.toml's ``[tool.importlinter]``): provider.py (the
operations as activities, ``WorkspaceProvider``); snapshots.py (the
snapshot store: sealing, verifying, gzipping); census.py (counting a
workspace, and its limits); git.py (git's processes, the worker's clones, a
repository's patch); steps.py (the operations as a run takes them: workflow
side, below the chain, whose run hooks prepare the workspace through it);
requests.py (the operations' arguments and results, which the workflow
schedules them with).
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
