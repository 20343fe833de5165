"""Every combination the template's tests render: each backend, and every
value of every other choice at least once. Add a row when you add a choice."""

import pytest

COMBINATIONS = [
    pytest.param({"sandbox_backend": "local"}, id="local-defaults"),
    pytest.param({"sandbox_backend": "daytona"}, id="daytona-defaults"),
    pytest.param({"sandbox_backend": "e2b"}, id="e2b-defaults"),
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
            "model_activity_timeout_seconds": 20,
            "workflow_execution_timeout_seconds": 600,
            "author_name": "Research Platform Team",
            "license": "Apache-2.0",
        },
        id="local-custom-names-py312",
    ),
    pytest.param(
        {
            "sandbox_backend": "daytona",
            "project_name": "Data Cleaner",
            "sandbox_provider_name": "daytona-eu_1",
            "python_version": "3.13",
            "model_name": "gpt-5.2",
            "license": "none",
        },
        id="daytona-custom-provider-py313",
    ),
]
