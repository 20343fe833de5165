"""Bad answers stop generation with one clear line and leave nothing behind."""

import pytest


def rejects(answers: dict[str, object], message: str | None = None, *, id: str):
    """Answers and what their one error line says: by default it names the
    last answer with its value as typed, as in `project_slug='My Agent'`."""
    answer, value = list(answers.items())[-1]
    return pytest.param(answers, message or f"{answer}={value!r}", id=id)


BAD_INPUTS = [
    rejects({"project_slug": "My Agent"}, id="slug-with-space"),
    rejects({"project_slug": "-agent"}, id="slug-leading-dash"),
    rejects({"package_name": "my-agent"}, id="package-with-dash"),
    rejects({"package_name": "class"}, id="package-keyword"),
    rejects({"package_name": "json"}, id="package-shadows-stdlib"),
    rejects({"package_name": "agents"}, id="package-shadows-sdk"),
    rejects(
        {"package_name": "customer_support_triage_agent_s"},
        "package_name='customer_support_triage_agent_s' is not allowed: it is 31 characters long; "
        "choose a shorter package_name, at most 30 characters",
        id="package-too-long",
    ),
    rejects(
        {"project_name": "Customer Support Ticket Triage Agent"},
        "package_name='customer_support_ticket_triage_agent' is not allowed: it is 36 characters long, "
        "made by default from project_name; choose a shorter package_name, at most 30 characters",
        id="project-name-too-long-for-a-package-name",
    ),
    rejects({"sandbox_provider_name": "my sandbox"}, id="provider-space"),
    rejects({"sandbox_provider_name": "Local"}, id="provider-uppercase"),
    rejects({"sandbox_provider_name": "a.b"}, id="provider-dot"),
    rejects({"sandbox_provider_name": "x" * 41}, id="provider-too-long"),
    rejects({"task_queue": "my queue"}, id="queue-space"),
    rejects({"sandbox_activity_timeout_seconds": "0"}, id="sandbox-timeout-zero"),
    rejects({"sandbox_activity_timeout_seconds": "2.5"}, id="sandbox-timeout-fraction"),
    rejects(
        {"sandbox_activity_timeout_seconds": "60", "workflow_execution_timeout_seconds": "30"},
        id="workflow-shorter-than-activity",
    ),
    # Each model call may take 60 s unless the worker's MODEL_ACTIVITY_TIMEOUT_SECONDS says otherwise.
    rejects(
        {"sandbox_activity_timeout_seconds": "10", "workflow_execution_timeout_seconds": "30"},
        "workflow_execution_timeout_seconds='30' is not allowed: it must be at least the longest activity "
        "timeout (60 seconds)",
        id="workflow-shorter-than-a-model-call",
    ),
    rejects({"max_turns": "many"}, id="turns-not-a-number"),
    rejects({"approval": "commands", "approval_timeout_seconds": "0"}, id="approval-timeout-zero"),
    rejects(
        {"approval": "commands", "approval_timeout_seconds": "7200", "workflow_execution_timeout_seconds": "3600"},
        "workflow_execution_timeout_seconds='3600' is not allowed: a run waits up to approval_timeout_seconds (7200)",
        id="run-shorter-than-an-approval-wait",
    ),
    # One turn runs a command or answers, never both; the recorded histories
    # every project replays (tests/histories/) take two.
    rejects({"max_turns": "1"}, "max_turns='1' is not allowed: use a whole number from 2 to 1000 turns", id="one-turn"),
    rejects({"model_name": "gpt 5"}, id="model-with-space"),
    rejects({"project_slug": "agent", "project_name": "   "}, id="empty-name"),
    rejects({"sandbox_backend": "e2b", "package_name": "e2b"}, id="package-shadows-backend-sdk"),
    rejects({"additional_sandbox_backends": "kubernetes"}, id="extra-backend-unknown"),
    rejects(
        {"sandbox_backend": "local", "additional_sandbox_backends": "local"},
        "'local' is already the primary sandbox_backend",
        id="extra-backend-is-primary",
    ),
    rejects({"additional_sandbox_backends": "e2b, e2b"}, id="extra-backend-twice"),
    rejects(
        {"additional_sandbox_backends": " e2b,,e2b "},
        "additional_sandbox_backends=' e2b,,e2b ' is not allowed: name each backend once",
        id="extra-backend-twice-among-blanks",
    ),
    rejects(
        {"additional_sandbox_backends": "daytona e2b"},
        "'daytona e2b' is not a backend",
        id="extra-backends-without-comma",
    ),
    rejects({"additional_sandbox_backends": "E2B"}, id="extra-backend-uppercase"),
    rejects(
        {"sandbox_backend": "daytona", "sandbox_provider_name": "local", "additional_sandbox_backends": "local"},
        "'local' is already the sandbox_provider_name",
        id="extra-backend-name-taken",
    ),
    rejects({"sandbox_backend": "daytona", "daytona_auto_stop_interval_minutes": "0"}, id="daytona-never-stops"),
    rejects(
        {"sandbox_backend": "daytona", "daytona_create_timeout_seconds": "soon"},
        id="daytona-create-timeout-not-a-number",
    ),
    rejects({"sandbox_backend": "daytona", "daytona_image": "my image"}, id="daytona-image-space"),
    rejects(
        {"sandbox_backend": "daytona", "daytona_image": "python:3.12", "daytona_snapshot": "tools"},
        id="daytona-image-and-snapshot",
    ),
    rejects(
        {
            "sandbox_backend": "local",
            "additional_sandbox_backends": "daytona",
            "daytona_auto_stop_interval_minutes": "0",
        },
        id="extra-daytona-options-checked",
    ),
    rejects({"sandbox_backend": "e2b", "e2b_template": "team template"}, id="e2b-template-space"),
    rejects({"sandbox_backend": "e2b", "e2b_timeout_seconds": "10"}, id="e2b-lifetime-too-short"),
    rejects(
        {"sandbox_backend": "e2b", "e2b_timeout_seconds": "1800", "workflow_execution_timeout_seconds": "3600"},
        "e2b_timeout_seconds='1800' is not allowed: a run may last workflow_execution_timeout_seconds (3600)",
        id="e2b-sandbox-dies-before-the-run",
    ),
    rejects(
        {"sandbox_backend": "daytona", "additional_sandbox_backends": "e2b", "e2b_timeout_seconds": "600"},
        "e2b_timeout_seconds='600' is not allowed: a run may last",
        id="extra-e2b-sandbox-dies-before-the-run",
    ),
    rejects({"sandbox_backend": "docker", "docker_image": "python 3.12"}, id="docker-image-space"),
    rejects({"sandbox_backend": "docker", "docker_image": ""}, id="docker-image-empty"),
    rejects(
        {"sandbox_backend": "e2b", "additional_sandbox_backends": "docker", "docker_image": "-latest"},
        id="extra-docker-options-checked",
    ),
    rejects({"sandbox_backend": "docker", "package_name": "docker"}, id="package-shadows-docker-sdk"),
    rejects({"sandbox_backend": "modal", "modal_app_name": "my app"}, id="modal-app-space"),
    rejects({"sandbox_backend": "modal", "modal_app_name": ""}, id="modal-app-empty"),
    rejects({"sandbox_backend": "modal", "modal_image": "python 3.12"}, id="modal-image-space"),
    rejects({"sandbox_backend": "modal", "modal_timeout_seconds": "90000"}, id="modal-lifetime-past-a-day"),
    rejects(
        {"sandbox_backend": "modal", "modal_timeout_seconds": "1800"},
        "modal_timeout_seconds='1800' is not allowed: a run may last workflow_execution_timeout_seconds (3600), "
        "and Modal ends the sandbox",
        id="modal-sandbox-dies-before-the-run",
    ),
    rejects(
        {"sandbox_backend": "e2b", "additional_sandbox_backends": "modal", "modal_timeout_seconds": "many"},
        "modal_timeout_seconds='many' is not allowed: use a whole number from 60 to 86400",
        id="extra-modal-options-checked",
    ),
    rejects({"sandbox_backend": "modal", "package_name": "modal"}, id="package-shadows-modal-sdk"),
    rejects({"sandbox_backend": "runloop", "runloop_blueprint": "agent tools"}, id="runloop-blueprint-space"),
    rejects({"sandbox_backend": "runloop", "runloop_keep_alive_seconds": "172801"}, id="runloop-lifetime-past-2-days"),
    rejects(
        {
            "sandbox_backend": "runloop",
            "approval": "commands",
            "runloop_keep_alive_seconds": "3600",
        },
        "runloop_keep_alive_seconds='3600' is not allowed: a run may last workflow_execution_timeout_seconds (86400), "
        "and Runloop ends the sandbox",
        id="runloop-devbox-dies-before-an-approved-run",
    ),
    rejects(
        {"sandbox_backend": "runloop", "package_name": "runloop_api_client"},
        "package_name='runloop_api_client' is not allowed: it is the name of the runloop SDK's module",
        id="package-shadows-runloop-sdk",
    ),
    rejects({"sandbox_backend": "vercel", "vercel_timeout_seconds": "18001"}, id="vercel-lifetime-past-5-hours"),
    rejects(
        {"sandbox_backend": "vercel", "approval": "commands"},
        "vercel_timeout_seconds='18000' is not allowed: a run may last workflow_execution_timeout_seconds (86400), "
        "and Vercel ends the sandbox",
        id="vercel-default-lifetime-shorter-than-an-approved-run",
    ),
    rejects({"sandbox_backend": "vercel", "package_name": "vercel"}, id="package-shadows-vercel-sdk"),
    rejects({"sandbox_backend": "blaxel", "blaxel_ttl_seconds": "299"}, id="blaxel-lifetime-under-5-minutes"),
    rejects(
        {"sandbox_backend": "blaxel", "blaxel_ttl_seconds": "3599"},
        "blaxel_ttl_seconds='3599' is not allowed: a run may last workflow_execution_timeout_seconds (3600), "
        "and Blaxel ends the sandbox",
        id="blaxel-lifetime-shorter-than-a-run",
    ),
    rejects({"sandbox_backend": "blaxel", "blaxel_region": "US West"}, id="blaxel-region-not-a-name"),
    rejects({"sandbox_backend": "blaxel", "blaxel_image": "-image"}, id="blaxel-image-not-a-reference"),
    rejects({"additional_sandbox_backends": "blaxel", "package_name": "blaxel"}, id="package-shadows-blaxel-sdk"),
    rejects({"sandbox_secret_env_vars": "github-token"}, id="secret-bad-name"),
    rejects({"sandbox_secret_env_vars": "TOKEN, TOKEN"}, id="secret-twice"),
    rejects(
        {"sandbox_secret_env_vars": "GITHUB_TOKEN NPM_TOKEN"},
        "'GITHUB_TOKEN NPM_TOKEN' is not an environment variable name",
        id="secrets-without-comma",
    ),
    rejects({"author_name": " "}, id="empty-author"),
    rejects({"author_name": "Acme\nInc"}, id="author-two-lines"),
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
