"""The SDKs' private names the service builds on are where it expects them.

The sandbox activities' client and session, and the model activity's input,
are private to temporalio-openai-agents; the chain's sandbox client overrides
private methods of the Agents SDK's{% if "daytona" in cookiecutter | backends %}, and so does the Daytona client that labels
each sandbox{% endif %}. pyproject.toml bounds both SDKs to the
releases these were checked with; the scheduled CI job (newest-sdks, in
.github/workflows/ci.yml) installs the newest releases past those bounds and
runs this module first: a failure names what moved and what uses it. This
module imports no service code, so it runs even when the service no longer
imports.
"""

import importlib
import inspect
from importlib.metadata import version

import pytest

# (module, name, what in the service uses it)
PRIVATE_NAMES = [
    (
        "temporalio.openai_agents.sandbox._temporal_sandbox_client",
        "TemporalSandboxClient",
        "chain.LastingSandboxClient extends it",
    ),
    (
        "temporalio.openai_agents.sandbox._temporal_sandbox_session",
        "TemporalSandboxSession",
        "chain.LastingSandboxClient keeps the session's activities",
    ),
    (
        "temporalio.openai_agents._invoke_model_activity",
        "ActivityModelInput",
        "payloads.AgentPayloadConverter reads model inputs as it",
    ),
    (
        "temporalio.openai_agents.sandbox._temporal_activity_models",
        "_HasState",
        "workspace.PlaceArgs and CollectArgs carry a session's state as it",
    ),
    (
        "temporalio.openai_agents._temporal_worker_env_ref",
        "AllowAllWorkerEnvVars",
        "workspace.WorkspaceProvider's activities take it",
    ),
{%- if cookiecutter.approval == "commands_and_writes" %}
    (
        "agents.sandbox.capabilities.tools.apply_patch_tool",
        "_parse_custom_tool_input",
        "approvals.shown_patch shows a patch as the SDK's own parser reads it",
    ),
{%- endif %}
]

# (module, class, private method, its parameters, what in the service overrides or calls it)
PRIVATE_METHODS = [
    (
        "temporalio.openai_agents.sandbox._sandbox_client_provider",
        "SandboxClientProvider",
        "_get_activities",
        ["self", "resolvable_worker_env_vars"],
        "workspace.WorkspaceProvider adds its two operations to them",
    ),
    (
        "temporalio.openai_agents.sandbox._sandbox_client_provider",
        "SandboxClientProvider",
        "_session",
        ["self", "args"],
        "workspace.WorkspaceProvider's operations reach the session through it",
    ),
    (
        "agents.sandbox.session.sandbox_client",
        "BaseSandboxClient",
        "_wrap_session",
        ["self", "inner", "instrumentation"],
        "chain.LastingSandboxClient overrides it",
    ),
    (
        "agents.sandbox.session.sandbox_client",
        "BaseSandboxClient",
        "_resolve_dependencies",
        ["self"],
        "chain.LastingSandboxClient calls it",
    ),
{%- if "daytona" in cookiecutter | backends %}
    (
        "agents.extensions.sandbox.daytona.sandbox",
        "DaytonaSandboxClient",
        "_build_create_params",
        [
            "self",
            "sandbox_snapshot_name",
            "image",
            "env_vars",
            "manifest",
            "name",
            "resources",
            "auto_stop_interval",
        ],
        "backends.daytona.LabelledDaytonaSandboxClient overrides it to label each sandbox with its run",
    ),
{%- endif %}
]


def installed() -> str:
    return ", ".join(
        f"{name} {version(name)}"
        for name in ("temporalio", "temporalio-openai-agents", "openai-agents")
    )


@pytest.mark.parametrize(
    ("module", "name", "used_by"), PRIVATE_NAMES, ids=[name for _, name, _ in PRIVATE_NAMES]
)
def test_a_private_name_the_service_imports_is_there(module: str, name: str, used_by: str) -> None:
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        pytest.fail(f"{module}.{name} moved ({installed()}): {used_by}. {type(e).__name__}: {e}")
    assert inspect.isclass(found) or inspect.isfunction(found), (
        f"{module}.{name} is no longer a class or a function ({installed()})"
    )


@pytest.mark.parametrize(
    ("module", "owner", "method", "parameters", "used_by"),
    PRIVATE_METHODS,
    ids=[method for _, _, method, _, _ in PRIVATE_METHODS],
)
def test_a_private_method_the_service_overrides_keeps_its_signature(
    module: str, owner: str, method: str, parameters: list[str], used_by: str
) -> None:
    where = f"{module}.{owner}.{method}"
    found = getattr(getattr(importlib.import_module(module), owner), method, None)
    if found is None:
        pytest.fail(f"{where} is gone ({installed()}): {used_by}.")
    assert list(inspect.signature(found).parameters) == parameters, (
        f"{where} changed its parameters ({installed()}): {used_by}."
    )
