"""Check every answer before anything is generated.

Each rule names the variable, shows the value and says what is allowed, in one
line. A failing check exits non-zero; cookiecutter then removes the partly
created output directory, so a rejected answer leaves nothing behind.
"""

import json
import keyword
import re
import sys

ANSWERS = {
    "project_name": {{ cookiecutter.project_name | tojson }},
    "project_slug": {{ cookiecutter.project_slug | tojson }},
    "package_name": {{ cookiecutter.package_name | tojson }},
    "description": {{ cookiecutter.description | tojson }},
    "sandbox_backend": {{ cookiecutter.sandbox_backend | tojson }},
    "sandbox_provider_name": {{ cookiecutter.sandbox_provider_name | tojson }},
    "additional_sandbox_backends": {{ cookiecutter.additional_sandbox_backends | tojson }},
    "daytona_auto_stop_interval_minutes": {{ cookiecutter.daytona_auto_stop_interval_minutes | tojson }},
    "daytona_create_timeout_seconds": {{ cookiecutter.daytona_create_timeout_seconds | tojson }},
    # Booleans arrive as JSON text: `true` is not Python.
    "daytona_pause_on_exit": json.loads({{ cookiecutter.daytona_pause_on_exit | tojson | tojson }}),
    "daytona_image": {{ cookiecutter.daytona_image | tojson }},
    "daytona_snapshot": {{ cookiecutter.daytona_snapshot | tojson }},
    "e2b_sandbox_type": {{ cookiecutter.e2b_sandbox_type | tojson }},
    "e2b_template": {{ cookiecutter.e2b_template | tojson }},
    "e2b_timeout_seconds": {{ cookiecutter.e2b_timeout_seconds | tojson }},
    "e2b_on_timeout": {{ cookiecutter.e2b_on_timeout | tojson }},
    "e2b_pause_on_exit": json.loads({{ cookiecutter.e2b_pause_on_exit | tojson | tojson }}),
    "docker_image": {{ cookiecutter.docker_image | tojson }},
    "docker_network": {{ cookiecutter.docker_network | tojson }},
    "sandbox_secret_env_vars": {{ cookiecutter.sandbox_secret_env_vars | tojson }},
    "task_queue": {{ cookiecutter.task_queue | tojson }},
    "sandbox_activity_timeout_seconds": {{ cookiecutter.sandbox_activity_timeout_seconds | tojson }},
    "model_activity_timeout_seconds": {{ cookiecutter.model_activity_timeout_seconds | tojson }},
    "workflow_execution_timeout_seconds": {{ cookiecutter.workflow_execution_timeout_seconds | tojson }},
    "max_turns": {{ cookiecutter.max_turns | tojson }},
    "model_name": {{ cookiecutter.model_name | tojson }},
    "python_version": {{ cookiecutter.python_version | tojson }},
    "author_name": {{ cookiecutter.author_name | tojson }},
    "license": {{ cookiecutter.license | tojson }},
}

# The comma-separated answers as every template file reads them
# (local_extensions.py): items trimmed, blank items dropped, so " e2b , " is
# ["e2b"] and "," is []. The checks judge these items; an error line still
# shows the answer as it was typed.
ITEMS = {
    "additional_sandbox_backends": {{ cookiecutter | additional_backends | tojson }},
    "sandbox_secret_env_vars": {{ cookiecutter | secret_env_vars | tojson }},
}

BACKENDS = ("local", "daytona", "e2b", "docker")
PYTHON_VERSIONS = ("3.11", "3.12", "3.13")
E2B_SANDBOX_TYPES = ("e2b", "e2b_code_interpreter")
E2B_ON_TIMEOUT = ("kill", "pause")
DOCKER_NETWORKS = ("none", "bridge")
ENV_VAR_NAME = r"[A-Z_][A-Z0-9_]*"
LICENSES = ("MIT", "Apache-2.0", "none")

# Top-level modules the generated service imports; a package with one of
# these names would shadow it.
TAKEN_MODULE_NAMES = {"agents", "openai", "temporalio", "tests", "test"} | set(
    sys.stdlib_module_names
)

