"""Bad answers stop generation with one clear line and leave nothing behind."""

import pytest

from .baked import TEMPLATE, run, tool


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
    rejects(
        {"sandbox_backend": "vercel", "approval": "commands"},
        "workflow_execution_timeout_seconds='86400' is not allowed: vercel ends a sandbox, workspace and "
        "all, after 18000 seconds at most: use at most 18000",
        id="vercel-runs-of-a-day",
    ),
    rejects(
        {"additional_sandbox_backends": "e2b", "workflow_execution_timeout_seconds": "86401"},
        "workflow_execution_timeout_seconds='86401' is not allowed: e2b ends a sandbox",
        id="e2b-runs-past-a-day",
    ),
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
    rejects({"sandbox_backend": "docker", "package_name": "docker"}, id="package-shadows-docker-sdk"),
    rejects({"sandbox_backend": "modal", "package_name": "modal"}, id="package-shadows-modal-sdk"),
    rejects(
        {"sandbox_backend": "runloop", "package_name": "runloop_api_client"},
        "package_name='runloop_api_client' is not allowed: it is the name of the runloop SDK's module",
        id="package-shadows-runloop-sdk",
    ),
    rejects({"sandbox_backend": "vercel", "package_name": "vercel"}, id="package-shadows-vercel-sdk"),
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
def test_bad_answer_is_rejected_with_one_clear_line(cookies, answers, message) -> None:
    result = cookies.bake(extra_context=answers)

    assert result.exit_code != 0
    # Cookiecutter's hook failure, whose message the cookiecutter command prints.
    assert type(result.exception).__name__ == "FailedHookException", result.exception
    [line] = str(result.exception).splitlines()
    assert line.startswith("ERROR: ")
    assert message in line
    assert " is not allowed: " in line
    assert result.project_path is None or not result.project_path.exists()
    assert not any(result.project_path.parent.iterdir()) if result.project_path else True


def cookiecutter_command(tmp_path, answer: str):
    """The cookiecutter command, as a user runs it, given one ``answer``
    on its command line (the rest its defaults), into tmp_path/out."""
    return run(
        tool("cookiecutter"),
        "--no-input",
        "--output-dir",
        str(tmp_path / "out"),
        str(TEMPLATE),
        answer,
        cwd=tmp_path,
        HOME=str(tmp_path),
    )


def test_the_cookiecutter_command_says_a_bad_answers_line_alone(tmp_path) -> None:
    """What a user sees: the line, and nothing of Cookiecutter's (no
    traceback, no "Hook script failed"); status 1; no directory."""
    done = cookiecutter_command(tmp_path, "task_queue=my queue")

    assert done.returncode == 1
    said = (done.stdout + done.stderr).strip()
    assert said == (
        "ERROR: task_queue='my queue' is not allowed: use letters, digits, dots, underscores and dashes, "
        "starting with a letter or digit, at most 200 characters."
    ), said
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_bad_choice_on_cookiecutters_command_line_gets_cookiecutters_traceback(tmp_path) -> None:
    """Where Cookiecutter does not let the template speak (docs/questions.md
    says so): a value that is not one of a choice's options, given on the
    command line, is refused by cookiecutter/generate.py's
    apply_overwrites_to_context with a ValueError its command does not catch,
    before any of the template's code runs in its process; the pre-prompt
    hook, which runs before it, is not given the command line's answers.
    Should a Cookiecutter release catch it, this fails: make the docs say so."""
    done = cookiecutter_command(tmp_path, "sandbox_backend=dockr")

    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ValueError: dockr provided for choice variable sandbox_backend, but the choices are")
    assert "Traceback (most recent call last):" in done.stderr
    assert not (tmp_path / "out").exists()
