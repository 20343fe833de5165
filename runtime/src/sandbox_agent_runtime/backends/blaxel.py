"""The Blaxel backend: the agent's shell runs in a remote Blaxel sandbox.

The worker needs ``BL_API_KEY`` and ``BL_WORKSPACE``; Blaxel's SDK reads them
once, when the worker builds its client at start. The agent's commands run on Blaxel's machines,
never on the worker's.

The Agents SDK's own options for Blaxel (``BlaxelSandboxClientOptions``) are
a plain dataclass, which cannot travel with a run to the activity that
creates its sandbox (the Temporal plugin sends options as a
``BaseSandboxClientOptions``). Each run sends ``BlaxelOptions`` instead, and
the worker's client turns them into the SDK's options.

Its options are the worker's environment variables ``BLAXEL_SANDBOX_*``: the
keys its entry in the catalog (catalog.toml) declares, each with its default there.

Every sandbox carries its run's labels, but Blaxel lists sandboxes without
filtering by label: ``sandboxes()`` lists every sandbox of the workspace and
keeps those whose labels name this service and this namespace (the reaper's).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from agents.extensions.sandbox.blaxel import (
    DEFAULT_BLAXEL_WORKSPACE_ROOT,
    BlaxelSandboxClient,
    BlaxelSandboxClientOptions,
    BlaxelSandboxSessionState,
)
from agents.sandbox.manifest import Manifest
from agents.sandbox.session import SandboxSession
from agents.sandbox.session.sandbox_client import BaseSandboxClientOptions
from agents.sandbox.session.sandbox_session_state import SandboxSessionState
from agents.sandbox.snapshot import SnapshotBase, SnapshotSpec
from temporalio import activity

from sandbox_agent_runtime.backends import (
    Found,
    chosen_options,
    declared,
    found,
    instant,
    run_labels,
    whose,
)

if TYPE_CHECKING:
    # Only for the type: the workflow imports this module (for the options of
    # each run) in Temporal's workflow sandbox, where the worker's settings have
    # no place (the workflow never reads them).
    from sandbox_agent_runtime.settings_types import WorkerSettings


# Errors that no retry can fix: Blaxel's SDK raises one error type for every
# answer of its API, so the worker's client turns the answers no retry
# changes (a rejected key, a forbidden action, an unknown image or region, a
# request Blaxel calls invalid) into BlaxelRefused; CredentialsError is the
# SDK's own, for credentials it cannot find; BlaxelSandboxGone, a run's
# sandbox that Blaxel has deleted. The sandbox activity that meets one fails
# at once, and so does the run.
NON_RETRYABLE_ERRORS: tuple[str, ...] = ("BlaxelRefused", "BlaxelSandboxGone", "CredentialsError")

# The HTTP statuses of Blaxel's API that BlaxelRefused stands for. Others (a
# timeout, a conflict, too many requests, a failing server) are retried.
REFUSALS = frozenset({400, 401, 403, 404, 422})

# Where the agent's workspace lives in the sandbox (the SDK's default).
WORKSPACE_ROOT = DEFAULT_BLAXEL_WORKSPACE_ROOT

# Its credentials (any one set of these variables, and where to get them), its
# options (BLAXEL_SANDBOX_<KEY>) and whether its sandboxes live on the worker's host
# (host_bound()): the catalog's (catalog.toml).
REQUIRED_ENVIRONMENT, CREDENTIALS_URL, OPTIONS, host_bound = declared(__name__)


def options() -> dict[str, Any]:
    """The worker's options for Blaxel (``OPTIONS``)."""
    return chosen_options("blaxel")


def sandbox_lifetime_seconds() -> int:
    """Seconds a sandbox may live before Blaxel deletes it."""
    return int(options()["ttl_seconds"])


class BlaxelRefused(Exception):
    """Blaxel's API refused a request in a way no retry changes."""


class BlaxelSandboxGone(Exception):
    """A run's sandbox that Blaxel has deleted, or is deleting."""


# What Blaxel says of a sandbox it has deleted or is deleting.
GONE = frozenset({"DELETING", "TERMINATED", "FAILED"})


class BlaxelOptions(BaseSandboxClientOptions):
    """What each run asks of its Blaxel sandbox (recorded in history)."""

    type: Literal["blaxel"] = "blaxel"
    image: str | None = None
    region: str | None = None
    # A duration as Blaxel writes one: "3600s".
    ttl: str | None = None
    # Every backend's options have it (a sandbox standing in for this one in
    # the tests reads it); the service exposes no port of a Blaxel sandbox.
    exposed_ports: tuple[int, ...] = ()


