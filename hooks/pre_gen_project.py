"""Check every answer before anything is generated.

Each rule names the answer, shows the value and says what is allowed, in one
line. A failing check exits non-zero; cookiecutter then removes the partly
created output directory, so a rejected answer leaves nothing behind.
"""

import json
import keyword
import re
import sys

# Every answer. JSON inside a string: JSON's `true` is not Python.
ANSWERS = json.loads({{ cookiecutter | tojson | tojson }})
# Each choice's options, as cookiecutter.json declares them (local_extensions.py reads it).
CHOICES = {{ choices | tojson }}
BACKENDS = CHOICES["sandbox_backend"]
# The comma-separated answers as every template file reads them
# (local_extensions.py): items trimmed, blank items dropped, so " e2b , " is
# ["e2b"] and "," is []. The checks judge these items; an error line still
# shows the answer as it was typed.
ITEMS = {
    "additional_sandbox_backends": {{ cookiecutter | additional_backends | tojson }},
    "sandbox_secret_env_vars": {{ cookiecutter | secret_env_vars | tojson }},
}
# The primary backend, then the additional ones.
GENERATED = {{ cookiecutter | backends | tojson }}

# Top-level modules the generated service imports; a package with one of
# these names would shadow it.
TAKEN_MODULE_NAMES = {"agents", "openai", "temporalio", "tests", "test"} | set(sys.stdlib_module_names)
# The generated imports name the package on one line each (`from
# <package>.backends.daytona import ...`): a longer name would push them
# past the generated project's line length.
LONGEST_PACKAGE_NAME = 30


# Each check takes an answer's name and value and returns what is allowed
# when the value breaks its rule, or None.
def matches(pattern: str, allowed: str, longest: int = 10**6):
    def check(answer: str, value: object) -> str | None:
        text = str(value)
        return None if re.fullmatch(pattern, text) and len(text) <= longest else f"use {allowed}"

    return check


def whole_number(low: int, high: int, unit: str):
    def check(answer: str, value: object) -> str | None:
        text = str(value).strip()
        if isinstance(value, bool) or not re.fullmatch(r"[0-9]+", text) or not low <= int(text) <= high:
            return f"use a whole number from {low} to {high} {unit}"
        return None

    return check


def one_line(required: bool):
    def check(answer: str, value: object) -> str | None:
        if required and not str(value).strip():
            return "it must not be empty"
        if any(ord(ch) < 32 for ch in str(value)):
            return "it must be a single line without control characters"
        return None

    return check


def one_of(answer: str, value: object) -> str | None:
    return None if value in CHOICES[answer] else f"choose one of {', '.join(CHOICES[answer])}"


def yes_or_no(answer: str, value: object) -> str | None:
    return None if isinstance(value, bool) else "use yes or no (true or false)"


def short_package_name(answer: str, value: object) -> str | None:
    if len(str(value)) <= LONGEST_PACKAGE_NAME:
        return None
    made = ", made by default from project_name" if value == ANSWERS["project_slug"].replace("-", "_") else ""
    return (
        f"it is {len(str(value))} characters long{made}; choose a shorter package_name, at most "
        f"{LONGEST_PACKAGE_NAME} characters (the service's imports name it on one line)"
    )


def free_package_name(answer: str, value: object) -> str | None:
    if keyword.iskeyword(value) or value in TAKEN_MODULE_NAMES:
        return "it is a Python keyword or the name of a module the service imports; choose another"
    # The Daytona, E2B and Docker SDKs are the top-level modules `daytona`, `e2b` and `docker`.
    if value in GENERATED and value != "local":
        return f"it is the name of the {value} SDK's module, which the service imports; choose another"
    return None


def outlasts_every_activity(answer: str, value: object) -> str | None:
    longest = max(int(ANSWERS["sandbox_activity_timeout_seconds"]), int(ANSWERS["model_activity_timeout_seconds"]))
    return None if int(value) >= longest else f"it must be at least the longest activity timeout ({longest} seconds)"


def outlasts_the_approval_wait(answer: str, value: object) -> str | None:
    if ANSWERS["approval"] == "none":
        return None
    wait = int(ANSWERS["approval_timeout_seconds"])
    if int(value) > wait:
        return None
    return f"a run waits up to approval_timeout_seconds ({wait}) for each approval: give it longer than that"


# E2B counts a sandbox's lifetime from its creation; use does not extend it
# (only a reconnection does: a new worker's, or the next run of a chain's).
# A sandbox that E2B ends mid-run takes the run's workspace with it.
def outlives_the_run(answer: str, value: object) -> str | None:
    run = int(ANSWERS["workflow_execution_timeout_seconds"])
    if int(value) >= run:
        return None
    return (
        f"a run may last workflow_execution_timeout_seconds ({run}), and E2B ends the sandbox, "
        f"workspace and all, at this lifetime: use at least {run}, or shorten the run"
    )


def additional_backends(answer: str, value: object) -> str | None:
    extras = ITEMS[answer]
    for extra in extras:
        if extra not in BACKENDS:
            return f"{extra!r} is not a backend; use a comma-separated list of {', '.join(BACKENDS)}, or nothing"
        if extra == ANSWERS["sandbox_backend"]:
            return f"{extra!r} is already the primary sandbox_backend"
        if extra == ANSWERS["sandbox_provider_name"]:
            return (
                f"each additional backend registers under its own name, and {extra!r} is already "
                "the sandbox_provider_name; choose another sandbox_provider_name"
            )
    return "name each backend once" if len(set(extras)) != len(extras) else None


