"""The worker's settings and the starter's, read from the environment once, at start.

Every environment variable the service reads itself is parsed here and
nowhere else: ``worker_settings()`` into a frozen ``WorkerSettings``, which
the worker hands down to whatever needs one of its values, and
``starter_settings()`` into a ``StarterSettings``. A value the service
cannot use stops it before it does anything else, with one line
(``BadSetting``) naming the variable, the value and what is allowed.

Which variables the worker reads depends on its service (service.py): those
of approvals only with approvals, ``WORKER_HOST_ID`` only when the service
has a host-bound backend, those of a backend (its options,
``<BACKEND>_SANDBOX_*``: backends/) only when the service has it.

A variable left unset takes its default. Set to nothing (``NAME=``, a line of
.env uncommented but not filled in) it is refused like any other bad value,
not taken for unset: leave it out, or its line commented, for the default.
The worker's credentials are checked here too: a missing one is named, and
no credential's value is ever printed.

Not here: the ``TEMPORAL_*`` connection settings, which Temporal's own
envconfig reads (connection.py), and the variables each SDK reads for itself
(``OPENAI_BASE_URL``, for one; ``DOCKER_TLS_VERIFY`` with the docker
backend; and the AWS credentials and ``AWS_ENDPOINT_URL`` of an S3 object
store; its region, ``AWS_REGION``, is read here, since the AWS SDK for Python
does not).
docs/operations.md lists every setting, its default and what it allows.
"""

import base64
import binascii
import ipaddress
import os
import re
import socket
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from temporalio.common import WorkerDeploymentVersion

from sandbox_agent_runtime import encryption
from sandbox_agent_runtime import object_store as stores
from sandbox_agent_runtime import repos as repositories
from sandbox_agent_runtime.approvers import default_key_file, public_text
from sandbox_agent_runtime.display import without_credentials
from sandbox_agent_runtime.service import current

# The types it fills, where the modules below it take them from; re-exported,
# as a project's code and tests take them from here.
from sandbox_agent_runtime.settings_types import DOCKER_TMP_SIZE
from sandbox_agent_runtime.settings_types import DockerLimits as DockerLimits
from sandbox_agent_runtime.settings_types import WorkerSettings as WorkerSettings
from sandbox_agent_runtime.shared import (
    GIT_TIMEOUT,
    MODEL_ACTIVITY_TIMEOUT,
    SESSION_IDLE_TIMEOUT,
    SESSION_LIFETIME,
)

# Runs one worker keeps in flight at once unless WORKER_RUNS_IN_FLIGHT says
# otherwise: about 0.7 MiB of worker memory each. Memory and slots are not
# what limits a worker: CPU is (one Python process), to start runs and to
# heartbeat the model calls it waits on. Past this limit runs wait on the
# task queue, which costs nothing (capacity.py). Past MOST_RUNS_IN_FLIGHT,
# one worker's event loop is the limit, not its slots: run more workers.
RUNS_IN_FLIGHT = 1_000
MOST_RUNS_IN_FLIGHT = 100_000

# Each command the agent runs is killed after this many seconds unless
# SANDBOX_COMMAND_TIME_LIMIT_SECONDS says otherwise (bounded_sandbox.py); a
# command that needs more than a day is a job for something else.
COMMAND_TIME_LIMIT = 600
LONGEST_COMMAND_TIME_LIMIT = 86_400


def longest_model_timeout() -> int:
    """The longest MODEL_ACTIVITY_TIMEOUT_SECONDS allowed: an hour, and no
    longer than the service's workflow execution timeout (a run)."""
    return min(3600, int(current().workflow_execution_timeout.total_seconds()))


# Each git process of the worker (workspace/git.py) is killed after GIT_TIMEOUT
# unless GIT_TIMEOUT_MINUTES says otherwise: at most a day.
LONGEST_GIT_TIMEOUT = 24 * 60

# A conversation keeps its sandbox SESSION_IDLE_TIMEOUT after an answer and
# waits for a follow-up SESSION_LIFETIME in all (phases/between.py): each at most a
# year, a bound on how long a conversation holds a sandbox or a snapshot.
LONGEST_SESSION = 365 * 86_400

# What Temporal accepts as a Worker Deployment's name and build id (both or
# neither: versioning.py): no whitespace or control characters, and no "."
# in a deployment name (the server joins the two with one).
_DEPLOYMENT_NAME = re.compile(r"[^\s.]{1,255}")
_BUILD_ID = re.compile(r"[^\s]{1,255}")

# What a host id may be (a service with a host-bound backend): it becomes
# part of a task queue's name (affinity.py).
_HOST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")

