"""Every combination the template's tests render: each backend, and every
value of every other choice at least once. Add a row when you add a choice.

Some list answers are spelled as a hurried person types them (blank items,
stray commas and spaces): they must render what the tidy spelling renders."""

import pytest

from local_extensions import BACKENDS

COMBINATIONS = [
    *(pytest.param({"sandbox_backend": backend}, id=f"{backend}-defaults") for backend in BACKENDS),
    pytest.param(
        {
            "sandbox_backend": "local",
            "project_name": "Research Bot",
            "package_name": "research",
            "sandbox_provider_name": "workstation",
            "task_queue": "agents.research-v2",
            "python_version": "3.12",
            "max_turns": 5,
            "sandbox_activity_timeout_seconds": 45,
            "workflow_execution_timeout_seconds": 600,
            "author_name": "Research Platform Team",
            "license": "Apache-2.0",
            "approval": "commands",
            "approval_timeout_seconds": 300,
            # A list typed in a hurry: one backend between blanks; and a blank
            # list: no secret.
            "additional_sandbox_backends": " daytona , ",
            "sandbox_secret_env_vars": " ",
        },
        id="local-custom-names-plus-daytona-py312",
    ),
    pytest.param(
        {
            "sandbox_backend": "daytona",
            "project_name": "Data Cleaner",
            "sandbox_provider_name": "daytona-eu_1",
            "python_version": "3.13",
            "model_name": "gpt-5.2",
            "license": "none",
            # A blank list: no additional backend.
            "additional_sandbox_backends": ",",
            "sandbox_secret_env_vars": "GITHUB_TOKEN,,",
        },
        id="daytona-custom-provider-one-secret-py313",
    ),
    pytest.param(
        {
            "sandbox_backend": "daytona",
            "additional_sandbox_backends": "local, e2b",
            "sandbox_secret_env_vars": "GITHUB_TOKEN, NPM_TOKEN",
            "approval": "commands",
        },
        id="daytona-plus-local-and-e2b-two-secrets",
    ),
    pytest.param(
        {
            "sandbox_backend": "e2b",
            "additional_sandbox_backends": "docker",
            "approval": "commands_and_writes",
            "approval_timeout_seconds": 120,
            "workflow_execution_timeout_seconds": 600,
        },
        id="e2b-plus-docker-short-runs-writes-approved",
    ),
    pytest.param(
        {
            "sandbox_backend": "runloop",
            "additional_sandbox_backends": "modal",
            "workflow_execution_timeout_seconds": 7200,
        },
        id="runloop-plus-modal-two-hour-runs",
    ),
]