# (variable, regular expression, what is allowed)
PATTERNS = [
    (
        "project_slug",
        r"[a-z][a-z0-9]*(-[a-z0-9]+)*",
        "lowercase letters, digits and single dashes, starting with a letter, "
        "at most 64 characters",
    ),
    (
        "package_name",
        r"[a-z][a-z0-9_]*",
        "a Python identifier in lowercase letters, digits and underscores, "
        "starting with a letter",
    ),
    (
        "sandbox_provider_name",
        r"[a-z][a-z0-9_]*(-[a-z0-9_]+)*",
        "lowercase letters, digits, underscores and single dashes, starting with "
        "a letter, at most 40 characters (it prefixes activity names such as "
        "'<name>-sandbox_client_create')",
    ),
    (
        "task_queue",
        r"[A-Za-z0-9][A-Za-z0-9._-]*",
        "letters, digits, dots, underscores and dashes, starting with a letter or "
        "digit, at most 200 characters",
    ),
    (
        "model_name",
        r"[A-Za-z0-9][A-Za-z0-9._:/-]*",
        "a model identifier such as 'gpt-5.6-luna': letters, digits and . _ : / -",
    ),
]
MAX_LENGTHS = {"project_slug": 64, "sandbox_provider_name": 40, "task_queue": 200, "model_name": 100}

# Backend options, checked only when that backend is generated (the others'
# answers are ignored). (variable, regular expression, what is allowed)
BACKEND_PATTERNS = {
    "daytona": [
        (
            "daytona_image",
            r"([a-z0-9][A-Za-z0-9._/:@-]*)?",
            "an image reference such as 'python:3.12-slim' (letters, digits and . _ / : @ -), or nothing",
        ),
        (
            "daytona_snapshot",
            r"([A-Za-z0-9][A-Za-z0-9._/:-]*)?",
            "a snapshot name (letters, digits and . _ / : -), or nothing",
        ),
    ],
    "e2b": [
        (
            "e2b_template",
            r"([A-Za-z0-9][A-Za-z0-9._/:-]*)?",
            "a template name or id (letters, digits and . _ / : -), or nothing",
        ),
    ],
    "docker": [
        (
            "docker_image",
            r"[a-z0-9][A-Za-z0-9._/:@-]*",
            "an image reference such as 'python:3.12-slim' (letters, digits and . _ / : @ -)",
        ),
    ],
}
BACKEND_MAX_LENGTHS = {"daytona_image": 255, "daytona_snapshot": 255, "e2b_template": 255, "docker_image": 255}

# (variable, smallest, largest, unit)
WHOLE_NUMBERS = [
    ("sandbox_activity_timeout_seconds", 1, 86_400, "seconds (1 day)"),
    ("model_activity_timeout_seconds", 1, 3_600, "seconds (1 hour)"),
    ("workflow_execution_timeout_seconds", 10, 31_536_000, "seconds (1 year)"),
    # A long run continues as new before its history grows large, so every
    # run of its chain stays near 4 MB at any length (docs/benchmarks.md): the
    # bound is how long an agent should work unattended, not Temporal's limit.
    ("max_turns", 1, 1_000, "turns"),
]
BACKEND_WHOLE_NUMBERS = {
    # 0 would be Daytona's "never stop": a sandbox whose run died before its
    # teardown would run, and cost, for ever.
    "daytona": [
        ("daytona_auto_stop_interval_minutes", 1, 43_200, "minutes (30 days; 0, never, is not offered)"),
        ("daytona_create_timeout_seconds", 1, 3_600, "seconds (1 hour)"),
    ],
    "e2b": [("e2b_timeout_seconds", 60, 86_400, "seconds (1 day)")],
}
BACKEND_BOOLEANS = {"daytona": ["daytona_pause_on_exit"], "e2b": ["e2b_pause_on_exit"]}
BACKEND_CHOICES = {
    "daytona": [],
    "e2b": [("e2b_sandbox_type", E2B_SANDBOX_TYPES), ("e2b_on_timeout", E2B_ON_TIMEOUT)],
    "docker": [("docker_network", DOCKER_NETWORKS)],
}


def fail(variable: str, value: object, rule: str) -> None:
    sys.exit(f"ERROR: {variable}={value!r} is not allowed: {rule}.")


def whole_number(variable: str, value: object, low: int, high: int, unit: str) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not re.fullmatch(r"[0-9]+", text) or not low <= int(text) <= high:
        fail(variable, value, f"use a whole number from {low} to {high} {unit}")
    return int(text)


def check_backends(answers: dict[str, object], extras: list[str]) -> list[str]:
    """The backends to generate: the primary one, then the additional ones."""
    primary = str(answers["sandbox_backend"])
    text = str(answers["additional_sandbox_backends"])
    for extra in extras:
        if extra not in BACKENDS:
            fail(
                "additional_sandbox_backends",
                text,
                f"{extra!r} is not a backend; use a comma-separated list of {', '.join(BACKENDS)}, or nothing",
            )
        if extra == primary:
            fail("additional_sandbox_backends", text, f"{extra!r} is already the primary sandbox_backend")
        if extra == answers["sandbox_provider_name"]:
            fail(
                "additional_sandbox_backends",
                text,
                f"each additional backend registers under its own name, and {extra!r} is already "
                "the sandbox_provider_name; choose another sandbox_provider_name",
            )
    if len(set(extras)) != len(extras):
        fail("additional_sandbox_backends", text, "name each backend once")
    return [primary, *extras]