# Each run's container, with the docker backend (backends/docker.py): the
# variables, their defaults and bounds. Memory covers the workspace and /tmp
# too: both are in-memory file systems, /tmp of DOCKER_TMP_SIZE (settings_types.py).
DOCKER_MEMORY = ("DOCKER_SANDBOX_MEMORY", "2g")
DOCKER_CPUS = ("DOCKER_SANDBOX_CPUS", "1")
DOCKER_PIDS = ("DOCKER_SANDBOX_PIDS", "256")
DOCKER_WORKSPACE_SIZE = ("DOCKER_SANDBOX_WORKSPACE_SIZE", "1g")
DOCKER_USER = ("DOCKER_SANDBOX_USER", "65534:65534")
_SIZE = re.compile(r"([0-9]{1,7})([kmg]?)b?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_LARGEST_SIZE = 1 << 40  # 1 TiB
_USER = re.compile(r"([0-9]{1,10})(?::([0-9]{1,10}))?")
_LARGEST_ID = 2**32 - 2
# The highest fleet-wide rate of model calls (MODEL_CALLS_PER_SECOND) taken:
# above it, a typo (an extra digit or three) is likelier than a fleet.
MOST_MODEL_CALLS_PER_SECOND = 10_000
_YES_NO = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def worker_variables() -> tuple[str, ...]:
    """Every variable the worker of this service reads itself, besides its
    credentials."""
    from sandbox_agent_runtime.backends import backend_module, variable

    service = current()
    return (
        "WORKER_RUNS_IN_FLIGHT",
        "SANDBOX_COMMAND_TIME_LIMIT_SECONDS",
        "MODEL_ACTIVITY_TIMEOUT_SECONDS",
        "HEALTH_BIND_ADDRESS",
        "PROMETHEUS_BIND_ADDRESS",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "TEMPORAL_DEPLOYMENT_NAME",
        "TEMPORAL_WORKER_BUILD_ID",
        "OBJECT_STORE_URL",
        "PAYLOAD_ENCRYPTION_KEYS",
        "SESSION_IDLE_TIMEOUT",
        "SESSION_LIFETIME",
        "GIT_TIMEOUT_MINUTES",
        *REPO_VARIABLES,
        "OPENAI_API",
        "MODEL_CALLS_PER_SECOND",
        *(("WORKER_HOST_ID",) if service.host_bound else ()),
        *(("APPROVERS",) if service.approvals else ()),
        *(
            (
                "DOCKER_ENGINE_SHARED",
                DOCKER_MEMORY[0],
                DOCKER_CPUS[0],
                DOCKER_PIDS[0],
                DOCKER_WORKSPACE_SIZE[0],
                DOCKER_USER[0],
            )
            if "docker" in service.backends
            else ()
        ),
        *(
            variable(backend, key)
            for backend in service.backends
            for key in backend_module(backend).OPTIONS
        ),
    )


def starter_variables() -> tuple[str, ...]:
    """Every variable the starter of this service reads itself."""
    return (
        "TEMPORAL_UI_URL",
        "OBJECT_STORE_URL",
        "PAYLOAD_ENCRYPTION_KEYS",
        *REPO_VARIABLES,
        *(("APPROVER_KEY_FILE",) if current().approvals else ()),
    )


# The most of a bad value a message shows.
_SHOWN = 80


class BadSetting(ValueError):
    """A setting the service cannot use; its message is one line naming the
    variable, the value and what is allowed."""


def shown(value: str) -> str:
    """``value`` as a message shows it: quoted, escaped, and cut when long."""
    if len(value) > _SHOWN:
        return f"{value[:_SHOWN]!r}... ({len(value):,} characters)"
    return repr(value)


def refused(name: str, value: str, allowed: str, why: str = "") -> BadSetting:
    """The line refusing ``name=value``: what is allowed, and (``why``) what
    is wrong with the value when the allowed forms alone do not say."""
    because = f" ({why})" if why else ""
    return BadSetting(f"{name}={shown(value)} is not allowed: use {allowed}{because}.")


def whole_number(
    environ: Mapping[str, str], name: str, default: int, low: int, high: int, unit: str
) -> int:
    """``name`` as a whole number from ``low`` to ``high`` (ASCII digits, ``_``
    between them allowed: 10_000), or ``default`` when it is unset."""
    value = environ.get(name)
    if value is None:
        return default
    text = value.strip()
    if not re.fullmatch(r"[0-9]{1,15}(_[0-9]{3}){0,4}", text) or not low <= int(text) <= high:
        raise refused(
            name,
            value,
            f"a whole number of {unit} from {low} to {high}, or leave it unset for {default}",
        )
    return int(text)


def address(
    environ: Mapping[str, str], name: str, example: str, unset: str
) -> tuple[str, int] | None:
    """``name`` as (host, port), or None when it is unset."""
    value = environ.get(name)
    if value is None:
        return None
    host, _, port = value.strip().rpartition(":")
    if (
        not host
        or not host.isprintable()
        or any(c.isspace() for c in host)
        or not re.fullmatch(r"[0-9]{1,5}", port)
        or not 1 <= int(port) <= 65535
    ):
        raise refused(
            name,
            value,
            f"host:port with a port from 1 to 65535, such as {example}, or leave it unset for {unset}",
        )
    return host, int(port)


def web_address(
    environ: Mapping[str, str], name: str, example: str, unset: str | None
) -> str | None:
    """``name`` as an http(s) URL with a host, or None when it is unset
    (``unset`` says what that means; None: it is required, and
    missing_credentials() has said so before)."""
    value = environ.get(name)
    if value is None:
        return None
    try:
        parts = urlsplit(value.strip())
        parts.port  # noqa: B018 (raises ValueError for a port that is not one)
    except ValueError:
        parts = urlsplit("")
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or not value.strip().isprintable()
    ):
        allowed = f"an http:// or https:// URL, such as {example}"
        if unset:
            allowed += f", or leave it unset for {unset}"
        raise refused(name, without_credentials(value), allowed)
    return value.strip()


