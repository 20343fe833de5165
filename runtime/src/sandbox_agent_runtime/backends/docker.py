"""The Docker backend: the agent's shell runs in a container on a Docker engine.

Each run gets a fresh container, removed at the end of the run: nothing the
agent runs touches the worker's host, and the engine can be one you run
yourself. The container is contained (``container_bounds()``): a command that
forks, allocates or writes without end fails inside it, and every other run
goes on. Access to the engine's socket is root-equivalent on its host (see
the README). A container lives on one engine, so a run stays on its worker's
host unless every worker shares one engine (``DOCKER_ENGINE_SHARED``). The
``docker`` package is imported only where the worker builds its client: the
workflow imports this module for its options.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from agents.sandbox.errors import WorkspaceArchiveReadError
from agents.sandbox.manifest import Manifest
from agents.sandbox.sandboxes.docker import (
    DockerSandboxClient,
    DockerSandboxClientOptions,
    DockerSandboxSession,
    DockerSandboxSessionState,
)
from agents.sandbox.session import SandboxSession
from agents.sandbox.session.sandbox_session_state import SandboxSessionState
from agents.sandbox.snapshot import SnapshotBase, SnapshotSpec

from sandbox_agent_runtime.backends import (
    Found,
    chosen_options,
    declared,
    found,
    provider_key,
    run_labels,
    workflow_key,
)

if TYPE_CHECKING:
    # Only for the type: the workflow imports this module (for the options of
    # each run) in Temporal's workflow sandbox, where the worker's settings have
    # no place (the workflow never reads them).
    from sandbox_agent_runtime.settings_types import DockerLimits, WorkerSettings


# Errors that no retry can fix (an image that is not on the engine and cannot
# be pulled, a container the engine refuses to create or start, a run's
# container that is not on the worker's engine, an image or container
# the engine says does not exist): the sandbox activity that meets one fails
# at once, and so does the run. Temporal records an error's type as its class
# name; the first three are this module's, the others the docker SDK's.
NON_RETRYABLE_ERRORS: tuple[str, ...] = (
    "ImageUnavailable",
    "ContainerRefused",
    "ContainerGone",
    "ImageNotFound",
    "NotFound",
)

# Where the agent's workspace lives in the container.
WORKSPACE_ROOT = "/workspace"

# Its credentials (any one set of these variables, and where to get them), its
# options (DOCKER_SANDBOX_<KEY>) and whether its sandboxes live on the worker's host
# (host_bound()): the catalog's (catalog.toml).
REQUIRED_ENVIRONMENT, CREDENTIALS_URL, OPTIONS, host_bound = declared(__name__)


def options() -> dict[str, Any]:
    """The worker's options for Docker (``OPTIONS``)."""
    return chosen_options("docker")


def network_mode() -> Literal["none"] | None:
    """The container's network as the SDK takes it: "none", or None for
    Docker's default (the "bridge" network)."""
    return "none" if options()["network"] == "none" else None


# Labels on every sandbox container, naming the run (its workflow id) and the
# sandbox provider that made it, so an operator can find containers that a
# run left behind (see the README). The worker sets them from the activity
# that creates the container.
workflow_label = workflow_key
provider_label = provider_key


def container_bounds(limits: DockerLimits) -> dict[str, Any]:
    """The engine's HostConfig fields that contain a container (they are
    what `docker inspect` reads back). Memory covers the workspace and /tmp
    too: both are in-memory file systems (tmpfs), which is how a workspace
    gets a size bound on any engine (a disk quota, `--storage-opt size`,
    needs overlay2 on xfs with pquota). The workspace and /tmp belong to the
    user (65534, `nobody` in every image, unless DOCKER_SANDBOX_USER says
    otherwise), whatever the image says."""
    owner = f"uid={limits.uid},gid={limits.gid}"
    # Docker mounts a tmpfs noexec unless told: the agent runs scripts in
    # its workspace, and the SDK its helpers from /tmp.
    return {
        "Memory": limits.memory,
        "MemorySwap": limits.memory,
        "NanoCpus": int(limits.cpus * 1e9),
        "PidsLimit": limits.pids,
        "CapDrop": ["ALL"],
        "SecurityOpt": ["no-new-privileges"],
        "Tmpfs": {
            WORKSPACE_ROOT: f"size={limits.workspace_size},{owner},mode=0700,exec",
            # The SDK keeps its helper scripts there.
            "/tmp": f"size={limits.tmp_size},mode=1777,exec",
        },
    }


