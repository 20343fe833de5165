"""Every setting the runtime's commands read themselves, declared once.

A declaration is a row of a table of our own (``Setting``): its name, which
commands read it and when, its kind, bounds and default, one line of help, and
what a bad value looks like. The commands' readers take their bounds and
defaults from it, and the reference page (``docs/settings.md``), the data a
render's ``.env.example`` is made from (``docs/settings.json``) and the
bad-value tests are made from it. Each backend's options
(``<BACKEND>_SANDBOX_*``) are declared in its own module (``backends/``).

Why not pydantic-settings: each refusal here is one line naming the variable,
the value and what is allowed (pydantic's are multi-line and name fields),
set-to-nothing is refused rather than taken for unset, and which variables a
command reads depends on the service (approvals, a host-bound backend, a
backend's own); a plain table states all of that in one row and costs no
dependency.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from sandbox_agent_runtime.service import Service, current
from sandbox_agent_runtime.shared import (
    GIT_TIMEOUT,
    MODEL_ACTIVITY_TIMEOUT,
    SESSION_IDLE_TIMEOUT,
    SESSION_LIFETIME,
)

Command = Literal["worker", "starter", "codec server", "API"]
COMMANDS: tuple[Command, ...] = ("worker", "starter", "codec server", "API")
# A value of each kind's form is read by one reader (settings/reading.py for
# the common ones); "text" is read by the setting's own.
Kind = Literal["number", "address", "url", "yes/no", "choice", "size", "text"]
# When a command reads it: always, or only for a service that has these.
When = Literal["", "approvals", "host-bound backend", "docker backend"]
_CONDITIONS: dict[When, Callable[[Service], bool]] = {
    "": lambda service: True,
    "approvals": lambda service: service.approvals,
    "host-bound backend": lambda service: service.host_bound,
    "docker backend": lambda service: "docker" in service.backends,
}

# A value far past any bound.
HUGE = "9" * 20


@dataclass(frozen=True)
class Setting:
    """One environment variable that some of the runtime's commands read."""

    name: str
    readers: tuple[Command, ...]
    kind: Kind
    # One line of help for the reference page and ``.env.example``.
    help: str
    # The value when it is unset (a number's, a size's...), or None: then
    # ``unset`` says what being unset means.
    default: int | str | None = None
    unset: str = ""
    # A number's bounds (``high`` may depend on the service) and unit.
    low: int = 0
    high: int | Callable[[], int] = 0
    unit: str = ""
    # What ``high`` is, in words, when it depends on the service.
    high_text: str = ""
    # A value as an example shows it (an address, a URL).
    example: str = ""
    # When it is read (besides its commands); see ``When``.
    when: When = ""
    # Values it refuses beyond those of its kind, for the bad-value tests.
    bad: tuple[str, ...] = ()
    # Its value is a secret: no refusal shows it.
    secret: bool = False
    # Set with another: that one's name and a value it takes (both or neither).
    together: tuple[str, str] | None = None

    def most(self) -> int:
        """A number's highest value for this service."""
        return self.high() if callable(self.high) else self.high

    def read_by(self, command: Command, service: Service) -> bool:
        """Whether ``command`` of ``service`` reads it."""
        return command in self.readers and _CONDITIONS[self.when](service)

    def shown_default(self) -> str:
        """The default, as the reference page says it."""
        if self.default is None:
            return f"unset: {self.unset}" if self.unset else "unset"
        return f"`{self.default}`"

    def allowed(self) -> str:
        """What a value may be, as the reference page says it."""
        if self.kind == "number":
            high = self.high_text or f"{self.most():,}".replace(",", "")
            return f"a whole number of {self.unit} from {self.low} to {high}"
        if self.kind == "address":
            return f"host:port, port 1 to 65535 (such as `{self.example}`)"
        if self.kind == "url":
            return f"an http:// or https:// URL (such as `{self.example}`)"
        if self.kind == "yes/no":
            return "true or false (also yes/no, 1/0)"
        return self.example

    def bad_values(self) -> tuple[str, ...]:
        """Values it refuses: nothing (set to nothing is refused, not taken
        for unset), a superscript digit (which str.isdigit() takes for one),
        and whatever else its kind and bounds rule out."""
        common = ("", "²")
        if self.kind == "number":
            beyond = (str(self.low - 1),) if self.low > 0 else ()
            return (*common, "-5", HUGE, "1.5", "soon", *beyond, str(self.most() + 1), *self.bad)
        if self.kind == "address":
            return (*common, "8080", "0.0.0.0:-1", f"0.0.0.0:{HUGE}", *self.bad)
        if self.kind == "url":
            return (*common, "localhost:4318", "ftp://collector", f"http://x:{HUGE}", *self.bad)
        if self.kind == "yes/no":
            return (*common, "-1", "sometimes", *self.bad)
        # Text is read by the setting's own reader: its declaration says what else it refuses.
        return ("", *self.bad)