# The repositories a run may be given (repos.py): read by the worker, which
# checks before it clones, and by the starter and the API (and so the
# evaluations), which refuse before a run starts; set them alike.
REPO_VARIABLES = ("REPO_ALLOWED_SCHEMES", "REPO_ALLOWED_HOSTS", "REPO_ALLOWED_NETWORKS")


def repo_policy(environ: Mapping[str, str]) -> repositories.RepoPolicy:
    """The REPO_ALLOWED_* settings; each unset keeps its default."""
    default = repositories.DEFAULT_POLICY
    # Each setting: how it is read, and what it may be.
    readers: dict[str, tuple[Callable[[str], tuple[Any, ...]], str]] = {
        "REPO_ALLOWED_SCHEMES": (
            repositories.parse_schemes,
            f"some of {', '.join(repositories.SCHEMES)}, separated by commas, or leave it unset "
            f"for {','.join(default.schemes)}",
        ),
        "REPO_ALLOWED_HOSTS": (
            repositories.parse_hosts,
            "server names (github.com, or *.example.com for every name under it), separated by "
            "commas, or leave it unset for any server",
        ),
        "REPO_ALLOWED_NETWORKS": (
            repositories.parse_networks,
            "networks (10.20.0.0/16, 127.0.0.1/32, fd00::/8), separated by commas, or leave it "
            "unset for public addresses only",
        ),
    }
    read: dict[str, tuple[Any, ...]] = {}
    for name, (parse, allowed) in readers.items():
        value = environ.get(name)
        if value is None:
            continue
        try:
            read[name] = parse(value)
        except ValueError as e:
            raise refused(name, value, allowed, str(e)) from None
    return repositories.RepoPolicy(
        schemes=read.get("REPO_ALLOWED_SCHEMES") or default.schemes,
        hosts=read.get("REPO_ALLOWED_HOSTS") or default.hosts,
        networks=read.get("REPO_ALLOWED_NETWORKS") or default.networks,
    )


# ---------------------------------------------------------------- the worker


# Any one of these sets of environment variables, each set and non-empty.
Alternatives = tuple[tuple[str, ...], ...]


def required_credentials() -> list[tuple[Alternatives, str]]:
    """What the worker needs in its environment before it starts, and where
    to get it. The OpenAI client wants a key even for another OpenAI-compatible
    endpoint (OPENAI_BASE_URL); for one that ignores keys, any value will do.
    Then each sandbox backend's credentials, and the variables forwarded to
    the agent's sandbox."""
    # Imported here, not at the top: the starter reads its own settings from
    # this module and need not load the sandbox SDKs (seconds of start-up).
    from sandbox_agent_runtime.backends import sandbox_backends

    return [
        ((("OPENAI_API_KEY",),), "https://platform.openai.com/api-keys"),
        *(
            (backend.REQUIRED_ENVIRONMENT, backend.CREDENTIALS_URL)
            for backend in sandbox_backends().values()
            if backend.REQUIRED_ENVIRONMENT
        ),
        *((((name,),), "forwarded to the agent's sandbox") for name in current().sandbox_secrets),
    ]


def missing_credentials(environ: Mapping[str, str]) -> str | None:
    """One line naming the credentials the worker lacks (never their
    values), or None."""
    missing = [
        f"{' or '.join(' with '.join(names) for names in alternatives)} ({where})"
        for alternatives, where in required_credentials()
        if not any(all(environ.get(name, "").strip() for name in names) for names in alternatives)
    ]
    if not missing:
        return None
    return f"Missing credentials: set {'; '.join(missing)}. See .env.example."