class DockerEngineUnavailable(Exception):
    """No Docker engine answers where the worker looks for one."""


class ImageUnavailable(Exception):
    """The image is not on the engine, and the engine could not pull it."""


class ContainerRefused(Exception):
    """The engine refused to create or start the sandbox's container."""


class ContainerGone(Exception):
    """A run's container is not on this worker's engine."""


class TmpfsWorkspaceSession(DockerSandboxSession):
    """The SDK's Docker session, reading the workspace (a run's outputs:
    workspace/) with ``tar`` in the container. The SDK copies it to /tmp
    and fetches that copy through the engine's archive API, which cannot
    see into a tmpfs, and both are tmpfs here (``container_bounds()``).
    A workspace with paths to leave out (mounts) is read the SDK's way."""

    async def persist_workspace(self) -> io.IOBase:
        if self._persist_workspace_skip_relpaths():
            return await super().persist_workspace()
        root = self._workspace_root_path()
        result = await self.exec("tar", "-c", "-C", root.as_posix(), ".", shell=False)
        if not result.ok():
            error = result.stderr.decode(errors="replace").strip()
            raise WorkspaceArchiveReadError(path=root, context={"stderr": error})
        return io.BytesIO(result.stdout)


def reading_tmpfs(session: SandboxSession) -> SandboxSession:
    """``session``, its workspace read as ``TmpfsWorkspaceSession`` reads it."""
    if type(session._inner) is DockerSandboxSession:
        session._inner.__class__ = TmpfsWorkspaceSession
    return session


class LabelledDockerSandboxClient(DockerSandboxClient):
    """The SDK's Docker client, with two changes to how a sandbox is created:
    the container carries the run's labels, and a missing image is pulled in
    a thread (the SDK pulls it on the worker's event loop, which stalls every
    other activity of the worker for as long as the pull takes) and, when it
    cannot be, fails the run at once with a reason a person can read. And it
    never resumes a session whose container is not on this engine: the SDK
    would start a fresh, empty container in its place, and the agent would go
    on without its files and without a word. A container is not there when
    the worker reaches another engine than the one that made it (a Kubernetes
    pod back under its name on another node) or it was removed. Its
    sessions read their workspace as ``TmpfsWorkspaceSession`` does."""

    async def resume(self, state: SandboxSessionState) -> SandboxSession:
        if isinstance(state, DockerSandboxSessionState) and not await asyncio.to_thread(
            self.get_container, state.container_id
        ):
            raise ContainerGone(
                f"The run's container {state.container_id[:12]} is not on this worker's Docker "
                "engine (it is on another engine, or it was removed): the run cannot go on."
            )
        return reading_tmpfs(await super().resume(state))

    async def create(
        self,
        *,
        snapshot: SnapshotSpec | SnapshotBase | None = None,
        manifest: Manifest | None = None,
        options: DockerSandboxClientOptions,
    ) -> SandboxSession:
        import docker.errors  # type: ignore[import-untyped]

        await self._pull_if_missing(options.image)
        # Runs inside the `<provider>-sandbox_client_create` activity.
        labels = {**options.labels, **run_labels()}
        try:
            session = await super().create(
                snapshot=snapshot,
                manifest=manifest,
                options=options.model_copy(update={"labels": labels}),
            )
        except docker.errors.APIError as e:
            if not e.is_client_error():
                raise  # the engine's own trouble: worth a retry
            # Not chained: a failed run reports its innermost cause, and the
            # engine's explanation here says more than its HTTP error.
            raise ContainerRefused(
                f"The Docker engine refused a container from image {options.image!r}: "
                f"{e.explanation or e}"
            ) from None
        return reading_tmpfs(session)

    async def _pull_if_missing(self, image: str) -> None:
        import docker.errors

        if await asyncio.to_thread(self.image_exists, image):
            return
        try:
            await asyncio.to_thread(self.docker_client.images.pull, image)
        except docker.errors.APIError as e:
            raise ImageUnavailable(  # not chained either: see create()
                f"The image {image!r} is not on the Docker engine and could not be pulled: "
                f"{e.explanation or e}"
            ) from None


