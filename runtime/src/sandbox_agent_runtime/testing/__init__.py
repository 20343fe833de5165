"""Helpers for a service's tests: its real worker with a scripted model, a
Temporal dev server, the commands as processes, faults, and what a run's
history records (sandbox-agent-runtime[testing]).

This module is, with ``sandbox_agent_runtime``, the runtime's public API:
the names in ``__all__``; its submodules are private. A project's tests
load the pytest plugin and register the project once, in their
conftest.py, before any test module is imported::

    from sandbox_agent_runtime.testing import PYTEST_PLUGIN, Project, use

    pytest_plugins = [PYTEST_PLUGIN]

    def support_agent() -> Project:
        from support_agent.workflow import SandboxAgentWorkflow
        ...
        return Project(root=..., package="support_agent", workflow=SandboxAgentWorkflow,
                       tool_activities=ACTIVITIES, model=MODEL)

    use(support_agent)

What the helpers decide about the service (its providers, approvals,
secrets) they read from the configured ``Service``
(``sandbox_agent_runtime.current()``); what only the project has (its
workflow type, tools, model, directory) from this registration. Importing
this module imports neither Temporal nor the Agents SDK: each name is
imported when it is first used.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import timedelta
    from pathlib import Path

    from sandbox_agent_runtime.affinity import host_queue
    from sandbox_agent_runtime.api.app import create_app
    from sandbox_agent_runtime.archives import decoded as decoded_archive
    from sandbox_agent_runtime.archives import inputs_of
    from sandbox_agent_runtime.backends import docker as docker_backend
    from sandbox_agent_runtime.backends import sandbox_backends
    from sandbox_agent_runtime.display import without_credentials
    from sandbox_agent_runtime.evals.dataset import load as load_dataset
    from sandbox_agent_runtime.histories import record as record_histories
    from sandbox_agent_runtime.model_queue import model_task_queue
    from sandbox_agent_runtime.settings import (
        BadSetting,
        StarterSettings,
        WorkerSettings,
        api_settings,
        api_tokens,
        docker_limits,
        encryption_keys,
        longest_model_timeout,
        missing_credentials,
        required_credentials,
        worker_settings,
        worker_variables,
    )
    from sandbox_agent_runtime.shared import sandbox_operation, step_name, tool_of
    from sandbox_agent_runtime.starter.start import run as starter_run
    from sandbox_agent_runtime.testing.conversing import Conversing, answered, conversation, until
    from sandbox_agent_runtime.testing.deploy import (
        container_port,
        documents,
        pod,
        probe_paths,
        secret_keys,
        worker_container,
    )
    from sandbox_agent_runtime.testing.deploy import settings as configmap_settings
    from sandbox_agent_runtime.testing.deploy import the as manifest_object
    from sandbox_agent_runtime.testing.eval_model import EvalModel
    from sandbox_agent_runtime.testing.faults import figures
    from sandbox_agent_runtime.testing.handovers import sandbox_workers, stalled_on, workspaces_used
    from sandbox_agent_runtime.testing.long_workflow import (
        BudgetedSandboxAgentWorkflow,
        BuggyWorkflow,
        ImpatientSandboxAgentWorkflow,
        LongSandboxAgentWorkflow,
        NextBuildWorkflow,
    )
    from sandbox_agent_runtime.testing.mcp_server import notebook_mcp_server
    from sandbox_agent_runtime.testing.other_agents import workflow_with_agent
    from sandbox_agent_runtime.testing.processes import (
        on_host,
        private_mounts,
        service,
        service_environment,
    )
    from sandbox_agent_runtime.testing.registration import Project, project, project_service, use
    from sandbox_agent_runtime.testing.scripted_model import (
        Call,
        ScriptedAgents,
        ScriptedModel,
        steps_done,
        tool_outputs,
    )
    from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
    from sandbox_agent_runtime.testing.support import (
        CompletedRun,
        activities,
        activities_in,
        answering_window,
        approvals_in,
        approving_everything,
        assert_a_rejection_fails_the_run_at_once,
        assert_scheduled_not_to_retry,
        closed_address,
        failure_of,
        free_address,
        free_port,
        metered_client,
        openai_model,
        provider_of,
        refusal_without_credentials,
        running_worker,
        runs_of_chain,
        sandboxes_for_tests,
        settings_with,
        start_in,
        use_options_of,
        with_plugins,
    )
    from sandbox_agent_runtime.testing.workspace_agents import PricedAgentWorkflow

# The constants, as the type checker and the reference know them.

DROPPED_RUNS_CLOSED: str
"""A ``filterwarnings`` entry for the warning Python gives when the garbage
collector closes the coroutines of a run dropped on purpose."""

STEPS: list[str]
"""Commands a scripted model runs one after another, each adding a line to
``steps.txt`` (a run long enough to be moved between workers)."""

ALL_STEPS: str
"""What ``steps.txt`` holds once every one of ``STEPS`` ran."""

SETTINGS: WorkerSettings
"""The worker's settings as the tests give the worker: the defaults, with
the project's sandboxes as the tests build them."""

