"""The worker's settings as the rest of the runtime is handed them: the
frozen types ``settings.worker_settings()`` fills from the environment.

They live apart from the settings package, which reads the environment, so that what
it builds on (the backends' declarations of their options
and credentials: backends/) can take a ``WorkerSettings`` without importing
the module that reads it: the runtime's modules import only downwards
(the import contracts in pyproject.toml).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio.common import WorkerDeploymentVersion

from sandbox_agent_runtime import encryption
from sandbox_agent_runtime import object_store as stores
from sandbox_agent_runtime.callbacks import NO_CALLBACKS, CallbackPolicy
from sandbox_agent_runtime.repos import DEFAULT_POLICY, RepoPolicy

# /tmp of each docker backend container, where the SDK keeps its helper
# scripts: an in-memory file system, counted in DOCKER_SANDBOX_MEMORY.
DOCKER_TMP_SIZE = 64 << 20


@dataclass(frozen=True)
class DockerLimits:
    """The bounds on each sandbox container of the docker backend
    (backends/docker.py)."""

    memory: int  # bytes, swap included (no swap)
    cpus: float
    pids: int
    workspace_size: int  # bytes
    uid: int
    gid: int
    # /tmp, where the SDK keeps its helper scripts: not a setting.
    tmp_size: int = DOCKER_TMP_SIZE


@dataclass(frozen=True)
class WorkerSettings:
    """Everything the worker takes from its environment, parsed. The fields
    after ``repos`` are read only for a service that needs them (each
    says when); otherwise they keep their defaults."""

    # WORKER_RUNS_IN_FLIGHT: the runs it keeps in flight.
    runs_in_flight: int
    # SANDBOX_COMMAND_TIME_LIMIT_SECONDS: the longest one command may run.
    command_time_limit: int
    # MODEL_ACTIVITY_TIMEOUT_SECONDS: each model call's timeout.
    model_activity_timeout: timedelta
    # HEALTH_BIND_ADDRESS: where it answers probes; None: nowhere.
    health_address: tuple[str, int] | None
    # PROMETHEUS_BIND_ADDRESS: where it serves /metrics; None: nowhere.
    metrics_address: tuple[str, int] | None
    # OTEL_EXPORTER_OTLP_ENDPOINT: where it sends traces; None: nowhere.
    traces_endpoint: str | None
    # TEMPORAL_DEPLOYMENT_NAME and TEMPORAL_WORKER_BUILD_ID: the Worker
    # Deployment Version it polls as; None: unversioned.
    version: WorkerDeploymentVersion | None
    # OBJECT_STORE_URL: where large payloads go; None:
    # nowhere, every payload in history.
    object_store: stores.ObjectStore | None
    # PAYLOAD_ENCRYPTION_KEYS: the keys payloads are encrypted and decrypted
    # with; None: payloads in plain text.
    keys: encryption.Keys | None
    # SESSION_IDLE_TIMEOUT: how long a conversation keeps its sandbox after an
    # answer before it snapshots the workspace and releases the sandbox.
    session_idle_timeout: timedelta
    # SESSION_LIFETIME: how long a conversation waits for a follow-up before
    # it ends; never shorter than the idle timeout.
    session_lifetime: timedelta
    # GIT_TIMEOUT_MINUTES: the longest one of its git processes (a --repo's
    # clone) may run before it is killed (workspace/git.py).
    git_timeout: timedelta
    # REPO_ALLOWED_SCHEMES, REPO_ALLOWED_HOSTS, REPO_ALLOWED_NETWORKS: the
    # repositories it clones, checked again before each clone.
    repos: RepoPolicy = DEFAULT_POLICY
    # CALLBACK_HOSTS: the servers a run's callback may call, checked again
    # before each callback; CALLBACK_SECRET: the key callbacks are signed
    # with (None: the worker refuses them).
    callbacks: CallbackPolicy = NO_CALLBACKS
    callback_key: bytes | None = field(default=None, repr=False)
    # SANDBOX_REAP_EVERY_SECONDS: how often the reaper's schedule runs (0: never).
    reap_every: timedelta = timedelta(0)
    # SANDBOX_REAP_GRACE_SECONDS: how old a closed run's sandbox must be to go.
    reap_grace: timedelta = timedelta(minutes=5)
    # What a million Temporal actions cost, in USD (a run's cost: costs.py).
    temporal_usd_per_million_actions: int = 0
    # With a host-bound backend: WORKER_HOST_ID, or the host name: the host
    # its sandboxes are bound to.
    host_id: str = ""
    # With approvals: APPROVERS, whose signed decisions count, public key
    # (base64) -> name.
    approvers: Mapping[str, str] = field(default_factory=dict)
    # With the docker backend: DOCKER_ENGINE_SHARED, every worker reaches the
    # same Docker engine.
    docker_engine_shared: bool = False
    # With the docker backend: DOCKER_SANDBOX_*, each container's bounds.
    docker_limits: DockerLimits | None = None
    # With the docker backend: where the engine is, as messages name it:
    # DOCKER_HOST, or the default socket, as the docker SDK finds it (the SDK
    # reads DOCKER_HOST itself, and takes it empty for unset).
    docker_host: str = ""
    # With the cloudflare backend: CLOUDFLARE_SANDBOX_WORKER_URL, the team's
    # Sandbox Service Worker (backends/cloudflare.py), one of the worker's
    # credentials.
    cloudflare_worker_url: str = ""
    # Each of its backends' options (``<BACKEND>_SANDBOX_*``: backends/), by
    # backend and key: what every sandbox it creates is given, and its run's
    # history records.
    backend_options: Mapping[str, Mapping[str, int | bool | str]] = field(default_factory=dict)
    # OPENAI_API: the model endpoint's API, "responses" or "chat_completions".
    openai_api: str = "responses"
    # STREAM_MODEL_TURNS: whether new runs stream the model's text.
    stream_model_turns: bool = True
    # STREAM_BATCH_MILLISECONDS: how often a streamed model call sends what
    # the model wrote (each send a signal in the run's history).
    stream_batch: timedelta = timedelta(seconds=1)
    # MODEL_CALLS_PER_SECOND: the most model calls the whole fleet of the
    # service's workers starts a second, which Temporal's server holds on the
    # model calls' task queue; None: no limit.
    model_calls_per_second: float | None = None
    # MODEL_CALLS_QUEUE: "own" when model calls go to their own task queue
    # (model_queue.py), "run" when they go with the run's own work.
    model_calls_queue: str = "run"
