"""Bad answers stop generation with one clear line and leave nothing behind."""

import pytest

BAD_INPUTS = [
    pytest.param({"project_slug": "My Agent"}, "project_slug='My Agent'", id="slug-with-space"),
    pytest.param({"project_slug": "-agent"}, "project_slug='-agent'", id="slug-leading-dash"),
    pytest.param({"package_name": "my-agent"}, "package_name='my-agent'", id="package-with-dash"),
    pytest.param({"package_name": "class"}, "package_name='class'", id="package-keyword"),
    pytest.param({"package_name": "json"}, "package_name='json'", id="package-shadows-stdlib"),
    pytest.param({"package_name": "agents"}, "package_name='agents'", id="package-shadows-sdk"),
    pytest.param(
        {"sandbox_provider_name": "my sandbox"}, "sandbox_provider_name='my sandbox'", id="provider-space"
    ),
    pytest.param({"sandbox_provider_name": "Local"}, "sandbox_provider_name='Local'", id="provider-uppercase"),
    pytest.param({"sandbox_provider_name": "a.b"}, "sandbox_provider_name='a.b'", id="provider-dot"),
    pytest.param({"sandbox_provider_name": "x" * 41}, "sandbox_provider_name='xxxx", id="provider-too-long"),
    pytest.param({"task_queue": "my queue"}, "task_queue='my queue'", id="queue-space"),
    pytest.param(
        {"sandbox_activity_timeout_seconds": "0"},
        "sandbox_activity_timeout_seconds='0'",
        id="sandbox-timeout-zero",
    ),
    pytest.param(
        {"sandbox_activity_timeout_seconds": "2.5"},
        "sandbox_activity_timeout_seconds='2.5'",
        id="sandbox-timeout-fraction",
    ),
    pytest.param(
        {"model_activity_timeout_seconds": "-5"}, "model_activity_timeout_seconds='-5'", id="model-timeout-negative"
    ),
    pytest.param(
        {"model_activity_timeout_seconds": "9999"},
        "model_activity_timeout_seconds='9999'",
        id="model-timeout-too-long",
    ),
    pytest.param(
        {"workflow_execution_timeout_seconds": "30", "sandbox_activity_timeout_seconds": "60"},
        "workflow_execution_timeout_seconds='30'",
        id="workflow-shorter-than-activity",
    ),
    pytest.param({"max_turns": "many"}, "max_turns='many'", id="turns-not-a-number"),
    pytest.param({"model_name": "gpt 5"}, "model_name='gpt 5'", id="model-with-space"),
    pytest.param({"project_name": "   ", "project_slug": "agent"}, "project_name='   '", id="empty-name"),
    pytest.param(
        {"sandbox_backend": "e2b", "package_name": "e2b"}, "package_name='e2b'", id="package-shadows-backend-sdk"
    ),
    pytest.param(
        {"additional_sandbox_backends": "modal"}, "additional_sandbox_backends='modal'", id="extra-backend-unknown"
    ),
    pytest.param(
        {"sandbox_backend": "local", "additional_sandbox_backends": "local"},
        "'local' is already the primary sandbox_backend",
        id="extra-backend-is-primary",
    ),
    pytest.param(
        {"additional_sandbox_backends": "e2b, e2b"}, "additional_sandbox_backends='e2b, e2b'", id="extra-backend-twice"
    ),
    pytest.param(
        {"additional_sandbox_backends": " e2b,,e2b "},
        "additional_sandbox_backends=' e2b,,e2b ' is not allowed: name each backend once",
        id="extra-backend-twice-among-blanks",
    ),
    pytest.param(
        {"additional_sandbox_backends": "daytona e2b"},
        "'daytona e2b' is not a backend",
        id="extra-backends-without-comma",
    ),
    pytest.param(
        {"additional_sandbox_backends": "E2B"}, "additional_sandbox_backends='E2B'", id="extra-backend-uppercase"
    ),
    pytest.param(
        {"sandbox_backend": "daytona", "sandbox_provider_name": "local", "additional_sandbox_backends": "local"},
        "'local' is already the sandbox_provider_name",
        id="extra-backend-name-taken",
    ),
    pytest.param(
        {"sandbox_backend": "daytona", "daytona_auto_stop_interval_minutes": "0"},
        "daytona_auto_stop_interval_minutes='0'",
        id="daytona-never-stops",
    ),
    pytest.param(
        {"sandbox_backend": "daytona", "daytona_create_timeout_seconds": "soon"},
        "daytona_create_timeout_seconds='soon'",
        id="daytona-create-timeout-not-a-number",
    ),
    pytest.param(
        {"sandbox_backend": "daytona", "daytona_image": "my image"},
        "daytona_image='my image'",
        id="daytona-image-space",
    ),
    pytest.param(
        {"sandbox_backend": "daytona", "daytona_image": "python:3.12", "daytona_snapshot": "tools"},
        "daytona_snapshot='tools'",
        id="daytona-image-and-snapshot",
    ),
    pytest.param(
        {
            "sandbox_backend": "local",
            "additional_sandbox_backends": "daytona",
            "daytona_auto_stop_interval_minutes": "0",
        },
        "daytona_auto_stop_interval_minutes='0'",
        id="extra-daytona-options-checked",
    ),
    pytest.param(
        {"sandbox_backend": "e2b", "e2b_template": "team template"},
        "e2b_template='team template'",
        id="e2b-template-space",
    ),
    pytest.param(
        {"sandbox_backend": "e2b", "e2b_timeout_seconds": "10"}, "e2b_timeout_seconds='10'", id="e2b-lifetime-too-short"
    ),
    pytest.param(
        {"sandbox_backend": "docker", "docker_image": "python 3.12"},
        "docker_image='python 3.12'",
        id="docker-image-space",
    ),
    pytest.param({"sandbox_backend": "docker", "docker_image": ""}, "docker_image=''", id="docker-image-empty"),
    pytest.param(
        {"sandbox_backend": "e2b", "additional_sandbox_backends": "docker", "docker_image": "-latest"},
        "docker_image='-latest'",
        id="extra-docker-options-checked",
    ),
    pytest.param(
        {"sandbox_backend": "docker", "package_name": "docker"},
        "package_name='docker'",
        id="package-shadows-docker-sdk",
    ),
    pytest.param(
        {"sandbox_secret_env_vars": "github-token"}, "sandbox_secret_env_vars='github-token'", id="secret-bad-name"
    ),
    pytest.param(
        {"sandbox_secret_env_vars": "TOKEN, TOKEN"}, "sandbox_secret_env_vars='TOKEN, TOKEN'", id="secret-twice"
    ),
    pytest.param(
        {"sandbox_secret_env_vars": "GITHUB_TOKEN NPM_TOKEN"},
        "'GITHUB_TOKEN NPM_TOKEN' is not an environment variable name",
        id="secrets-without-comma",
    ),
    pytest.param({"author_name": " "}, "author_name=' '", id="empty-author"),
    pytest.param({"author_name": "Acme\nInc"}, "author_name='Acme\\nInc'", id="author-two-lines"),
]


@pytest.mark.parametrize(("answers", "message"), BAD_INPUTS)
def test_bad_answer_is_rejected_with_one_clear_line(cookies, capfd, answers, message) -> None:
    result = cookies.bake(extra_context=answers)
    err = capfd.readouterr().err

    assert result.exit_code != 0
    lines = [line for line in err.splitlines() if line.startswith("ERROR: ") and "not allowed" in line]
    assert len(lines) == 1, err
    assert message in lines[0]
    assert " is not allowed: " in lines[0]
    assert result.project_path is None or not result.project_path.exists()
    assert not any(result.project_path.parent.iterdir()) if result.project_path else True