def env_var_names(answer: str, value: object) -> str | None:
    names = ITEMS[answer]
    for name in names:
        if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name) or len(name) > 100:
            return (
                f"{name!r} is not an environment variable name; use comma-separated names of "
                "uppercase letters, digits and underscores, not starting with a digit, or nothing"
            )
    return "name each variable once" if len(set(names)) != len(names) else None


def image_or_snapshot(answer: str, value: object) -> str | None:
    if not (ANSWERS["daytona_image"] and value):
        return None
    return "a sandbox starts from an image or from a snapshot, not both; leave daytona_image or daytona_snapshot empty"


IMAGE = "an image reference such as 'python:3.12-slim' (letters, digits and . _ / : @ -)"
NAME = "letters, digits and . _ / : -"

# (answer, check), checked in this order; the first broken rule stops
# generation. A backend's own answers (daytona_*, e2b_*, docker_*) are checked
# only when that backend is generated: the others' are ignored.
RULES = [
    ("project_name", one_line(required=True)),
    ("description", one_line(required=False)),
    ("author_name", one_line(required=True)),
    (
        "project_slug",
        matches(
            r"[a-z][a-z0-9]*(-[a-z0-9]+)*",
            "lowercase letters, digits and single dashes, starting with a letter, at most 64 characters",
            64,
        ),
    ),
    (
        "package_name",
        matches(
            r"[a-z][a-z0-9_]*",
            "a Python identifier in lowercase letters, digits and underscores, starting with a letter",
        ),
    ),
    ("package_name", short_package_name),
    (
        "sandbox_provider_name",
        matches(
            r"[a-z][a-z0-9_]*(-[a-z0-9_]+)*",
            "lowercase letters, digits, underscores and single dashes, starting with a letter, at most 40 "
            "characters (it prefixes activity names such as '<name>-sandbox_client_create')",
            40,
        ),
    ),
    (
        "task_queue",
        matches(
            r"[A-Za-z0-9][A-Za-z0-9._-]*",
            "letters, digits, dots, underscores and dashes, starting with a letter or digit, at most 200 characters",
            200,
        ),
    ),
    (
        "model_name",
        matches(
            r"[A-Za-z0-9][A-Za-z0-9._:/-]*",
            "a model identifier such as 'gpt-5.6-luna': letters, digits and . _ : / -",
            100,
        ),
    ),
    ("sandbox_backend", one_of),
    ("license", one_of),
    ("python_version", one_of),
    ("sandbox_activity_timeout_seconds", whole_number(1, 86_400, "seconds (1 day)")),
    ("model_activity_timeout_seconds", whole_number(1, 3_600, "seconds (1 hour)")),
    ("workflow_execution_timeout_seconds", whole_number(10, 31_536_000, "seconds (1 year)")),
    # A long run continues as new before its history grows large, so every
    # run of its chain stays near 4 MB at any length (docs/benchmarks.md): the
    # bound is how long an agent should work unattended, not Temporal's limit.
    ("max_turns", whole_number(2, 1_000, "turns")),
    ("workflow_execution_timeout_seconds", outlasts_every_activity),
    ("approval", one_of),
    ("approval_timeout_seconds", whole_number(1, 604_800, "seconds (1 week)")),
    ("workflow_execution_timeout_seconds", outlasts_the_approval_wait),
    ("additional_sandbox_backends", additional_backends),
    ("package_name", free_package_name),
    ("daytona_image", matches(r"([a-z0-9][A-Za-z0-9._/:@-]*)?", f"{IMAGE}, or nothing", 255)),
    ("daytona_snapshot", matches(r"([A-Za-z0-9][A-Za-z0-9._/:-]*)?", f"a snapshot name ({NAME}), or nothing", 255)),
    # 0 would be Daytona's "never stop": a sandbox whose run died before its
    # teardown would run, and cost, for ever.
    ("daytona_auto_stop_interval_minutes", whole_number(1, 43_200, "minutes (30 days; 0, never, is not offered)")),
    ("daytona_create_timeout_seconds", whole_number(1, 3_600, "seconds (1 hour)")),
    ("daytona_pause_on_exit", yes_or_no),
    ("daytona_snapshot", image_or_snapshot),
    ("e2b_template", matches(r"([A-Za-z0-9][A-Za-z0-9._/:-]*)?", f"a template name or id ({NAME}), or nothing", 255)),
    ("e2b_timeout_seconds", whole_number(60, 86_400, "seconds (1 day)")),
    ("e2b_timeout_seconds", outlives_the_run),
    ("e2b_pause_on_exit", yes_or_no),
    ("e2b_sandbox_type", one_of),
    ("e2b_on_timeout", one_of),
    ("docker_image", matches(r"[a-z0-9][A-Za-z0-9._/:@-]*", IMAGE, 255)),
    ("docker_network", one_of),
    ("sandbox_secret_env_vars", env_var_names),
]


if __name__ == "__main__":
    for answer, check in RULES:
        backend = answer.split("_")[0]
        if backend in BACKENDS and backend not in GENERATED:
            continue
        allowed = check(answer, ANSWERS[answer])
        if allowed:
            sys.exit(f"ERROR: {answer}={ANSWERS[answer]!r} is not allowed: {allowed}.")
