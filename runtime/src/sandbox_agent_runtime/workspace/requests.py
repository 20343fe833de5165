"""The workspace's operations as the workflow schedules them, at the bottom
of the workspace: their arguments and results (what each one carries in and
out of history), where a snapshot lives (IN_STORE, ON_HOST) and the format of
the snapshots this worker takes (SNAPSHOT_FORMAT): what the workflow
schedules the operations with and keeps in its state. It builds on the
models alone: nothing of git, of the snapshot store or of the sandbox."""

from pydantic import BaseModel

# Not exported by the plugin: the base of its activity arguments, which
# reads a session's state the way its own activities do.
from temporalio.openai_agents.sandbox._temporal_activity_models import _HasState

from sandbox_agent_runtime.run_request import Check, Input, Repo
from sandbox_agent_runtime.shared import SESSION_IDLE_TIMEOUT, SESSION_LIFETIME

# Where a snapshot lives: the object store (a worker of any host restores
# it) or the disk of the host that took it (only that host's workers can).
IN_STORE, ON_HOST = "store", "host"

# The format of the snapshots this worker takes, in their record (Snapshot):
# 0, a snapshot taken before there were formats (no digest, its ciphertext
# bound to nothing but its key id); 1, its digest recorded and its
# ciphertext bound to its conversation and object (snapshot_context).
SNAPSHOT_FORMAT = 1


class PlaceArgs(_HasState):
    inputs: list[Input] = []
    repo: Repo | None = None


class Placed(BaseModel):
    # Every file of the workspace once placed (but the repository's): path
    # -> SHA-256. At most MOST_FILES, their paths at most LONGEST_LISTING.
    baseline: dict[str, str] = {}
    # The commit the repository was cloned at ("" without one).
    commit: str = ""
    # What the whole workspace then held (``census``): its files (and
    # links), and their bytes.
    files: int = 0
    size: int = 0


class CollectArgs(_HasState):
    baseline: dict[str, str] = {}
    repo: Repo | None = None
    commit: str = ""
    # The workspace's census once placed (Placed.files, Placed.size).
    files: int = 0
    size: int = 0


class CheckArgs(_HasState):
    # What to check, in order (run_request.Check).
    checks: list[Check] = []


class SnapshotArgs(_HasState):
    # The object to write: chosen by the workflow, one per snapshot.
    key: str
    # The conversation's snapshot before this one, which this one replaces.
    previous: str = ""


class ForgetArgs(BaseModel):
    # The snapshot of a conversation that ended.
    key: str


class Snapshot(BaseModel):
    """A snapshot of a workspace, or why none was taken, with the settings
    of the worker that took it."""

    # The object's key, or "" when none was taken (``why_not`` says why).
    key: str = ""
    where: str = ""
    # Its size (gzipped), its files, and when it was taken (ISO 8601, UTC).
    size: int = 0
    files: int = 0
    taken: str = ""
    why_not: str = ""
    # The key id that encrypted it (PAYLOAD_ENCRYPTION_KEYS), "" for none.
    encrypted: str = ""
    # The worker's SESSION_IDLE_TIMEOUT and SESSION_LIFETIME, in seconds.
    idle_timeout: float = SESSION_IDLE_TIMEOUT.total_seconds()
    lifetime: float = SESSION_LIFETIME.total_seconds()
    # Its format (SNAPSHOT_FORMAT; 0 in the record of a snapshot taken
    # before formats) and the SHA-256 of the object as stored ("" for 0).
    format: int = 0
    digest: str = ""


class RestoreArgs(_HasState):
    key: str
    # The key id that encrypted the snapshot ("" for one in plain bytes): a
    # snapshot taken encrypted is restored only if it decrypts.
    encrypted: str = ""
    # The snapshot's format and digest, as its record holds them: from
    # format 1, restored only if the object is exactly the one recorded.
    format: int = 0
    digest: str = ""


class MemoryArgs(_HasState):
    # The caller's object (workspace/memories.py's memory_key), and the
    # directory of the agent's Memory capability, relative to the root.
    key: str
    directory: str = "memories"


class Remembered(BaseModel):
    """A caller's memory kept or put back, or why not."""

    files: int = 0
    size: int = 0
    # The key id that encrypted it ("" for none).
    encrypted: str = ""
    why_not: str = ""


class Restored(BaseModel):
    size: int = 0
    files: int = 0
