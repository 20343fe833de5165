"""The worker's settings: ``worker_settings()`` reads its environment into a
frozen ``WorkerSettings``, credentials first."""

import base64
import binascii
import os
import re
import socket
from collections.abc import Mapping, MutableMapping
from datetime import timedelta

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from temporalio.common import WorkerDeploymentVersion

from sandbox_agent_runtime.approvers import public_text
from sandbox_agent_runtime.model_queue import OWN, RUN
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.settings.declared import DECLARED, MOST_MODEL_CALLS_PER_SECOND, read_by
from sandbox_agent_runtime.settings.reading import (
    BadSetting,
    address,
    callback_key,
    callback_policy,
    encryption_keys,
    number,
    object_store,
    refused,
    repo_policy,
    shown,
    url,
    web_address,
)
from sandbox_agent_runtime.settings_types import DOCKER_TMP_SIZE, DockerLimits, WorkerSettings

# What Temporal accepts as a Worker Deployment's name and build id (both or
# neither): no whitespace or control characters, and no "."
# in a deployment name (the server joins the two with one).
_DEPLOYMENT_NAME = re.compile(r"[^\s.]{1,255}")
_BUILD_ID = re.compile(r"[^\s]{1,255}")

# What a host id may be (a service with a host-bound backend): it becomes
# part of a task queue's name.
_HOST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")