def worker_settings(environ: Mapping[str, str] = os.environ) -> WorkerSettings:
    """The worker's settings; ``BadSetting`` for the first one it cannot use,
    the missing credentials first of all."""
    problem = missing_credentials(environ)
    if problem:
        raise BadSetting(problem)
    service = current()
    docker = "docker" in service.backends
    idle_timeout, lifetime = session_times(environ)
    return WorkerSettings(
        runs_in_flight=whole_number(
            environ, "WORKER_RUNS_IN_FLIGHT", RUNS_IN_FLIGHT, 1, MOST_RUNS_IN_FLIGHT, "runs"
        ),
        command_time_limit=whole_number(
            environ,
            "SANDBOX_COMMAND_TIME_LIMIT_SECONDS",
            COMMAND_TIME_LIMIT,
            1,
            LONGEST_COMMAND_TIME_LIMIT,
            "seconds",
        ),
        model_activity_timeout=timedelta(
            seconds=whole_number(
                environ,
                "MODEL_ACTIVITY_TIMEOUT_SECONDS",
                int(MODEL_ACTIVITY_TIMEOUT.total_seconds()),
                1,
                longest_model_timeout(),
                "seconds",
            )
        ),
        health_address=address(
            environ, "HEALTH_BIND_ADDRESS", "0.0.0.0:8080", "no health endpoint"
        ),
        metrics_address=address(environ, "PROMETHEUS_BIND_ADDRESS", "0.0.0.0:9464", "no metrics"),
        traces_endpoint=web_address(
            environ, "OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318", "no traces"
        ),
        version=worker_version(environ),
        object_store=object_store(environ),
        keys=encryption_keys(environ),
        session_idle_timeout=idle_timeout,
        session_lifetime=lifetime,
        git_timeout=timedelta(
            minutes=whole_number(
                environ,
                "GIT_TIMEOUT_MINUTES",
                int(GIT_TIMEOUT.total_seconds()) // 60,
                1,
                LONGEST_GIT_TIMEOUT,
                "minutes",
            )
        ),
        repos=repo_policy(environ),
        # In this order: the first one refused is the one named.
        host_id=host_id(environ) if service.host_bound else "",
        approvers=approvers(environ) if service.approvals else {},
        docker_engine_shared=docker_engine_shared(environ) if docker else False,
        docker_limits=docker_limits(environ) if docker else None,
        docker_host=(environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock") if docker else "",
        cloudflare_worker_url=(
            web_address(
                environ,
                "CLOUDFLARE_SANDBOX_WORKER_URL",
                "https://sandbox.<your-subdomain>.workers.dev",
                None,
            )
            or ""
        )
        if "cloudflare" in service.backends
        else "",
        backend_options=backend_options(environ),
        openai_api=openai_api(environ),
        model_calls_per_second=model_calls_per_second(environ),
    )


def openai_api(environ: Mapping[str, str]) -> str:
    """``OPENAI_API``: the model endpoint's API (model_api.py)."""
    value = environ.get("OPENAI_API")
    if value is None:
        return "responses"
    if value.strip() not in ("responses", "chat_completions"):
        raise refused(
            "OPENAI_API",
            value,
            "responses (OpenAI's Responses API, the default) or chat_completions (an "
            "endpoint that speaks Chat Completions alone)",
        )
    return value.strip()


def keep_litellm_offline(environ: MutableMapping[str, str] = os.environ) -> None:
    """Have LiteLLM (litellm_models.py), if the worker imports it, read its
    table of model prices from its own package rather than fetch it from the
    internet when it is imported: ``LITELLM_LOCAL_MODEL_COST_MAP``, unless
    the environment sets it. Called at the worker's start, before any import
    of LiteLLM."""
    environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def model_calls_per_second(environ: Mapping[str, str]) -> float | None:
    """``MODEL_CALLS_PER_SECOND``: the fleet's rate of model calls (a number
    of calls a second, fractions allowed: 0.5 is one every two seconds), or
    None when it is unset (model_queue.py)."""
    value = environ.get("MODEL_CALLS_PER_SECOND")
    if value is None:
        return None
    text = value.strip()
    allowed = (
        f"a number of model calls a second for the whole fleet, above 0 and at most "
        f"{MOST_MODEL_CALLS_PER_SECOND:,} (0.5: one every two seconds), or leave it unset for "
        "no limit"
    )
    if not re.fullmatch(r"[0-9]{1,6}(\.[0-9]{1,3})?", text):
        raise refused("MODEL_CALLS_PER_SECOND", value, allowed)
    rate = float(text)
    if not 0 < rate <= MOST_MODEL_CALLS_PER_SECOND:
        raise refused("MODEL_CALLS_PER_SECOND", value, allowed)
    return rate


def backend_options(environ: Mapping[str, str]) -> dict[str, dict[str, int | bool | str]]:
    """The options of each of the service's backends, from
    ``<BACKEND>_SANDBOX_<KEY>`` or their defaults (backends/)."""
    from sandbox_agent_runtime.backends import backend_module, variable

    chosen: dict[str, dict[str, int | bool | str]] = {}
    run = int(current().workflow_execution_timeout.total_seconds())
    for backend in current().backends:
        options = backend_module(backend).OPTIONS
        values: dict[str, int | bool | str] = {}
        for key, option in options.items():
            name = variable(backend, key)
            value = environ.get(name)
            default = option.default_value()
            if value is None:
                values[key] = default
            else:
                try:
                    values[key] = option.parse(value)
                except ValueError as e:
                    raise refused(
                        name, value, f"{e}, or leave it unset for {option.shown(default)}"
                    ) from None
            if option.outlives_the_run and int(values[key]) < run:
                fix = (
                    f"set it to at least {run}, or shorten the service's runs"
                    if run <= option.high
                    else f"shorten the service's runs to {option.high} s at most"
                )
                raise BadSetting(
                    f"{name}={shown(value) if value is not None else f'{values[key]} (its default)'}"
                    " is not allowed: a run may last {run} s (the service's workflow execution timeout), "
                    f"and the provider ends its sandbox, workspace and all, at this lifetime: {fix}."
                )
        for key, option in options.items():
            if option.excludes and values[key] and values[option.excludes]:
                raise BadSetting(
                    f"{variable(backend, key)} and {variable(backend, option.excludes)} are both "
                    "set: a sandbox starts from one of them, not both; unset one."
                )
        chosen[backend] = values
    return chosen


def object_store(environ: Mapping[str, str]) -> stores.ObjectStore | None:
    """The object store ``OBJECT_STORE_URL`` names, or None when it is unset.
    An S3 store's region is ``AWS_REGION``, else ``AWS_DEFAULT_REGION`` (the
    only one of the two the AWS SDK for Python reads itself)."""
    value = environ.get("OBJECT_STORE_URL")
    if value is None:
        return None
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or None
    try:
        store = stores.parse(value, region)
    except stores.NotAStore as e:
        raise refused(
            "OBJECT_STORE_URL", without_credentials(value), stores.ALLOWED, str(e)
        ) from None
    # What the AWS SDK reads itself, for the store's messages to mask.
    endpoints = (environ.get("AWS_ENDPOINT_URL"), environ.get("AWS_ENDPOINT_URL_S3"))
    return replace(store, endpoints=tuple(filter(None, endpoints)))


def encryption_keys(environ: Mapping[str, str]) -> encryption.Keys | None:
    """The keys ``PAYLOAD_ENCRYPTION_KEYS`` holds, or None when it is unset
    (its message names the entry that is wrong, never a key)."""
    try:
        return encryption.keys_from(environ)
    except encryption.BadKeys as e:
        raise BadSetting(str(e)) from None


def session_times(environ: Mapping[str, str]) -> tuple[timedelta, timedelta]:
    """``SESSION_IDLE_TIMEOUT`` and ``SESSION_LIFETIME``, whole seconds each.
    The lifetime may not be shorter than the idle timeout: a conversation
    releases its sandbox while it waits, never after it has ended. Of the two,
    the one refused is the one set (the lifetime, when both are)."""
    idle = whole_number(
        environ,
        "SESSION_IDLE_TIMEOUT",
        int(SESSION_IDLE_TIMEOUT.total_seconds()),
        1,
        LONGEST_SESSION,
        "seconds",
    )
    lifetime = whole_number(
        environ,
        "SESSION_LIFETIME",
        int(SESSION_LIFETIME.total_seconds()),
        1,
        LONGEST_SESSION,
        "seconds",
    )
    if lifetime < idle:
        if "SESSION_LIFETIME" in environ:
            raise refused(
                "SESSION_LIFETIME",
                environ["SESSION_LIFETIME"],
                f"a whole number of seconds no smaller than SESSION_IDLE_TIMEOUT ({idle})",
                "a conversation must not end before it would release its sandbox",
            )
        raise refused(
            "SESSION_IDLE_TIMEOUT",
            environ["SESSION_IDLE_TIMEOUT"],
            f"a whole number of seconds no larger than SESSION_LIFETIME ({lifetime}), "
            "or set SESSION_LIFETIME longer",
            "a conversation must not end before it would release its sandbox",
        )
    return timedelta(seconds=idle), timedelta(seconds=lifetime)


def worker_version(environ: Mapping[str, str]) -> WorkerDeploymentVersion | None:
    """The Worker Deployment Version the worker polls as, or None when
    versioning is off (neither variable set)."""
    name = environ.get("TEMPORAL_DEPLOYMENT_NAME")
    build = environ.get("TEMPORAL_WORKER_BUILD_ID")
    if name is None and build is None:
        return None
    if name is None or build is None:
        given, missing = (
            ("TEMPORAL_DEPLOYMENT_NAME", "TEMPORAL_WORKER_BUILD_ID")
            if build is None
            else ("TEMPORAL_WORKER_BUILD_ID", "TEMPORAL_DEPLOYMENT_NAME")
        )
        raise BadSetting(
            f"{given}={shown(environ[given])} is set but {missing} is not: set both "
            "(a versioned worker: docs/versioning.md) or neither (versioning off)."
        )
    if not _DEPLOYMENT_NAME.fullmatch(name):
        raise refused("TEMPORAL_DEPLOYMENT_NAME", name, "1 to 255 characters, no spaces or dots")
    if not _BUILD_ID.fullmatch(build):
        raise refused("TEMPORAL_WORKER_BUILD_ID", build, "1 to 255 characters, no spaces")
    return WorkerDeploymentVersion(deployment_name=name, build_id=build)


def host_id(environ: Mapping[str, str]) -> str:
    """This worker's host: ``WORKER_HOST_ID``, or else the host name (read
    for a service with a host-bound backend)."""
    allowed = "1 to 200 letters, digits, '.', '_' or '-', starting with a letter or a digit"
    configured = environ.get("WORKER_HOST_ID")
    if configured is not None:
        if not _HOST_ID.fullmatch(configured):
            raise refused("WORKER_HOST_ID", configured, allowed)
        return configured
    name = socket.gethostname()
    if not _HOST_ID.fullmatch(name):
        raise BadSetting(
            f"The host name {shown(name)} cannot name this worker's host: set WORKER_HOST_ID to {allowed}."
        )
    return name


def approvers(environ: Mapping[str, str]) -> dict[str, str]:
    """The approvers ``APPROVERS`` names, as public key -> name, each
    NAME=KEY with a name and an Ed25519 public key (read for a service with
    approvals)."""
    value = environ.get("APPROVERS", "")
    if not value.strip():
        raise BadSetting(
            f"APPROVERS={shown(value)} names nobody who could approve a request: make a key with "
            f"`{current().command('starter')} --new-approver-key NAME` and set "
            "APPROVERS=NAME=<the public key it prints> (docs/approvals.md)."
        )
    trusted: dict[str, str] = {}
    for item in (part.strip() for part in value.split(",")):
        name, _, key = item.partition("=")
        try:
            if not name.strip() or not key:
                raise ValueError(item)
            public = Ed25519PublicKey.from_public_bytes(
                base64.b64decode(key.strip(), validate=True)
            )
        except (binascii.Error, ValueError):
            raise BadSetting(
                f"APPROVERS: {shown(item)} is not NAME=PUBLIC_KEY with an Ed25519 public key (44 "
                "characters of base64); allowed: comma-separated NAME=PUBLIC_KEY, as "
                "--new-approver-key prints them."
            ) from None
        trusted[public_text(public)] = name.strip()
    return trusted


def docker_engine_shared(environ: Mapping[str, str]) -> bool:
    """Whether every worker reaches the same Docker engine (``DOCKER_ENGINE_SHARED``)."""
    value = environ.get("DOCKER_ENGINE_SHARED")
    if value is None:
        return False
    if value.strip().lower() not in _YES_NO:
        raise refused(
            "DOCKER_ENGINE_SHARED",
            value,
            "true when every worker reaches the same Docker engine, false when each host has "
            "its own (or leave it unset for false)",
        )
    return _YES_NO[value.strip().lower()]


def _size(environ: Mapping[str, str], variable: tuple[str, str], smallest: int) -> int:
    name, default = variable
    value = environ.get(name, default)
    found = _SIZE.fullmatch(value.strip())
    size = int(found.group(1)) * _UNITS[found.group(2).lower()] if found else 0
    if not smallest <= size <= _LARGEST_SIZE:
        raise refused(
            name,
            value,
            f"a size from {smallest >> 20}m to 1024g (a whole number with k, m or g), "
            f"or leave it unset for {default}",
        )
    return size


def docker_limits(environ: Mapping[str, str]) -> DockerLimits:
    """The bounds on each sandbox container, from ``DOCKER_SANDBOX_*``."""
    memory = _size(environ, DOCKER_MEMORY, 128 << 20)
    workspace_size = _size(environ, DOCKER_WORKSPACE_SIZE, 1 << 20)
    if workspace_size + DOCKER_TMP_SIZE >= memory:
        name, default = DOCKER_WORKSPACE_SIZE
        raise BadSetting(
            f"{name}={shown(environ.get(name, default))} leaves no room in "
            f"{DOCKER_MEMORY[0]}={shown(environ.get(DOCKER_MEMORY[0], DOCKER_MEMORY[1]))}: the "
            f"workspace and /tmp ({DOCKER_TMP_SIZE >> 20}m) are kept in the container's memory; "
            "give it more memory, or the workspace less."
        )
    name, default = DOCKER_CPUS
    cpus = environ.get(name, default)
    if (
        not re.fullmatch(r"[0-9]{1,4}(\.[0-9]{1,3})?", cpus.strip())
        or not 0.01 <= float(cpus) <= 1024
    ):
        raise refused(
            name,
            cpus,
            f"a number of CPUs from 0.01 to 1024, or leave it unset for {default}",
        )
    name, default = DOCKER_PIDS
    pids = whole_number(
        environ, name, int(default), 16, 1_000_000, "processes (the sandbox's own tools need a few)"
    )
    name, default = DOCKER_USER
    user = environ.get(name, default)
    found = _USER.fullmatch(user.strip())
    uid = int(found.group(1)) if found else -1
    gid = int(found.group(2) or uid) if found else -1
    if not (0 <= uid <= _LARGEST_ID and 0 <= gid <= _LARGEST_ID):
        raise refused(
            name,
            user,
            f"a numeric UID or UID:GID from 0 to {_LARGEST_ID}, such as 65534:65534 (0 runs the "
            f"agent's commands as root), or leave it unset for {default}",
        )
    return DockerLimits(memory, float(cpus), pids, workspace_size, uid, gid)


# --------------------------------------------------------------- the starter


@dataclass(frozen=True)
class StarterSettings:
    """Everything the starter takes from its environment, parsed."""

    # TEMPORAL_UI_URL: the base of the Web UI links it prints; None: the
    # Temporal Cloud UI for a Cloud address, else the dev server's.
    ui_url: str | None
    # OBJECT_STORE_URL: the worker's object store, which the starter needs
    # too (object_store.py); None: none.
    object_store: stores.ObjectStore | None
    # PAYLOAD_ENCRYPTION_KEYS: the worker's keys (encryption.py); None: none.
    keys: encryption.Keys | None
    # APPROVER_KEY_FILE: the approver's private key (approvers.py); read only
    # with approvals (without, the default, which nothing reads).
    approver_key_file: Path
    # REPO_ALLOWED_*: the repositories a run may be given (repos.py).
    repos: repositories.RepoPolicy = repositories.DEFAULT_POLICY


def starter_settings(environ: Mapping[str, str] = os.environ) -> StarterSettings:
    """The starter's settings; ``BadSetting`` for the first one it cannot use."""
    key_file = environ.get("APPROVER_KEY_FILE") if current().approvals else None
    if key_file is not None and (not key_file.strip() or not key_file.isprintable()):
        raise refused(
            "APPROVER_KEY_FILE",
            key_file,
            f"the path of a file, or leave it unset for {default_key_file()}",
        )
    return StarterSettings(
        ui_url=web_address(
            environ,
            "TEMPORAL_UI_URL",
            "https://temporal.example.com",
            "links chosen by the address",
        ),
        object_store=object_store(environ),
        keys=encryption_keys(environ),
        approver_key_file=Path(key_file or default_key_file()).expanduser(),
        repos=repo_policy(environ),
    )


# ---------------------------------------------------------- the codec server

# Where the codec server listens unless CODEC_SERVER_BIND_ADDRESS says.
CODEC_SERVER_ADDRESS = ("127.0.0.1", 8081)
# The Web UI origins a browser may call it from: the dev server's UI.
CODEC_SERVER_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")
# Every variable the codec server reads itself.
CODEC_SERVER_VARIABLES = (
    "PAYLOAD_ENCRYPTION_KEYS",
    "OBJECT_STORE_URL",
    "CODEC_SERVER_BIND_ADDRESS",
    "CODEC_SERVER_TOKEN",
    "CODEC_SERVER_ALLOWED_ORIGINS",
    "TEMPORAL_NAMESPACE",
)
_SHORTEST_TOKEN = 16


@dataclass(frozen=True)
class CodecServerSettings:
    """Everything the codec server takes from its environment, parsed."""

    # PAYLOAD_ENCRYPTION_KEYS: the workers' keys; required.
    keys: encryption.Keys
    # OBJECT_STORE_URL: where the payloads history refers to are kept.
    object_store: stores.ObjectStore | None
    # CODEC_SERVER_BIND_ADDRESS: where it listens.
    address: tuple[str, int]
    # CODEC_SERVER_TOKEN: the bearer token every request must carry; None:
    # none (only on a loopback address).
    token: str | None
    # CODEC_SERVER_ALLOWED_ORIGINS: the origins a browser may call it from.
    allowed_origins: tuple[str, ...]
    # TEMPORAL_NAMESPACE: the one namespace it decodes for.
    namespace: str


def codec_server_settings(environ: Mapping[str, str] = os.environ) -> CodecServerSettings:
    """The codec server's settings; ``BadSetting`` for the first one it cannot use."""
    keys = encryption_keys(environ)
    if keys is None:
        raise BadSetting(
            f"{encryption.KEYS_VARIABLE} is unset: the codec server decrypts with the workers' "
            f"keys; set it as the workers have it ({encryption.ALLOWED})."
        )
    bind = address(environ, "CODEC_SERVER_BIND_ADDRESS", "127.0.0.1:8081", "127.0.0.1:8081")
    bind = bind or CODEC_SERVER_ADDRESS
    token = environ.get("CODEC_SERVER_TOKEN")
    if token is not None and (
        len(token) < _SHORTEST_TOKEN
        or not token.isprintable()
        or not token.isascii()
        or " " in token
    ):
        raise BadSetting(
            f"CODEC_SERVER_TOKEN is not allowed: use at least {_SHORTEST_TOKEN} printable ASCII "
            'characters without spaces (make one with: python -c "import secrets; '
            'print(secrets.token_urlsafe(32))").'
        )
    if token is None and not loopback(bind[0]):
        raise BadSetting(
            f"CODEC_SERVER_BIND_ADDRESS={shown(environ['CODEC_SERVER_BIND_ADDRESS'])} is not a "
            "loopback address and CODEC_SERVER_TOKEN is unset: whoever reaches the port could "
            "decrypt every run; set a token, or bind 127.0.0.1."
        )
    return CodecServerSettings(
        keys=keys,
        object_store=object_store(environ),
        address=bind,
        token=token,
        allowed_origins=allowed_origins(environ),
        namespace=environ.get("TEMPORAL_NAMESPACE") or "default",
    )


def loopback(host: str) -> bool:
    """Whether ``host`` names this host's loopback interface only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_origins(environ: Mapping[str, str]) -> tuple[str, ...]:
    """``CODEC_SERVER_ALLOWED_ORIGINS``: origins (scheme://host[:port], no
    path, no ``*``), separated by commas; the dev server's UI when unset."""
    value = environ.get("CODEC_SERVER_ALLOWED_ORIGINS")
    if value is None:
        return CODEC_SERVER_ORIGINS
    origins = []
    for origin in (part.strip() for part in value.split(",")):
        parts = urlsplit(origin)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path
            or parts.query
            or parts.fragment
            or not origin.isprintable()
        ):
            raise refused(
                "CODEC_SERVER_ALLOWED_ORIGINS",
                without_credentials(value),
                "the Web UI's origins, such as https://cloud.temporal.io or "
                "http://localhost:8233, separated by commas (no path, no '*')",
                f"{without_credentials(origin)!r} is not one",
            )
        origins.append(origin)
    return tuple(origins)