def check_backend_options(answers: dict[str, object], backends: list[str]) -> None:
    for backend in backends:
        for variable, pattern, rule in BACKEND_PATTERNS.get(backend, []):
            value = str(answers[variable])
            if not re.fullmatch(pattern, value) or len(value) > BACKEND_MAX_LENGTHS[variable]:
                fail(variable, value, f"use {rule}")
        for variable, low, high, unit in BACKEND_WHOLE_NUMBERS.get(backend, []):
            whole_number(variable, answers[variable], low, high, unit)
        for variable in BACKEND_BOOLEANS.get(backend, []):
            if not isinstance(answers[variable], bool):
                fail(variable, answers[variable], "use yes or no (true or false)")
        for variable, choices in BACKEND_CHOICES.get(backend, []):
            if answers[variable] not in choices:
                fail(variable, answers[variable], f"choose one of {', '.join(choices)}")
    if "daytona" in backends and answers["daytona_image"] and answers["daytona_snapshot"]:
        fail(
            "daytona_snapshot",
            answers["daytona_snapshot"],
            "a sandbox starts from an image or from a snapshot, not both; leave daytona_image or daytona_snapshot empty",
        )


def check_secrets(answers: dict[str, object], secrets: list[str]) -> None:
    text = str(answers["sandbox_secret_env_vars"])
    for name in secrets:
        if not re.fullmatch(ENV_VAR_NAME, name) or len(name) > 100:
            fail(
                "sandbox_secret_env_vars",
                text,
                f"{name!r} is not an environment variable name; use comma-separated names of "
                "uppercase letters, digits and underscores, not starting with a digit, or nothing",
            )
    if len(set(secrets)) != len(secrets):
        fail("sandbox_secret_env_vars", text, "name each variable once")


def check(answers: dict[str, object], items: dict[str, list[str]]) -> None:
    for variable in ("project_name", "description", "author_name"):
        text = str(answers[variable])
        if not text.strip() and variable in ("project_name", "author_name"):
            fail(variable, text, "it must not be empty")
        if any(ord(ch) < 32 for ch in text):
            fail(variable, text, "it must be a single line without control characters")

    for variable, pattern, rule in PATTERNS:
        value = str(answers[variable])
        if not re.fullmatch(pattern, value) or len(value) > MAX_LENGTHS.get(variable, 10**6):
            fail(variable, value, f"use {rule}")

    package = str(answers["package_name"])
    if keyword.iskeyword(package) or package in TAKEN_MODULE_NAMES:
        fail(
            "package_name",
            package,
            "it is a Python keyword or the name of a module the service imports; choose another",
        )

    if answers["sandbox_backend"] not in BACKENDS:
        fail("sandbox_backend", answers["sandbox_backend"], f"choose one of {', '.join(BACKENDS)}")
    if answers["license"] not in LICENSES:
        fail("license", answers["license"], f"choose one of {', '.join(LICENSES)}")
    if answers["python_version"] not in PYTHON_VERSIONS:
        fail("python_version", answers["python_version"], f"choose one of {', '.join(PYTHON_VERSIONS)}")

    numbers = {}
    for variable, low, high, unit in WHOLE_NUMBERS:
        numbers[variable] = whole_number(variable, answers[variable], low, high, unit)

    longest_step = max(numbers["sandbox_activity_timeout_seconds"], numbers["model_activity_timeout_seconds"])
    if numbers["workflow_execution_timeout_seconds"] < longest_step:
        fail(
            "workflow_execution_timeout_seconds",
            answers["workflow_execution_timeout_seconds"],
            f"it must be at least the longest activity timeout ({longest_step} seconds)",
        )

    backends = check_backends(answers, items["additional_sandbox_backends"])
    # The Daytona, E2B and Docker SDKs are the top-level modules `daytona`, `e2b` and `docker`.
    if package in backends and package != "local":
        fail(
            "package_name",
            package,
            f"it is the name of the {package} SDK's module, which the service imports; choose another",
        )
    check_backend_options(answers, backends)
    check_secrets(answers, items["sandbox_secret_env_vars"])


if __name__ == "__main__":
    check(ANSWERS, ITEMS)