class BlaxelOptionsClient(BlaxelSandboxClient):
    """The SDK's Blaxel client, taking each run's ``BlaxelOptions`` and
    saying which of Blaxel's refusals no retry fixes."""

    async def create(  # type: ignore[override]
        self,
        *,
        snapshot: SnapshotSpec | SnapshotBase | None = None,
        manifest: Manifest | None = None,
        options: BlaxelOptions | None,
    ) -> SandboxSession:
        # Runs inside the `<provider>-sandbox_client_create` activity.
        options = options or BlaxelOptions()
        with refusals_not_retried():
            return await super().create(
                snapshot=snapshot,
                manifest=manifest,
                options=BlaxelSandboxClientOptions(
                    image=options.image,
                    region=options.region,
                    ttl=options.ttl,
                    labels=run_labels() if activity.in_activity() else None,
                ),
            )

    async def resume(self, state: SandboxSessionState) -> SandboxSession:
        # Runs when a worker takes up a run's sandbox that it did not create
        # (another worker's, or its own before a restart). The SDK would
        # create an empty sandbox under the same name if Blaxel had deleted
        # the run's (at its lifetime, say): the run would go on without its
        # workspace. It fails instead, saying why.
        with refusals_not_retried():
            if isinstance(state, BlaxelSandboxSessionState):
                await still_there(state.sandbox_name)
            return await super().resume(state)


@contextmanager
def refusals_not_retried() -> Iterator[None]:
    """Turns an answer of Blaxel's API with a status in ``REFUSALS`` into
    ``BlaxelRefused``, keeping what Blaxel said."""
    try:
        yield
    except Exception as error:
        status = getattr(error, "status_code", None)
        if type(error).__module__.startswith("blaxel.") and status in REFUSALS:
            raise BlaxelRefused(f"Blaxel answered {status}: {error}") from error
        raise


async def still_there(name: str) -> None:
    """Raise BlaxelSandboxGone unless Blaxel still has the sandbox ``name``."""
    # Imported here, as the SDK does: the workflow imports this module.
    from blaxel.core.sandbox import SandboxInstance

    try:
        status = str((await SandboxInstance.get(name)).status)
    except Exception as error:
        if getattr(error, "status_code", None) != 404:
            raise
        status = "not found"
    if status == "not found" or status in GONE:
        raise BlaxelSandboxGone(
            f"Blaxel's sandbox {name} is {status}: the run's workspace is gone"
            f" (Blaxel deletes a sandbox {sandbox_lifetime_seconds()} s after its creation)"
        )


def sandbox_client(settings: WorkerSettings) -> BlaxelOptionsClient:
    """Build the client the worker registers (runs on the worker only); it
    takes none of the worker's settings."""
    return BlaxelOptionsClient()


def sandbox_options() -> BlaxelOptions:
    """Options sent with each run (they are recorded in workflow history:
    never put secrets here)."""
    chosen = options()
    return BlaxelOptions(
        image=chosen["image"] or None,
        region=str(chosen["region"]),
        ttl=f"{int(chosen['ttl_seconds'])}s",
    )


def sandboxes(namespace: str) -> list[Found]:
    """Every sandbox of this service and ``namespace`` in Blaxel's workspace:
    all it lists, kept by their labels (the reaper's; blocking)."""
    from blaxel.core.sandbox import SyncSandboxInstance

    wanted = whose(namespace).items()
    every = []
    for sandbox in SyncSandboxInstance.list().auto_paging_iter():
        metadata = sandbox.metadata
        labels = metadata.labels
        said = labels.to_dict() if hasattr(labels, "to_dict") else dict(labels or {})
        if wanted <= said.items() and str(sandbox.status) not in GONE:
            every.append(found(said, metadata.name, instant(metadata.created_at or None)))
    return [sandbox for sandbox in every if sandbox is not None]


def remove(sandbox: Found) -> None:
    """Delete the sandbox ``sandbox`` (gone already: nothing to do; blocking)."""
    from blaxel.core.sandbox import SyncSandboxInstance

    try:
        # The SDK sets `delete` on the class after defining it.
        SyncSandboxInstance.delete(sandbox.sandbox_id)  # type: ignore[attr-defined]
    except Exception as error:
        if getattr(error, "status_code", None) != 404:
            raise