# ------------------------------------------------------------------- the API

# Where the API listens unless API_BIND_ADDRESS says.
API_ADDRESS = ("127.0.0.1", 8000)
# Every variable the API reads itself, beside the starter's (it is a client
# of the same Temporal service, keys and object store).
API_VARIABLES = (
    "API_BIND_ADDRESS",
    "API_TOKENS",
    "API_OIDC_ISSUER",
    "API_OIDC_AUDIENCE",
    "API_APPROVER_KEY_FILE",
)
# A caller's name: what a run records as its owner, and the logs show.
_CALLER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")


@dataclass(frozen=True)
class ApiSettings:
    """Everything the API takes from its environment, parsed."""

    # The Temporal service, the payloads' keys and the object store, as the
    # starter has them.
    starter: StarterSettings
    # API_BIND_ADDRESS: where it listens.
    address: tuple[str, int]
    # API_TOKENS: the callers' tokens, each by the SHA-256 of its text (hex)
    # -> the caller's name.
    tokens: dict[str, str]
    # API_OIDC_ISSUER and API_OIDC_AUDIENCE: an OpenID Connect issuer whose
    # access tokens for this audience are callers too; None: none.
    oidc_issuer: str | None = None
    oidc_audience: str | None = None
    # API_APPROVER_KEY_FILE: an approver's key the API signs decisions with
    # when a caller sends one unsigned (the operator's choice: whoever may
    # call the API as that caller then decides as that approver); None:
    # every decision is signed by the person's own key.
    approver_key_file: Path | None = None
    # API_STREAMS_PER_CALLER: the event streams one caller may hold open at
    # once on one API process.
    streams_per_caller: int = 20
    # API_RUNS_IN_FLIGHT_PER_CALLER: the runs of one caller still going
    # (conversations waiting for a follow-up among them) past which it may
    # start no other, counted across the service.
    runs_per_caller: int = 50
    # API_DOWNLOADS_PER_CALLER and API_DOWNLOADS_AT_ONCE: the outputs one
    # caller, and all callers, may be downloading at once from one API
    # process (each takes memory while its archive is made).
    downloads_per_caller: int = 2
    downloads_at_once: int = 4