def longest_model_timeout() -> int:
    """The longest ``MODEL_ACTIVITY_TIMEOUT_SECONDS`` allowed.

    Returns:
        Seconds: an hour, and no longer than the configured service's
        workflow execution timeout (a run).
    """
    return min(3600, int(current().workflow_execution_timeout.total_seconds()))


# Runs one worker keeps in flight at once unless WORKER_RUNS_IN_FLIGHT says
# otherwise: memory and slots are not what limits a worker, CPU is (one
# Python process); past MOST_RUNS_IN_FLIGHT, run more workers.
RUNS_IN_FLIGHT = 1_000
MOST_RUNS_IN_FLIGHT = 100_000
# Each command the agent runs is killed after SANDBOX_COMMAND_TIME_LIMIT_SECONDS.
COMMAND_TIME_LIMIT = 600
LONGEST_COMMAND_TIME_LIMIT = 86_400
# GIT_TIMEOUT_MINUTES: at most a day.
LONGEST_GIT_TIMEOUT = 24 * 60
# SESSION_IDLE_TIMEOUT and SESSION_LIFETIME: each at most a year, a bound on
# how long a conversation holds a sandbox or a snapshot.
LONGEST_SESSION = 365 * 86_400
# The highest fleet-wide rate of model calls (MODEL_CALLS_PER_SECOND) taken:
# above it, a typo (an extra digit or three) is likelier than a fleet.
MOST_MODEL_CALLS_PER_SECOND = 10_000

# A key of PAYLOAD_ENCRYPTION_KEYS's form (32 bytes in base64), for bad values.
_KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
_CLIENTS: tuple[Command, ...] = ("worker", "starter", "codec server", "API")
_REPO_READERS: tuple[Command, ...] = ("worker", "starter", "API")