STARTER_SETTINGS: StarterSettings
"""The starter's settings as the tests give the starter (``starter_run``)."""

CREDENTIALS: dict[str, str]
"""Stand-in credentials for each variable the service's backends and model
require, so that a worker process starts in a test."""

APPROVER_ENVIRONMENT: dict[str, str]
"""The variables with which a worker process and a starter process approve
as the tests' stand-in approver (``APPROVERS``, ``APPROVER_KEY_FILE``)."""

WORKER: list[str]
"""The project's installed worker command, for ``service``."""

WORKER_MODULE: list[str]
"""The project's worker run as ``python -m <package>.worker``, for ``service``."""

STARTER: list[str]
"""The project's installed starter command, for ``service``."""

CODEC_SERVER: list[str]
"""The project's installed codec server command, for ``service``."""

SCRIPTS: Path
"""Where ``uv sync`` installed the project's console scripts."""

HOSTS: tuple[str, ...]
"""The hosts of the tests that run two worker processes as two hosts (``on_host``)."""

DEPLOY_BASE: Path
"""The project's ``deploy/k8s`` directory."""

DEPLOY_WORKER: Path
"""The worker's manifest in ``deploy/k8s``: a StatefulSet for a service whose
sandboxes may live on a worker's host, a Deployment otherwise."""

DEPLOY_WORKER_CONTROLLER: Path
"""The worker controller's manifests (``deploy/worker-controller``), of a
service whose sandboxes are not bound to a host."""

API_VARIABLES: tuple[str, ...]
"""Every variable the API reads itself, beside the starter's."""

LONGEST_GIT_TIMEOUT: int
"""The most ``GIT_TIMEOUT_MINUTES`` may be: a day, in minutes."""

LONGEST_SESSION: int
"""The most ``SESSION_IDLE_TIMEOUT`` and ``SESSION_LIFETIME`` may be: a year, in seconds."""

RUNS_IN_FLIGHT: int
"""How many runs one worker keeps in flight unless ``WORKER_RUNS_IN_FLIGHT`` says."""

GIT_TIMEOUT: timedelta
"""The longest one git process of the worker runs unless ``GIT_TIMEOUT_MINUTES`` says."""

SESSION_IDLE_TIMEOUT: timedelta
"""How long a conversation keeps its sandbox after an answer unless
``SESSION_IDLE_TIMEOUT`` says."""

SESSION_LIFETIME: timedelta
"""How long a conversation waits for follow-ups in all unless
``SESSION_LIFETIME`` says."""

PLACE: str
"""The sandbox operation that places a run's inputs (``<provider>-sandbox_workspace_place``)."""

COLLECT: str
"""The sandbox operation that collects a run's outputs."""

SNAPSHOT: str
"""The sandbox operation that snapshots a conversation's workspace."""

RESTORE: str
"""The sandbox operation that restores a conversation's workspace into a fresh sandbox."""

LOCAL_ACTIVITY_MARKER: str
"""The marker in which Temporal records a local activity's result (the
choice of a sandbox's host) in a run's history."""

SHUTDOWN_GRACE: timedelta
"""How long a worker asked to stop lets its activities finish."""

ENCODING: bytes
"""The encoding of a payload the service's codec encrypted."""

SANDBOX_OPERATIONS: str
"""The metric counting sandbox operations (labels: operation, outcome, and host
for a service with a host-bound backend)."""

TOOL_CALLS: str
"""The metric counting calls of the agent's own tools (labels: tool, outcome)."""

HOSTS_GONE: str
"""The metric counting the times a run took its sandbox's host for gone."""

SANDBOXES_REAPED: str
"""The metric counting the sandboxes of closed runs the reaper removed (label: provider)."""

APPROVALS: str
"""The metric counting requests for approval (label: decision)."""

APPROVAL_WAIT: str
"""The histogram of how long each request for approval waited for its decision, in ms."""

PYTEST_PLUGIN = "sandbox_agent_runtime.testing.plugin"
"""The pytest plugin of a service's tests (``pytest_plugins = [PYTEST_PLUGIN]``
in its conftest.py): a Temporal dev server for the session, one finished
run, the bounds on slow tests."""

