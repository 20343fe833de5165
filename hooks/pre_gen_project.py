"""Check every answer before anything is generated.

Each rule names the variable, shows the value and says what is allowed, in one
line. A failing check exits non-zero; cookiecutter then removes the partly
created output directory, so a rejected answer leaves nothing behind.
"""

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

BACKENDS = ("local", "daytona", "e2b")
PYTHON_VERSIONS = ("3.11", "3.12", "3.13")
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

# (variable, smallest, largest, unit)
WHOLE_NUMBERS = [
    ("sandbox_activity_timeout_seconds", 1, 86_400, "seconds (1 day)"),
    ("model_activity_timeout_seconds", 1, 3_600, "seconds (1 hour)"),
    ("workflow_execution_timeout_seconds", 10, 31_536_000, "seconds (1 year)"),
    ("max_turns", 1, 1_000, "turns"),
]


def fail(variable: str, value: object, rule: str) -> None:
    sys.exit(f"ERROR: {variable}={value!r} is not allowed: {rule}.")


def check(answers: dict[str, object]) -> None:
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
        value = answers[variable]
        text = str(value).strip()
        if isinstance(value, bool) or not re.fullmatch(r"[0-9]+", text) or not low <= int(text) <= high:
            fail(variable, value, f"use a whole number from {low} to {high} {unit}")
        numbers[variable] = int(text)

    longest_step = max(numbers["sandbox_activity_timeout_seconds"], numbers["model_activity_timeout_seconds"])
    if numbers["workflow_execution_timeout_seconds"] < longest_step:
        fail(
            "workflow_execution_timeout_seconds",
            answers["workflow_execution_timeout_seconds"],
            f"it must be at least the longest activity timeout ({longest_step} seconds)",
        )


if __name__ == "__main__":
    check(ANSWERS)