# Each of the API's bounds on a caller (API_*: ApiSettings): its variable,
# default and the most it takes. Past these, a bound is no bound.
API_BOUNDS: dict[str, tuple[str, int, int, str]] = {
    "streams_per_caller": ("API_STREAMS_PER_CALLER", 20, 10_000, "streams"),
    "runs_per_caller": ("API_RUNS_IN_FLIGHT_PER_CALLER", 50, 100_000, "runs"),
    "downloads_per_caller": ("API_DOWNLOADS_PER_CALLER", 2, 100, "downloads"),
    "downloads_at_once": ("API_DOWNLOADS_AT_ONCE", 4, 1_000, "downloads"),
}


def caller_name(name: str) -> bool:
    """Whether ``name`` may name a caller (API_TOKENS, --new-token)."""
    return _CALLER_NAME.fullmatch(name) is not None


CALLER_NAMES = "a name of letters, digits and . _ @ - (at most 64, starting with a letter or digit)"


def api_tokens(environ: Mapping[str, str]) -> dict[str, str]:
    """``API_TOKENS``: comma-separated NAME:SHA256_HEX_OF_TOKEN; {} when unset."""
    value = environ.get("API_TOKENS")
    if value is None or not value.strip():
        return {}
    allowed = (
        "NAME:SHA256_HEX_OF_TOKEN entries separated by commas, each printed by "
        f"{current().command('api')} --new-token NAME"
    )
    tokens: dict[str, str] = {}
    for entry in (part.strip() for part in value.split(",") if part.strip()):
        name, colon, digest = entry.partition(":")
        digest = digest.strip().lower()
        if not colon or not caller_name(name.strip()):
            raise refused("API_TOKENS", value, allowed, f"{shown(entry[:40])}: {CALLER_NAMES}")
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise refused(
                "API_TOKENS",
                value,
                allowed,
                f"{name.strip()!r}'s digest is not 64 hexadecimal digits (the token itself "
                "never goes in the setting)",
            )
        if digest in tokens or name.strip() in tokens.values():
            raise refused("API_TOKENS", value, allowed, f"{name.strip()!r} is there twice")
        tokens[digest] = name.strip()
    return tokens