SETTINGS: tuple[Setting, ...] = (
    # ------------------------------------------------------------ the worker
    Setting(
        "WORKER_RUNS_IN_FLIGHT",
        ("worker",),
        "number",
        "Runs one worker keeps in flight at once (about 0.7 MiB each); past it, runs wait on "
        "the task queue.",
        default=RUNS_IN_FLIGHT,
        low=1,
        high=MOST_RUNS_IN_FLIGHT,
        unit="runs",
    ),
    Setting(
        "SANDBOX_REAP_EVERY_SECONDS",
        ("worker",),
        "number",
        "How often a Temporal Schedule the worker creates removes the sandboxes of closed "
        "runs (`<slug>-sandboxes reap`); 0: no schedule.",
        default=0,
        low=0,
        high=86400,
        unit="seconds",
    ),
    Setting(
        "SANDBOX_REAP_GRACE_SECONDS",
        ("worker",),
        "number",
        "How old the sandbox of a closed run must be before the reaper's schedule removes it.",
        default=300,
        low=0,
        high=604800,
        unit="seconds",
    ),
    Setting(
        "TEMPORAL_USD_PER_MILLION_ACTIONS",
        ("worker",),
        "number",
        "What a million Temporal actions cost, in USD, for a run's cost and its money budget "
        "(Temporal Cloud's rate; 0 for a self-hosted server).",
        default=0,
        low=0,
        high=10_000,
        unit="USD",
    ),
    Setting(
        "SANDBOX_COMMAND_TIME_LIMIT_SECONDS",
        ("worker",),
        "number",
        "The longest one command of the agent may run before it is killed.",
        default=COMMAND_TIME_LIMIT,
        low=1,
        high=LONGEST_COMMAND_TIME_LIMIT,
        unit="seconds",
    ),
    Setting(
        "MODEL_ACTIVITY_TIMEOUT_SECONDS",
        ("worker",),
        "number",
        "Each model call's timeout: longer for a slow model or proxy.",
        default=int(MODEL_ACTIVITY_TIMEOUT.total_seconds()),
        low=1,
        high=longest_model_timeout,
        high_text="3600 (an hour, and no longer than the service's workflow execution timeout)",
        unit="seconds",
    ),
    Setting(
        "HEALTH_BIND_ADDRESS",
        ("worker",),
        "address",
        "Where the worker serves GET /readyz and /livez (ready while it polls, live while its "
        "event loop turns).",
        unset="no health endpoint",
        example="0.0.0.0:8080",
    ),
    Setting(
        "PROMETHEUS_BIND_ADDRESS",
        ("worker",),
        "address",
        "Where the worker serves Prometheus metrics (/metrics).",
        unset="no metrics",
        example="0.0.0.0:9464",
    ),
    Setting(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        ("worker",),
        "url",
        "Where the worker exports OpenTelemetry traces over OTLP/HTTP (needs the traces extra).",
        unset="no traces",
        example="http://localhost:4318",
    ),
    Setting(
        "TEMPORAL_DEPLOYMENT_NAME",
        ("worker",),
        "text",
        "The Worker Deployment the worker polls as (Worker Versioning); set with "
        "TEMPORAL_WORKER_BUILD_ID, or neither.",
        unset="unversioned",
        example="1 to 255 characters, no spaces or dots",
        bad=("my.agents", "two words", "x" * 256),
        together=("TEMPORAL_WORKER_BUILD_ID", "3f2c1ab"),
    ),
    Setting(
        "TEMPORAL_WORKER_BUILD_ID",
        ("worker",),
        "text",
        "The build the worker polls as (new for every deploy: the git sha, say); set with "
        "TEMPORAL_DEPLOYMENT_NAME, or neither.",
        unset="unversioned",
        example="1 to 255 characters, no spaces",
        bad=("two words", "x" * 256),
        together=("TEMPORAL_DEPLOYMENT_NAME", "agents"),
    ),
    Setting(
        "OBJECT_STORE_URL",
        _CLIENTS,
        "text",
        "Where payloads too large for history go (every command of the service the same): a "
        "directory all reach, or an S3 bucket.",
        unset="none; a run's files travel in history, at most 1 MiB each way",
        example="`file:///absolute/path` or `s3://bucket/prefix` (AWS S3, or another store "
        "through AWS_ENDPOINT_URL)",
        bad=("²", "relative/store", "ftp://store", "s3://", "file://host/x"),
    ),
    Setting(
        "PAYLOAD_ENCRYPTION_KEYS",
        _CLIENTS,
        "text",
        "The keys every payload is encrypted with (every command of the service the same; the "
        "first encrypts, all decrypt).",
        unset="payloads in plain text (the codec server requires it)",
        example="`KEY_ID=BASE64` pairs separated by commas, each key 32 random bytes in base64",
        bad=("²", "A", "A=", "A=c2hvcnQ=", f"A={_KEY},A={_KEY}", f"a b={_KEY}", _KEY),
        secret=True,
    ),
    Setting(
        "SESSION_IDLE_TIMEOUT",
        ("worker",),
        "number",
        "How long a conversation keeps its sandbox after an answer before it snapshots the "
        "workspace and releases it; no longer than SESSION_LIFETIME.",
        default=int(SESSION_IDLE_TIMEOUT.total_seconds()),
        low=1,
        high=LONGEST_SESSION,
        unit="seconds",
        bad=(str(int(SESSION_LIFETIME.total_seconds()) + 1),),
    ),
    Setting(
        "SESSION_LIFETIME",
        ("worker",),
        "number",
        "How long a conversation waits for a follow-up before it ends; no shorter than "
        "SESSION_IDLE_TIMEOUT.",
        default=int(SESSION_LIFETIME.total_seconds()),
        low=1,
        high=LONGEST_SESSION,
        unit="seconds",
        bad=(str(int(SESSION_IDLE_TIMEOUT.total_seconds()) - 1),),
    ),
    Setting(
        "GIT_TIMEOUT_MINUTES",
        ("worker",),
        "number",
        "The longest one git process of the worker (a --repo's clone, the diff of its changes) "
        "may run before it is killed.",
        default=int(GIT_TIMEOUT.total_seconds()) // 60,
        low=1,
        high=LONGEST_GIT_TIMEOUT,
        unit="minutes",
    ),
    Setting(
        "REPO_ALLOWED_SCHEMES",
        _REPO_READERS,
        "text",
        "The schemes a run's repository may have (worker, starter and API alike).",
        default="https,ssh",
        example="some of https, ssh, http, git, separated by commas",
        bad=("²", "file", "https,ext"),
    ),
    Setting(
        "REPO_ALLOWED_HOSTS",
        _REPO_READERS,
        "text",
        "The servers a run's repository may be on (worker, starter and API alike).",
        unset="any server",
        example="server names separated by commas: `github.com`, or `*.example.com` for every "
        "name under it",
        bad=("²", "*", "github.com,*", "a/b"),
    ),
    Setting(
        "REPO_ALLOWED_NETWORKS",
        _REPO_READERS,
        "text",
        "The loopback, private or link-local networks a repository's server may resolve into "
        "(worker, starter and API alike).",
        unset="public addresses only",
        example="networks separated by commas, such as `10.20.0.0/16`, `127.0.0.1/32`, `fd00::/8`",
        bad=("²", "10.0.0.0/33", "github.com"),
    ),
    Setting(
        "CALLBACK_HOSTS",
        _REPO_READERS,
        "text",
        "The servers a run's callback URL may name (worker, starter and API alike); a loopback, "
        "private or link-local address only when listed.",
        unset="none: no run may call back",
        example="server names, addresses or networks separated by commas: `hooks.example.com`, "
        "`*.example.com`, `10.20.0.5`, `10.20.0.0/16`",
        bad=("²", "*", "hooks.example.com,*", "a/b", "10.0.0.0/33"),
    ),
    Setting(
        "SCHEDULE_MIN_INTERVAL",
        ("starter", "API"),
        "number",
        "The shortest interval a schedule may start runs at (interval_seconds, --every).",
        default=60,
        low=1,
        high=86_400,
        unit="seconds",
    ),
    Setting(
        "SCHEDULES_PER_CALLER",
        ("starter", "API"),
        "number",
        "The schedules one API caller may hold (the starter's counted as one caller's).",
        default=20,
        low=1,
        high=10_000,
        unit="schedules",
    ),
    Setting(
        "CALLBACK_SECRET",
        ("worker",),
        "text",
        "The key each run's callback is signed with (Standard Webhooks); its receiver holds the "
        "same (docs/callbacks.md).",
        unset="callbacks are refused by the worker",
        example="`whsec_` and the base64 of 24 to 64 random bytes",
        bad=("²", "secret", "whsec_", "whsec_not base64", "whsec_c2hvcnQ=", _KEY),
        secret=True,
    ),
    Setting(
        "OPENAI_API",
        ("worker",),
        "choice",
        "The model endpoint's API: chat_completions for an endpoint that serves Chat Completions "
        "alone.",
        default="responses",
        example="`responses` or `chat_completions`",
        bad=("²", "Responses", "completions", "chat", "responses,chat_completions"),
    ),
    Setting(
        "STREAM_BATCH_MILLISECONDS",
        ("worker",),
        "number",
        "How often a streamed model call sends what the model wrote to the run's stream: each "
        "send is a signal and a workflow task in the run's history (about 4 events), so a "
        "shorter time shows the text sooner and grows the history faster.",
        default=1000,
        low=100,
        high=10_000,
        unit="milliseconds",
    ),
    Setting(
        "MODEL_CALLS_PER_SECOND",
        ("worker",),
        "text",
        "The most model calls the whole fleet of workers starts a second, held by Temporal's "
        "server (every worker the same).",
        unset="no limit",
        example=f"a number above 0 and at most {MOST_MODEL_CALLS_PER_SECOND}, fractions allowed "
        "(`0.5`: one every two seconds)",
        bad=(
            "²",
            "-5",
            HUGE,
            "soon",
            "0",
            "0.0001",
            "1e3",
            "2/s",
            str(MOST_MODEL_CALLS_PER_SECOND + 1),
        ),
    ),
    Setting(
        "STREAM_MODEL_TURNS",
        ("worker",),
        "yes/no",
        "false for an endpoint or fleet that must not stream: new runs then get each model "
        "turn whole, not its text as it is written (a run that streams goes on streaming). "
        "OPENAI_API=chat_completions never streams.",
        default="true",
    ),
    Setting(
        "MODEL_CALLS_QUEUE",
        ("worker",),
        "choice",
        "Where model calls wait for a worker: `run`, with the run's own work (handed to the "
        "worker with its workflow task); `own`, on `<task queue>-model-calls`, whose rate "
        "Temporal's server holds (MODEL_CALLS_PER_SECOND, or one set on that queue).",
        unset="`own` with MODEL_CALLS_PER_SECOND, else `run`",
        example="`run` or `own` (`run` refused with MODEL_CALLS_PER_SECOND)",
        bad=("²", "Own", "model-calls", "run,own", "shared"),
    ),
    Setting(
        "WORKER_HOST_ID",
        ("worker",),
        "text",
        "This worker's host, which its runs' sandboxes on it are bound to: stable across "
        "restarts, distinct for each host.",
        unset="the host name",
        example="1 to 200 letters, digits, `.`, `_` or `-`, starting with a letter or a digit",
        when="host-bound backend",
        bad=("²", "-5", "x" * 201, "a/b", "two words"),
    ),
    Setting(
        "APPROVERS",
        ("worker",),
        "text",
        "Who may approve the agent's commands, each by the public key `--new-approver-key` "
        "prints (required).",
        unset="nobody: the worker refuses to start",
        example="comma-separated `NAME=PUBLIC_KEY`, each an Ed25519 public key",
        when="approvals",
        bad=("²", "-5", "alice", f"alice={'A' * 10_000}"),
    ),
    Setting(
        "DOCKER_ENGINE_SHARED",
        ("worker",),
        "yes/no",
        "true when every worker reaches the same Docker engine: a run then goes on on any worker.",
        default="false",
        when="docker backend",
    ),
    Setting(
        "DOCKER_SANDBOX_MEMORY",
        ("worker",),
        "size",
        "Each run's container's memory, swap included; its workspace and /tmp (64m) are in "
        "memory and count in it.",
        default="2g",
        example="a size from 128m to 1024g (a whole number with k, m or g)",
        when="docker backend",
        bad=("²", "-5g", f"{HUGE}g", "1025g", "64m"),
    ),
    Setting(
        "DOCKER_SANDBOX_CPUS",
        ("worker",),
        "text",
        "Each run's container's CPUs.",
        default="1",
        example="a number of CPUs from 0.01 to 1024",
        when="docker backend",
        bad=("²", "-1", HUGE, "nan", "0"),
    ),
    Setting(
        "DOCKER_SANDBOX_PIDS",
        ("worker",),
        "number",
        "The most processes in each run's container.",
        default=256,
        low=16,
        high=1_000_000,
        unit="processes (the sandbox's own tools need a few)",
        when="docker backend",
    ),
    Setting(
        "DOCKER_SANDBOX_WORKSPACE_SIZE",
        ("worker",),
        "size",
        "The size of each run's workspace (in the container's memory).",
        default="1g",
        example="a size from 1m to 1024g, leaving room in DOCKER_SANDBOX_MEMORY",
        when="docker backend",
        bad=("²", "-1g", f"{HUGE}g", "4g"),
    ),
    Setting(
        "DOCKER_SANDBOX_USER",
        ("worker",),
        "text",
        "The user the agent's commands run as in each container (nobody; 0 is root).",
        default="65534:65534",
        example="a numeric UID or UID:GID",
        when="docker backend",
        bad=("²", "-1", HUGE, "root", "1:2:3"),
    ),
    # ----------------------------------------------------------- the starter
    Setting(
        "TEMPORAL_UI_URL",
        ("starter",),
        "url",
        "The base of the Web UI links the starter prints.",
        unset="links chosen by the address",
        example="https://temporal.example.com",
    ),
    Setting(
        "APPROVER_KEY_FILE",
        ("starter",),
        "text",
        "The approver's private key file the starter signs decisions with.",
        unset="the approver's default key file",
        example="the path of a file",
        when="approvals",
        bad=("\tkey.pem",),
    ),
    # ------------------------------------------------------ the codec server
    Setting(
        "CODEC_SERVER_BIND_ADDRESS",
        ("codec server",),
        "address",
        "Where the codec server listens; other than loopback only with CODEC_SERVER_TOKEN.",
        default="127.0.0.1:8081",
        example="127.0.0.1:8081",
    ),
    Setting(
        "CODEC_SERVER_TOKEN",
        ("codec server",),
        "text",
        "The bearer token every request to the codec server must carry.",
        unset="none (only on a loopback address)",
        example="at least 16 printable ASCII characters without spaces",
        bad=("²", "short", "sixteen or more but spaces"),
        secret=True,
    ),
    Setting(
        "CODEC_SERVER_ALLOWED_ORIGINS",
        ("codec server",),
        "text",
        "The Web UI origins a browser may call the codec server from.",
        default="http://localhost:8233,http://127.0.0.1:8233",
        example="origins (scheme://host[:port], no path, no `*`) separated by commas",
        bad=("²", "*", "https://ui.example/path", "ui.example"),
    ),
    # --------------------------------------------------------------- the API
    Setting(
        "API_BIND_ADDRESS",
        ("API",),
        "address",
        "Where the API listens.",
        default="127.0.0.1:8000",
        example="0.0.0.0:8000",
    ),
    Setting(
        "API_TOKENS",
        ("API",),
        "text",
        "The callers' tokens, each by its SHA-256 (`--new-token NAME` prints an entry); "
        "required unless API_OIDC_ISSUER is set.",
        unset="refused unless API_OIDC_ISSUER is set",
        example="`NAME:SHA256_HEX_OF_TOKEN` entries separated by commas",
        bad=("²", "ci-bot", "ci-bot:abc", f"a b:{'0' * 64}", f"x:{'0' * 64},x:{'1' * 64}"),
    ),
    Setting(
        "API_OIDC_ISSUER",
        ("API",),
        "url",
        "An OpenID Connect issuer whose access tokens for API_OIDC_AUDIENCE are callers too.",
        unset="none",
        example="https://login.example.com/realms/agents",
        together=("API_OIDC_AUDIENCE", "agents-api"),
    ),
    Setting(
        "API_OIDC_AUDIENCE",
        ("API",),
        "text",
        "The audience the issuer puts in this API's access tokens (their `aud`); set with "
        "API_OIDC_ISSUER.",
        unset="none",
        example="the audience, printable text",
        together=("API_OIDC_ISSUER", "https://login.example.com/realms/agents"),
        bad=("\taudience",),
    ),
    Setting(
        "API_APPROVER_KEY_FILE",
        ("API",),
        "text",
        "An approver's key the API signs a caller's unsigned decisions with (only for a "
        "service with approvals).",
        unset="every decision signed by the person's own key",
        example="the path of an approver's key file",
        bad=("\tkey.pem",),
    ),
    Setting(
        "API_STREAMS_PER_CALLER",
        ("API",),
        "number",
        "The event streams one caller may hold open at once on one API process.",
        default=20,
        low=1,
        high=10_000,
        unit="streams",
    ),
    Setting(
        "API_RUNS_IN_FLIGHT_PER_CALLER",
        ("API",),
        "number",
        "The runs of one caller still going past which it may start no other, across the service.",
        default=50,
        low=1,
        high=100_000,
        unit="runs",
    ),
    Setting(
        "API_DOWNLOADS_PER_CALLER",
        ("API",),
        "number",
        "The outputs one caller may be downloading at once from one API process.",
        default=2,
        low=1,
        high=100,
        unit="downloads",
    ),
    Setting(
        "API_DOWNLOADS_AT_ONCE",
        ("API",),
        "number",
        "The outputs all callers together may be downloading at once from one API process.",
        default=4,
        low=1,
        high=1_000,
        unit="downloads",
    ),
)

DECLARED: dict[str, Setting] = {setting.name: setting for setting in SETTINGS}


def read_by(command: Command, service: Service | None = None) -> tuple[str, ...]:
    """The declared settings ``command`` of ``service`` (the current one)
    reads, in declaration order (a backend's options apart: backends/)."""
    service = service or current()
    return tuple(s.name for s in SETTINGS if s.read_by(command, service))