def shared_by_every_worker(settings: WorkerSettings) -> bool:
    """Whether every worker reaches this worker's engine (``DOCKER_ENGINE_SHARED``):
    its containers then live on no worker's host, and a run goes on on any
    worker (host_bound())."""
    return settings.docker_engine_shared


def sandbox_client(settings: WorkerSettings) -> DockerSandboxClient:
    """Build the client the worker registers (runs on the worker only), once
    the engine has answered, with ``settings.docker_limits`` on every container."""
    import docker

    try:
        engine: Any = docker.from_env()
        engine.ping()
    except docker.errors.DockerException as e:
        raise DockerEngineUnavailable(
            f"no Docker engine answers at {settings.docker_host} (set DOCKER_HOST to reach "
            f"another one): {e}"
        ) from e
    limits = settings.docker_limits
    if limits is None:
        # settings.worker_settings() reads them for every service with this backend.
        raise ValueError("the worker's settings have no Docker limits (DOCKER_SANDBOX_*)")
    engine.api.create_container = functools.partial(contained, engine.api.create_container, limits)
    return LabelledDockerSandboxClient(engine)


def contained(create: Any, limits: DockerLimits, *args: Any, **kwargs: Any) -> Any:
    """The engine API's ``create_container``, making every container
    contained by ``limits``, as a user other than root unless they say 0."""
    host_config = kwargs.pop("host_config", None) or {}
    bounds = container_bounds(limits)
    # What the SDK asks for (a capability a mount needs) is kept.
    bounds["SecurityOpt"] += host_config.get("SecurityOpt") or []
    kwargs["host_config"] = {**host_config, **bounds}
    kwargs["user"] = f"{limits.uid}:{limits.gid}"
    # The SDK keeps each container up with `tail -f /dev/null` as its first
    # process, which ignores SIGTERM: stopping the container at the end of a
    # run would wait out Docker's 10 s grace period, and the SDK waits for that
    # on the worker's event loop, stalling every other run of the worker. The
    # container is about to be removed anyway: stop it with SIGKILL.
    kwargs["stop_signal"] = "SIGKILL"
    return create(*args, **kwargs)


def sandbox_options() -> DockerSandboxClientOptions:
    """Options sent with each run (they are recorded in workflow history:
    never put secrets here)."""
    return DockerSandboxClientOptions(image=str(options()["image"]), network_mode=network_mode())


def sandboxes() -> list[Found]:
    """Every container of this service on the engine (DOCKER_HOST), running
    or not (the reaper's; blocking)."""
    import docker

    engine: Any = docker.from_env()
    containers = engine.containers.list(all=True, filters={"label": workflow_label()})
    every = (found(c.labels, c.id, created(c.attrs["Created"])) for c in containers)
    return [sandbox for sandbox in every if sandbox is not None]


def created(stamp: str) -> datetime:
    """The engine's creation time of a container, "2026-12-07T16:20:01.123456789Z"."""
    seconds, _, fraction = stamp.removesuffix("Z").partition(".")
    return datetime.fromisoformat(f"{seconds}.{(fraction + '000000')[:6]}+00:00")


def remove(sandbox: Found) -> None:
    """Remove the container ``sandbox`` (gone already: nothing to do; blocking)."""
    import docker

    engine: Any = docker.from_env()
    with contextlib.suppress(docker.errors.NotFound):
        engine.containers.get(sandbox.sandbox_id).remove(force=True)