# Each run's container, with the docker backend (backends/docker.py): the
# variables and their defaults (settings/declared.py). Memory covers the
# workspace and /tmp too: both are in-memory file systems, /tmp of
# DOCKER_TMP_SIZE.
DOCKER_MEMORY = ("DOCKER_SANDBOX_MEMORY", str(DECLARED["DOCKER_SANDBOX_MEMORY"].default))
DOCKER_CPUS = ("DOCKER_SANDBOX_CPUS", str(DECLARED["DOCKER_SANDBOX_CPUS"].default))
DOCKER_PIDS = ("DOCKER_SANDBOX_PIDS", str(DECLARED["DOCKER_SANDBOX_PIDS"].default))
DOCKER_WORKSPACE_SIZE = (
    "DOCKER_SANDBOX_WORKSPACE_SIZE",
    str(DECLARED["DOCKER_SANDBOX_WORKSPACE_SIZE"].default),
)
DOCKER_USER = ("DOCKER_SANDBOX_USER", str(DECLARED["DOCKER_SANDBOX_USER"].default))
_SIZE = re.compile(r"([0-9]{1,7})([kmg]?)b?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_LARGEST_SIZE = 1 << 40  # 1 TiB
_USER = re.compile(r"([0-9]{1,10})(?::([0-9]{1,10}))?")
_LARGEST_ID = 2**32 - 2
_YES_NO = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def worker_variables() -> tuple[str, ...]:
    """Every variable the worker of the configured service reads itself.

    Returns:
        The declared settings it reads, then its backends' options; not its
        credentials.
    """
    from sandbox_agent_runtime.backends import backend_module, variable

    return (
        *read_by("worker"),
        *(
            variable(backend, key)
            for backend in current().backends
            for key in backend_module(backend).OPTIONS
        ),
    )


# Any one of these sets of environment variables, each set and non-empty.
Alternatives = tuple[tuple[str, ...], ...]


def required_credentials() -> list[tuple[Alternatives, str]]:
    """What the worker needs in its environment before it starts.

    The OpenAI client wants a key even for another OpenAI-compatible endpoint
    (OPENAI_BASE_URL); for one that ignores keys, any value will do.

    Returns:
        The model's key, each sandbox backend's credentials and the variables
        forwarded to the agent's sandbox: each as its alternatives (sets of
        variable names, any one set enough) and where to get it.
    """
    # Imported here, not at the top: the starter need not load the sandbox
    # SDKs (seconds of start-up).
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


def lacking(
    alternatives: tuple[tuple[str, ...], ...], where: str, environ: Mapping[str, str] = os.environ
) -> str | None:
    """What one credential lacks in ``environ``: its ``alternatives`` (sets
    of variable names, any one set enough) and ``where`` to get it, in one
    phrase ("DAYTONA_API_KEY or ... (where)"), or None when a set is there.
    """
    if not alternatives or any(
        all(environ.get(n, "").strip() for n in names) for names in alternatives
    ):
        return None
    return f"{' or '.join(' with '.join(names) for names in alternatives)} ({where})"


def missing_credentials(environ: Mapping[str, str]) -> str | None:
    """The credentials the worker lacks.

    Args:
        environ: the environment to read.

    Returns:
        One line naming each missing credential and where to get it (never
        a value), or None when none is missing.
    """
    missing = [
        lack
        for alternatives, where in required_credentials()
        if (lack := lacking(alternatives, where, environ))
    ]
    if not missing:
        return None
    return f"Missing credentials: set {'; '.join(missing)}. See .env.example."


def worker_settings(environ: Mapping[str, str] = os.environ) -> WorkerSettings:
    """The worker's settings, read from the environment.

    Args:
        environ: the environment to read (the process's by default).

    Returns:
        The settings, parsed; ``BadSetting`` (one line) for the first one it
        cannot use, the missing credentials first of all.
    """
    problem = missing_credentials(environ)
    if problem:
        raise BadSetting(problem)
    service = current()
    docker = "docker" in service.backends
    idle_timeout, lifetime = session_times(environ)
    return WorkerSettings(
        runs_in_flight=number(environ, "WORKER_RUNS_IN_FLIGHT"),
        command_time_limit=number(environ, "SANDBOX_COMMAND_TIME_LIMIT_SECONDS"),
        model_activity_timeout=timedelta(seconds=number(environ, "MODEL_ACTIVITY_TIMEOUT_SECONDS")),
        health_address=address(environ, "HEALTH_BIND_ADDRESS"),
        metrics_address=address(environ, "PROMETHEUS_BIND_ADDRESS"),
        traces_endpoint=url(environ, "OTEL_EXPORTER_OTLP_ENDPOINT"),
        version=worker_version(environ),
        object_store=object_store(environ),
        keys=encryption_keys(environ),
        session_idle_timeout=idle_timeout,
        session_lifetime=lifetime,
        git_timeout=timedelta(minutes=number(environ, "GIT_TIMEOUT_MINUTES")),
        repos=repo_policy(environ),
        callbacks=callback_policy(environ),
        callback_key=callback_key(environ),
        reap_every=timedelta(seconds=number(environ, "SANDBOX_REAP_EVERY_SECONDS")),
        reap_grace=timedelta(seconds=number(environ, "SANDBOX_REAP_GRACE_SECONDS")),
        temporal_usd_per_million_actions=number(environ, "TEMPORAL_USD_PER_MILLION_ACTIONS"),
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
        stream_model_turns=stream_model_turns(environ),
        stream_batch=timedelta(milliseconds=number(environ, "STREAM_BATCH_MILLISECONDS")),
        model_calls_per_second=model_calls_per_second(environ),
        model_calls_queue=model_calls_queue(environ),
    )


def openai_api(environ: Mapping[str, str]) -> str:
    """``OPENAI_API``: the model endpoint's API."""
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
    """Have LiteLLM, if the worker imports it, read its
    table of model prices from its own package rather than fetch it from the
    internet when it is imported: ``LITELLM_LOCAL_MODEL_COST_MAP``, unless
    the environment sets it. Called at the worker's start, before any import
    of LiteLLM."""
    environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def model_calls_per_second(environ: Mapping[str, str]) -> float | None:
    """``MODEL_CALLS_PER_SECOND``: the fleet's rate of model calls (a number
    of calls a second, fractions allowed: 0.5 is one every two seconds), or
    None when it is unset."""
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


def model_calls_queue(environ: Mapping[str, str]) -> str:
    """``MODEL_CALLS_QUEUE``: "own" for the model calls' own task queue,
    "run" for the run's; unset, "own" when the fleet has a rate."""
    value = environ.get("MODEL_CALLS_QUEUE")
    rate = model_calls_per_second(environ) is not None
    if value is None:
        return OWN if rate else RUN
    allowed = (
        "own (model calls on their own task queue, where a rate holds) or run (with the run's "
        "own work), or leave it unset"
    )
    if value.strip() not in (OWN, RUN):
        raise refused("MODEL_CALLS_QUEUE", value, allowed)
    if value.strip() == RUN and rate:
        raise refused(
            "MODEL_CALLS_QUEUE",
            value,
            "own, or leave it unset",
            "MODEL_CALLS_PER_SECOND is set, and the fleet's rate holds on the model calls' own "
            "queue alone",
        )
    return value.strip()


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


def session_times(environ: Mapping[str, str]) -> tuple[timedelta, timedelta]:
    """``SESSION_IDLE_TIMEOUT`` and ``SESSION_LIFETIME``, whole seconds each.
    The lifetime may not be shorter than the idle timeout: a conversation
    releases its sandbox while it waits, never after it has ended. Of the two,
    the one refused is the one set (the lifetime, when both are)."""
    idle = number(environ, "SESSION_IDLE_TIMEOUT")
    lifetime = number(environ, "SESSION_LIFETIME")
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


def stream_model_turns(environ: Mapping[str, str]) -> bool:
    """Whether new runs stream the model's text (``STREAM_MODEL_TURNS``)."""
    value = environ.get("STREAM_MODEL_TURNS")
    if value is None:
        return True
    if value.strip().lower() not in _YES_NO:
        raise refused(
            "STREAM_MODEL_TURNS",
            value,
            "true to stream the model's text as it is written, false for whole turns (or "
            "leave it unset for true)",
        )
    return _YES_NO[value.strip().lower()]


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
    """The bounds on each sandbox container.

    Args:
        environ: the environment to read (``DOCKER_SANDBOX_*``).

    Returns:
        The limits, each its default when unset; ``BadSetting`` for one out
        of its bounds, or a workspace that leaves no room in the memory.
    """
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
    pids = number(environ, DOCKER_PIDS[0])
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
