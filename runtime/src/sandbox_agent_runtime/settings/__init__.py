"""Every setting the runtime's commands read from the environment, once, at start.

Each setting is declared once (``declared.py``: name, kind, bounds, default,
help, which command reads it and when); each command's reader is apart
(``worker.py``, ``starter.py``, ``codec_server.py``, ``api.py``), and the
common kinds are read in ``reading.py``. A value a command cannot use stops
it before it does anything else, with one line (``BadSetting``) naming the
variable, the value and what is allowed. Unset, a variable takes its
default; set to nothing (``NAME=``) it is refused like any other bad value.

Not here: the ``TEMPORAL_*`` connection settings, which Temporal's own
envconfig reads, and the variables each SDK reads for itself
(``OPENAI_BASE_URL``, ``DOCKER_HOST``, the AWS credentials). The reference
page, ``docs/settings.md``, is made from the declarations
(``python -m sandbox_agent_runtime.settings.reference``).
"""

from sandbox_agent_runtime.settings.api import (
    API_ADDRESS,
    API_BOUNDS,
    API_VARIABLES,
    CALLER_NAMES,
    ApiSettings,
    api_settings,
    api_tokens,
    caller_name,
)
from sandbox_agent_runtime.settings.codec_server import (
    CODEC_SERVER_ADDRESS,
    CODEC_SERVER_ORIGINS,
    CODEC_SERVER_VARIABLES,
    CodecServerSettings,
    allowed_origins,
    codec_server_settings,
    loopback,
)
from sandbox_agent_runtime.settings.declared import (
    COMMAND_TIME_LIMIT,
    DECLARED,
    LONGEST_COMMAND_TIME_LIMIT,
    LONGEST_GIT_TIMEOUT,
    LONGEST_SESSION,
    MOST_MODEL_CALLS_PER_SECOND,
    MOST_RUNS_IN_FLIGHT,
    RUNS_IN_FLIGHT,
    SETTINGS,
    Setting,
    longest_model_timeout,
)
from sandbox_agent_runtime.settings.reading import (
    REPO_VARIABLES,
    BadSetting,
    address,
    callback_key,
    callback_policy,
    encryption_keys,
    object_store,
    refused,
    repo_policy,
    shown,
    web_address,
    whole_number,
)
from sandbox_agent_runtime.settings.starter import (
    StarterSettings,
    starter_settings,
    starter_variables,
)
from sandbox_agent_runtime.settings.worker import (
    DOCKER_CPUS,
    DOCKER_MEMORY,
    DOCKER_PIDS,
    DOCKER_USER,
    DOCKER_WORKSPACE_SIZE,
    Alternatives,
    approvers,
    backend_options,
    docker_engine_shared,
    docker_limits,
    host_id,
    keep_litellm_offline,
    missing_credentials,
    model_calls_per_second,
    model_calls_queue,
    openai_api,
    required_credentials,
    session_times,
    worker_settings,
    worker_variables,
    worker_version,
)
from sandbox_agent_runtime.settings_types import DOCKER_TMP_SIZE, DockerLimits, WorkerSettings

__all__ = [
    "API_ADDRESS",
    "API_BOUNDS",
    "API_VARIABLES",
    "CALLER_NAMES",
    "CODEC_SERVER_ADDRESS",
    "CODEC_SERVER_ORIGINS",
    "CODEC_SERVER_VARIABLES",
    "COMMAND_TIME_LIMIT",
    "DECLARED",
    "DOCKER_CPUS",
    "DOCKER_MEMORY",
    "DOCKER_PIDS",
    "DOCKER_TMP_SIZE",
    "DOCKER_USER",
    "DOCKER_WORKSPACE_SIZE",
    "LONGEST_COMMAND_TIME_LIMIT",
    "LONGEST_GIT_TIMEOUT",
    "LONGEST_SESSION",
    "MOST_MODEL_CALLS_PER_SECOND",
    "MOST_RUNS_IN_FLIGHT",
    "REPO_VARIABLES",
    "RUNS_IN_FLIGHT",
    "SETTINGS",
    "Alternatives",
    "ApiSettings",
    "BadSetting",
    "CodecServerSettings",
    "DockerLimits",
    "Setting",
    "StarterSettings",
    "WorkerSettings",
    "address",
    "allowed_origins",
    "api_settings",
    "api_tokens",
    "approvers",
    "backend_options",
    "callback_key",
    "callback_policy",
    "caller_name",
    "codec_server_settings",
    "docker_engine_shared",
    "docker_limits",
    "encryption_keys",
    "host_id",
    "keep_litellm_offline",
    "longest_model_timeout",
    "loopback",
    "missing_credentials",
    "model_calls_per_second",
    "model_calls_queue",
    "object_store",
    "openai_api",
    "refused",
    "repo_policy",
    "required_credentials",
    "session_times",
    "shown",
    "starter_settings",
    "starter_variables",
    "web_address",
    "whole_number",
    "worker_settings",
    "worker_variables",
    "worker_version",
]