def api_settings(environ: Mapping[str, str] = os.environ) -> ApiSettings:
    """The API's settings; ``BadSetting`` for the first one it cannot use."""
    tokens = api_tokens(environ)
    issuer = web_address(
        environ, "API_OIDC_ISSUER", "https://login.example.com/realms/agents", "none"
    )
    audience = environ.get("API_OIDC_AUDIENCE")
    if issuer is not None and (
        audience is None or not audience.strip() or not audience.isprintable()
    ):
        raise BadSetting(
            f"API_OIDC_AUDIENCE={shown(audience or '')} is not allowed with API_OIDC_ISSUER set: use "
            "the audience the issuer puts in this API's access tokens (their 'aud')."
        )
    if issuer is None and audience is not None:
        raise BadSetting(
            "API_OIDC_AUDIENCE is set but API_OIDC_ISSUER is not: set the issuer too, or unset both."
        )
    if not tokens and issuer is None:
        raise BadSetting(
            "API_TOKENS is unset: every route under /v1/ needs a caller; make a token with "
            f"{current().command('api')} --new-token NAME and set API_TOKENS to the entry it prints "
            "(or set API_OIDC_ISSUER and API_OIDC_AUDIENCE)."
        )
    bind = address(environ, "API_BIND_ADDRESS", "0.0.0.0:8000", "127.0.0.1:8000")
    key_file = environ.get("API_APPROVER_KEY_FILE")
    if key_file is not None and (not key_file.strip() or not key_file.isprintable()):
        raise refused(
            "API_APPROVER_KEY_FILE",
            key_file,
            "the path of an approver's key file, or leave it unset",
        )
    if key_file is not None and not current().approvals:
        raise BadSetting(
            "API_APPROVER_KEY_FILE is set, but this service asks no one for approval: unset it."
        )
    bounds = {
        field: whole_number(environ, name, default, 1, most, unit)
        for field, (name, default, most, unit) in API_BOUNDS.items()
    }
    return ApiSettings(
        starter=starter_settings(environ),
        address=bind or API_ADDRESS,
        tokens=tokens,
        oidc_issuer=issuer.rstrip("/") if issuer else None,
        oidc_audience=audience.strip() if audience else None,
        approver_key_file=Path(key_file).expanduser() if key_file else None,
        streams_per_caller=bounds["streams_per_caller"],
        runs_per_caller=bounds["runs_per_caller"],
        downloads_per_caller=bounds["downloads_per_caller"],
        downloads_at_once=bounds["downloads_at_once"],
    )