# Each public name, and where it lives: "module" (the same name there),
# "module:name", or "module:" (the module itself). The module imports only
# when the name is first used.
_PUBLIC = {
    # The project the helpers serve.
    "Project": "testing.registration",
    "use": "testing.registration",
    "project": "testing.registration",
    "project_service": "testing.registration",
    # Its worker with a scripted model, and the runs it makes.
    "ScriptedModel": "testing.scripted_model",
    "ScriptedAgents": "testing.scripted_model",
    "workflow_with_agent": "testing.other_agents",
    "Call": "testing.scripted_model",
    "notebook_mcp_server": "testing.mcp_server",
    "steps_done": "testing.scripted_model",
    "tool_outputs": "testing.scripted_model",
    "EvalModel": "testing.eval_model",
    "scripted_openai_server": "testing.scripted_openai",
    "openai_model": "testing.support",
    "running_worker": "testing.support",
    "with_plugins": "testing.support",
    "sandboxes_for_tests": "testing.support",
    "metered_client": "testing.support",
    "approving_everything": "testing.support",
    "start_in": "testing.support",
    "provider_of": "testing.support",
    "CompletedRun": "testing.support",
    "activities": "testing.support",
    "activities_in": "testing.support",
    "approvals_in": "testing.support",
    "runs_of_chain": "testing.support",
    "failure_of": "testing.support",
    "DROPPED_RUNS_CLOSED": "testing.support",
    "assert_a_rejection_fails_the_run_at_once": "testing.support",
    "assert_scheduled_not_to_retry": "testing.support",
    "answering_window": "testing.support",
    # Conversations, several hosts, faults, workflow types made to fail or last.
    "Conversing": "testing.conversing",
    "answered": "testing.conversing",
    "conversation": "testing.conversing",
    "until": "testing.conversing",
    "STEPS": "testing.handovers",
    "ALL_STEPS": "testing.handovers",
    "sandbox_workers": "testing.handovers",
    "stalled_on": "testing.handovers",
    "workspaces_used": "testing.handovers",
    "figures": "testing.faults",
    "LongSandboxAgentWorkflow": "testing.long_workflow",
    "ImpatientSandboxAgentWorkflow": "testing.long_workflow",
    "BudgetedSandboxAgentWorkflow": "testing.long_workflow",
    "BuggyWorkflow": "testing.long_workflow",
    "NextBuildWorkflow": "testing.long_workflow",
    "PricedAgentWorkflow": "testing.workspace_agents",
    # The service's settings as the tests give them.
    "SETTINGS": "testing.support",
    "STARTER_SETTINGS": "testing.support",
    "CREDENTIALS": "testing.support",
    "settings_with": "testing.support",
    "use_options_of": "testing.support",
    "refusal_without_credentials": "testing.support",
    "APPROVER_ENVIRONMENT": "testing.approver:ENVIRONMENT",
    "closed_address": "testing.support",
    "free_address": "testing.support",
    "free_port": "testing.support",
    # The commands as processes, on one host or several.
    "service": "testing.processes",
    "service_environment": "testing.processes",
    "WORKER": "testing.processes",
    "WORKER_MODULE": "testing.processes",
    "STARTER": "testing.processes",
    "CODEC_SERVER": "testing.processes",
    "SCRIPTS": "testing.processes",
    "HOSTS": "testing.processes",
    "on_host": "testing.processes",
    "private_mounts": "testing.processes",
    # The manifests of deploy/.
    "DEPLOY_BASE": "testing.deploy:BASE",
    "DEPLOY_WORKER": "testing.deploy:WORKER",
    "DEPLOY_WORKER_CONTROLLER": "testing.deploy:WORKER_CONTROLLER",
    "documents": "testing.deploy",
    "manifest_object": "testing.deploy:the",
    "configmap_settings": "testing.deploy:settings",
    "pod": "testing.deploy",
    "worker_container": "testing.deploy",
    "container_port": "testing.deploy",
    "secret_keys": "testing.deploy",
    "probe_paths": "testing.deploy",
    # What the runtime does, as the tests check it: settings, steps, metrics, payloads.
    "BadSetting": "settings",
    "WorkerSettings": "settings",
    "StarterSettings": "settings",
    "worker_settings": "settings",
    "worker_variables": "settings",
    "API_VARIABLES": "settings",
    "api_settings": "settings",
    "api_tokens": "settings",
    "required_credentials": "settings",
    "missing_credentials": "settings",
    "docker_limits": "settings",
    "encryption_keys": "settings",
    "longest_model_timeout": "settings",
    "LONGEST_GIT_TIMEOUT": "settings",
    "LONGEST_SESSION": "settings",
    "RUNS_IN_FLIGHT": "settings",
    "GIT_TIMEOUT": "shared",
    "SESSION_IDLE_TIMEOUT": "shared",
    "SESSION_LIFETIME": "shared",
    "PLACE": "shared",
    "COLLECT": "shared",
    "SNAPSHOT": "shared",
    "RESTORE": "shared",
    "sandbox_operation": "shared",
    "step_name": "shared",
    "tool_of": "shared",
    "LOCAL_ACTIVITY_MARKER": "client.steps",
    "starter_run": "starter.start:run",
    "SHUTDOWN_GRACE": "worker",
    "sandbox_backends": "backends",
    "docker_backend": "backends.docker:",
    "host_queue": "affinity",
    "model_task_queue": "model_queue",
    "inputs_of": "archives",
    "decoded_archive": "archives:decoded",
    "ENCODING": "encryption",
    "without_credentials": "display",
    "create_app": "api.app",
    "load_dataset": "evals.dataset:load",
    "record_histories": "histories:record",
    "SANDBOX_OPERATIONS": "observability",
    "TOOL_CALLS": "observability",
    "HOSTS_GONE": "observability",
    "SANDBOXES_REAPED": "observability",
    "APPROVALS": "observability",
    "APPROVAL_WAIT": "observability",
}

__all__ = [
    "ALL_STEPS",
    "API_VARIABLES",
    "APPROVALS",
    "APPROVAL_WAIT",
    "APPROVER_ENVIRONMENT",
    "BadSetting",
    "BudgetedSandboxAgentWorkflow",
    "BuggyWorkflow",
    "CODEC_SERVER",
    "COLLECT",
    "CREDENTIALS",
    "Call",
    "CompletedRun",
    "Conversing",
    "DEPLOY_BASE",
    "DEPLOY_WORKER",
    "DEPLOY_WORKER_CONTROLLER",
    "DROPPED_RUNS_CLOSED",
    "ENCODING",
    "EvalModel",
    "GIT_TIMEOUT",
    "HOSTS",
    "HOSTS_GONE",
    "ImpatientSandboxAgentWorkflow",
    "LOCAL_ACTIVITY_MARKER",
    "LONGEST_GIT_TIMEOUT",
    "LONGEST_SESSION",
    "LongSandboxAgentWorkflow",
    "NextBuildWorkflow",
    "PLACE",
    "PYTEST_PLUGIN",
    "PricedAgentWorkflow",
    "Project",
    "RESTORE",
    "RUNS_IN_FLIGHT",
    "SANDBOXES_REAPED",
    "SANDBOX_OPERATIONS",
    "SCRIPTS",
    "SESSION_IDLE_TIMEOUT",
    "SESSION_LIFETIME",
    "SETTINGS",
    "SHUTDOWN_GRACE",
    "SNAPSHOT",
    "STARTER",
    "STARTER_SETTINGS",
    "STEPS",
    "ScriptedAgents",
    "ScriptedModel",
    "StarterSettings",
    "TOOL_CALLS",
    "WORKER",
    "WORKER_MODULE",
    "WorkerSettings",
    "activities",
    "activities_in",
    "answered",
    "answering_window",
    "api_settings",
    "api_tokens",
    "approvals_in",
    "approving_everything",
    "assert_a_rejection_fails_the_run_at_once",
    "assert_scheduled_not_to_retry",
    "closed_address",
    "configmap_settings",
    "container_port",
    "conversation",
    "create_app",
    "decoded_archive",
    "docker_backend",
    "docker_limits",
    "documents",
    "encryption_keys",
    "failure_of",
    "figures",
    "free_address",
    "free_port",
    "host_queue",
    "inputs_of",
    "load_dataset",
    "longest_model_timeout",
    "manifest_object",
    "metered_client",
    "missing_credentials",
    "model_task_queue",
    "notebook_mcp_server",
    "on_host",
    "openai_model",
    "pod",
    "private_mounts",
    "probe_paths",
    "project",
    "project_service",
    "provider_of",
    "record_histories",
    "refusal_without_credentials",
    "required_credentials",
    "running_worker",
    "runs_of_chain",
    "sandbox_backends",
    "sandbox_operation",
    "sandbox_workers",
    "sandboxes_for_tests",
    "scripted_openai_server",
    "secret_keys",
    "service",
    "service_environment",
    "settings_with",
    "stalled_on",
    "start_in",
    "starter_run",
    "step_name",
    "steps_done",
    "tool_of",
    "tool_outputs",
    "until",
    "use",
    "use_options_of",
    "with_plugins",
    "without_credentials",
    "worker_container",
    "worker_settings",
    "worker_variables",
    "workflow_with_agent",
    "workspaces_used",
]


def __getattr__(name: str) -> object:
    """A public name, imported at its first use."""
    where = _PUBLIC.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, colon, attribute = where.partition(":")
    module = import_module(f"sandbox_agent_runtime.{module_name}")
    if colon and not attribute:
        return module
    return getattr(module, attribute or name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
