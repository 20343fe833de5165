"""What the template derives from the answers, and the rules every answer
follows, each written once.

Two answers are typed as comma-separated text: ``additional_sandbox_backends``
and ``sandbox_secret_env_vars``. They are read here and nowhere else: each item
trimmed, blank items dropped, so ``" e2b , "`` is ``["e2b"]`` and ``","`` is
``[]``, the same as an empty answer. Both engines load this module for every
render: cookiecutter (and cruft) through ``_extensions`` in cookiecutter.json,
from the template's root directory; copier through ``_jinja_extensions`` in
copier.yml, by its path (copier-template-extensions). Template files, both
hooks and copier's questions use its filters, for example::

    {% set backends = cookiecutter | backends -%}

and the template's tests import ``derive``. What the files say of each
backend (its credentials, options, extra, SDK modules, whether it is
host-bound) is the runtime's catalog of backends, ``CATALOG``: read here from
the runtime beside this module, and offered to the files as the Jinja global
``catalog``.

The options of every choice are declared once, in cookiecutter.json beside
this module: ``CHOICES`` reads them (the hooks see it as the Jinja global
``choices``), and ``BACKENDS`` is the sandbox_backend choice's options.
copier.yml asks the same questions (tests/test_copier.py compares them).

``RULES`` are the checks on the answers: cookiecutter's pre-generation hook
stops at the first one broken, and each of copier's questions re-asks until
none is (``refusal``). ``unused_files`` are the files a project leaves out:
cookiecutter's post-generation hook deletes them, copier never writes them.
"""

import base64
import functools
import json
import keyword
import logging
import re
import subprocess
import sys
import tomllib
import unicodedata
import urllib.parse
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from jinja2 import Environment
from jinja2.ext import Extension

try:
    from copier_template_extensions import ContextHook
except ImportError:  # cookiecutter without copier: CookiecutterNamespace is never loaded
    ContextHook = Extension

_COOKIECUTTER_JSON = json.loads(Path(__file__).with_name("cookiecutter.json").read_text())
# Every question, in the order both engines ask them.
QUESTIONS: list[str] = [answer for answer in _COOKIECUTTER_JSON if not answer.startswith("_")]
# The template's project directory, as both engines read it.
PROJECT = Path(__file__).with_name("{{cookiecutter.project_slug}}")

# Every answer offered as a choice, with its options in the order cookiecutter.json lists them.
CHOICES: dict[str, list[str]] = {
    answer: options
    for answer, options in _COOKIECUTTER_JSON.items()
    if isinstance(options, list) and not answer.startswith("_")
}
BACKENDS: list[str] = CHOICES["sandbox_backend"]

# The catalog of sandbox backends: each one's credentials, options, SDK and
# host, declared once, in the runtime beside this module (read by path: where
# the template is rendered, the runtime need not be installed).
CATALOG_FILE = Path(__file__).parent / "runtime" / "src" / "sandbox_agent_runtime" / "backends" / "catalog.toml"
_CATALOG = tomllib.loads(CATALOG_FILE.read_text())
# Each entry with what it may leave out: no other variables, no options, and
# for a CI the first set of its credentials.
CATALOG: dict[str, dict[str, Any]] = {
    name: {
        "options": {},
        "ci_environment": backend["required_environment"][0] if backend["required_environment"] else [],
        **backend,
        "environment": [
            {"example": "", "secret": False, **variable}
            for variable in backend.get("environment", [])
        ],
    }
    for name, backend in _CATALOG["backends"].items()
}
KINDS: dict[str, dict[str, str]] = _CATALOG["kinds"]
# The backends whose sandbox can be bound to one worker host.
HOST_BOUND = tuple(name for name, backend in CATALOG.items() if backend["host_bound"])


class Derived(NamedTuple):
    # Every backend the worker registers: the primary one, then the additional ones.
    backends: list[str]
    # The additional ones alone, in the order they were typed.
    additional_backends: list[str]
    # The backends other than local, in the same order; tests stand a local
    # sandbox in for them.
    remote_backends: list[str]
    # The backends whose sandbox can live on the host of the worker that
    # created it (a local workspace; a container on the host's own Docker
    # engine): their runs keep every sandbox operation on that host.
    host_bound_backends: list[str]
    # The worker environment variables the agent's sandbox sees.
    secret_env_vars: list[str]
    # (constant in shared.py, backend) for every provider the worker
    # registers: SANDBOX_PROVIDER for the primary backend, then one constant
    # named after each additional backend (E2B_PROVIDER = "e2b").
    providers: list[tuple[str, str]]


def items(text: object) -> list[str]:
    """The items of a comma-separated answer: each trimmed, blank ones dropped."""
    return [item.strip() for item in str(text).split(",") if item.strip()]


def generated_backends(answers: Mapping[str, object]) -> list[str]:
    """The primary backend, then the additional ones."""
    return [str(answers["sandbox_backend"]), *items(answers["additional_sandbox_backends"])]


def derive(answers: Mapping[str, object]) -> Derived:
    """The facts every file needs from the answers. The rules (below) check
    the items; this only reads them, so it never fails."""
    additional = items(answers["additional_sandbox_backends"])
    backends = generated_backends(answers)
    return Derived(
        backends=backends,
        additional_backends=additional,
        remote_backends=[backend for backend in backends if backend != "local"],
        host_bound_backends=[backend for backend in backends if backend in HOST_BOUND],
        secret_env_vars=items(answers["sandbox_secret_env_vars"]),
        providers=[
            ("SANDBOX_PROVIDER", backends[0]),
            *((f"{backend.upper()}_PROVIDER", backend) for backend in additional),
        ],
    )


# The rules. Each check takes an answer's name, its value and every answer
# given so far, and returns what is allowed when the value breaks its rule,
# or None.
Check = Callable[[str, object, Mapping[str, object]], str | None]

# Each model call's timeout unless the worker's MODEL_ACTIVITY_TIMEOUT_SECONDS
# says otherwise: a setting of the running service, no longer a question
# (the runtime's shared.py has it, settings.py reads the variable and checks
# it; tests/test_render.py checks the two agree).
DEFAULT_MODEL_ACTIVITY_TIMEOUT = 60

# Top-level modules the generated service imports; a package with one of
# these names would shadow it.
TAKEN_MODULE_NAMES = {"agents", "openai", "temporalio", "tests", "test"} | set(sys.stdlib_module_names)
# The generated imports name the package on one line each (`from
# <package>.backends.daytona import ...`): a longer name would push them
# past the generated project's line length.
LONGEST_PACKAGE_NAME = 30


def matches(pattern: str, allowed: str, longest: int = 10**6) -> Check:
    def check(answer: str, value: object, answers: Mapping[str, object]) -> str | None:
        text = str(value)
        return None if re.fullmatch(pattern, text) and len(text) <= longest else f"use {allowed}"

    return check


def whole_number(low: int, high: int, unit: str) -> Check:
    def check(answer: str, value: object, answers: Mapping[str, object]) -> str | None:
        text = str(value).strip()
        if isinstance(value, bool) or not re.fullmatch(r"[0-9]+", text) or not low <= int(text) <= high:
            return f"use a whole number from {low} to {high} {unit}"
        return None

    return check


def one_line(required: bool) -> Check:
    def check(answer: str, value: object, answers: Mapping[str, object]) -> str | None:
        if required and not str(value).strip():
            return "it must not be empty"
        if any(ord(ch) < 32 for ch in str(value)):
            return "it must be a single line without control characters"
        return None

    return check


def one_of(answer: str, value: object, answers: Mapping[str, object]) -> str | None:
    return None if value in CHOICES[answer] else f"choose one of {', '.join(CHOICES[answer])}"


def short_package_name(answer: str, value: object, answers: Mapping[str, object]) -> str | None:
    if len(str(value)) <= LONGEST_PACKAGE_NAME:
        return None
    made = ", made by default from project_name" if value == str(answers["project_slug"]).replace("-", "_") else ""
    return (
        f"it is {len(str(value))} characters long{made}; choose a shorter package_name, at most "
        f"{LONGEST_PACKAGE_NAME} characters (the service's imports name it on one line)"
    )


# The top-level modules of each backend's SDK, which the service imports.
SDK_MODULES = {name: backend["sdk_modules"] for name, backend in CATALOG.items()}


def free_package_name(answer: str, value: object, answers: Mapping[str, object]) -> str | None:
    if keyword.iskeyword(str(value)) or value in TAKEN_MODULE_NAMES:
        return "it is a Python keyword or the name of a module the service imports; choose another"
    for backend in generated_backends(answers):
        if value in SDK_MODULES.get(backend, []):
            return f"it is the name of the {backend} SDK's module, which the service imports; choose another"
    return None


def outlasts_every_activity(answer: str, value: object, answers: Mapping[str, object]) -> str | None:
    longest = max(int(str(answers["sandbox_activity_timeout_seconds"])), DEFAULT_MODEL_ACTIVITY_TIMEOUT)
    return (
        None if int(str(value)) >= longest else f"it must be at least the longest activity timeout ({longest} seconds)"
    )


def outlasts_the_approval_wait(answer: str, value: object, answers: Mapping[str, object]) -> str | None:
    if answers["approval"] == "none":
        return None
    wait = int(str(answers["approval_timeout_seconds"]))
    if int(str(value)) > wait:
        return None
    return f"a run waits up to approval_timeout_seconds ({wait}) for each approval: give it longer than that"


# The longest a sandbox of these backends may live (each provider's limit:
# the highest value of its lifetime option in the catalog): the provider ends
# it then, workspace and all, so a run of a service with one of them lasts no
# longer.
LONGEST_SANDBOX = {
    name: min(option["high"] for option in backend["options"].values() if option.get("lifetime"))
    for name, backend in CATALOG.items()
    if any(option.get("lifetime") for option in backend["options"].values())
}


def option_variable(backend: str, key: str) -> str:
    """The worker's environment variable of a backend's option:
    "DAYTONA_SANDBOX_IMAGE" for Daytona's "image" (the runtime's backends.variable())."""
    return f"{backend.upper()}_SANDBOX_{key.upper()}"


def option_default(option: Mapping[str, Any], answers: Mapping[str, object]) -> str:
    """An option's default, as its variable would say it: a lifetime without
    one is the longest run (at most the option's highest), Modal's app the
    project's name, a choice its first."""
    kind = option["kind"]
    if kind == "number" and "default" not in option:
        return str(min(int(str(answers["workflow_execution_timeout_seconds"])), option["high"]))
    if option.get("default_is_service_name"):
        return str(answers["project_slug"])
    if kind == "choice":
        return str(option["choices"][0])
    default = option.get("default", "")
    return ("true" if default else "false") if isinstance(default, bool) else str(default)


def option_allowed(option: Mapping[str, Any]) -> str:
    """What an option's value may be, in words, as the worker's refusal says it."""
    kind = option["kind"]
    if kind == "number":
        return f"a whole number of {option['unit']} from {option['low']} to {option['high']}"
    if kind == "yes_no":
        return "true or false"
    if kind == "choice":
        return f"{', '.join(option['choices'][:-1])} or {option['choices'][-1]}"
    if kind == "image":
        return KINDS["image"]["allowed"]
    if kind == "name":
        return f"{option['what']} {KINDS['name']['allowed']}"
    return str(option["allowed"])


def backend_options(backend: str, answers: Mapping[str, object]) -> list[dict[str, Any]]:
    """Each option of ``backend``: its variable, its default as its variable
    says it, what it allows, and its declaration in the catalog."""
    return [
        {
            "lifetime": False,
            "excludes": "",
            **option,
            "variable": option_variable(backend, key),
            "default": option_default(option, answers),
            "allowed": option_allowed(option),
        }
        for key, option in CATALOG[backend]["options"].items()
    ]


def within_the_sandboxes_life(answer: str, value: object, answers: Mapping[str, object]) -> str | None:
    for backend in generated_backends(answers):
        longest = LONGEST_SANDBOX.get(backend)
        if longest is not None and int(str(value)) > longest:
            return f"{backend} ends a sandbox, workspace and all, after {longest} seconds at most: use at most {longest}"
    return None


def additional_backends(answer: str, value: object, answers: Mapping[str, object]) -> str | None:
    extras = items(value)
    for extra in extras:
        if extra not in BACKENDS:
            return f"{extra!r} is not a backend; use a comma-separated list of {', '.join(BACKENDS)}, or nothing"
        if extra == answers["sandbox_backend"]:
            return f"{extra!r} is already the primary sandbox_backend"
        if extra == answers["sandbox_provider_name"]:
            return (
                f"each additional backend registers under its own name, and {extra!r} is already "
                "the sandbox_provider_name; choose another sandbox_provider_name"
            )
    return "name each backend once" if len(set(extras)) != len(extras) else None


def env_var_names(answer: str, value: object, answers: Mapping[str, object]) -> str | None:
    names = items(value)
    for name in names:
        if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name) or len(name) > 100:
            return (
                f"{name!r} is not an environment variable name; use comma-separated names of "
                "uppercase letters, digits and underscores, not starting with a digit, or nothing"
            )
    return "name each variable once" if len(set(names)) != len(names) else None


# (answer, check), checked in this order; the first broken rule is the one
# reported. The comma-separated answers are judged by their items; an error
# line still shows the answer as it was typed. A backend's own settings
# (image, template, snapshot, region, network, lifetime...) are no answers:
# the runtime reads them from the worker's environment and checks them when
# the worker starts.
RULES: list[tuple[str, Check]] = [
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
    ("workflow_execution_timeout_seconds", within_the_sandboxes_life),
    ("package_name", free_package_name),
    ("sandbox_secret_env_vars", env_var_names),
]


def judged(answer: str, check: Check, answers: Mapping[str, object]) -> str:
    """The line saying how ``answers`` break this rule of ``answer``, or "".
    KeyError: an answer the rule reads has not been given."""
    value = answers[answer]
    allowed = check(answer, value, answers)
    return f"{answer}={value!r} is not allowed: {allowed}." if allowed else ""


def judged_at(question: str, answer: str, check: Check, answers: Mapping[str, object]) -> bool:
    """Whether copier's question ``question`` judges this rule of ``answer``:
    every answer the rule reads has been given, and it is this question's
    rule or one that could not be judged without this answer (the package
    name must not shadow an additional backend's SDK, say)."""
    try:
        judged(answer, check, answers)
    except KeyError:
        return False  # it waits for an answer not given yet
    if answer == question:
        return True
    try:
        judged(answer, check, {name: value for name, value in answers.items() if name != question})
    except KeyError:
        return True
    return False


def refusal(answers: Mapping[str, object], question: str | None = None) -> str:
    """The first rule the answers break, as one line that names the answer,
    shows its value and says what is allowed; empty when they break none.
    ``question``: copier's, asked with the answers given so far; only the
    rules it judges (``judged_at``)."""
    for answer, check in RULES:
        if question is not None and not judged_at(question, answer, check, answers):
            continue
        if line := judged(answer, check, answers):
            return line
    return ""


# Marks the exception stop_at_refusal raises, so that cookiecutter's logger
# (in this process, and across the re-imports of this module) knows it.
REFUSED = "sandbox_agent_template_refusal"


def stop_at_refusal(answers: Mapping[str, object]) -> str:
    """For cookiecutter's pre-generation hook, as it is rendered, in
    cookiecutter's own process: the first rule the answers break stops
    generation with cookiecutter's FailedHookException, whose message is the
    rule's one line. Cookiecutter then removes the directory it made and its
    command prints that message, alone: the traceback its logger would write
    first (hooks.py, run_hook_from_repo_dir) is dropped for this exception
    only. Empty when no rule is broken."""
    line = refusal(answers)
    if not line:
        return ""
    from cookiecutter.exceptions import FailedHookException

    stop = FailedHookException(f"ERROR: {line}")
    setattr(stop, REFUSED, True)
    raise stop


def _not_a_refusals_traceback(record: logging.LogRecord) -> bool:
    """Cookiecutter logs a failed hook with its traceback before its command
    prints the exception's message: for a refusal, the message alone."""
    return not (record.exc_info and getattr(record.exc_info[1], REFUSED, False))


def unused_files(answers: Mapping[str, object]) -> list[str]:
    """The template's files (and directories) that a project with these
    answers leaves out, relative to its root: the tests of backends not
    chosen (the project reads as if written for its backends alone), tests
    of features not chosen, the approval tests and docs without approvals,
    the recorded histories of the other kind, the Kubernetes objects of the
    other shape, the license file of "none"."""
    derived = derive(answers)
    unused = []
    for backend in BACKENDS:
        if backend not in derived.backends:
            # A backend's own tests (tests/test_docker.py, say) go with it.
            if (PROJECT / "tests" / f"test_{backend}.py").exists():
                unused.append(f"tests/test_{backend}.py")
    # On Kubernetes, a sandbox that lives on a worker's pod needs the pod's
    # name and volume back when it restarts: a StatefulSet. Remote sandboxes
    # need neither: a Deployment, or the worker controller's Deployments
    # (one per build, whose pods come back under new names).
    if derived.host_bound_backends:
        unused += ["deploy/k8s/deployment.yaml", "deploy/worker-controller"]
    else:
        unused.append("deploy/k8s/statefulset.yaml")
    # Sandbox affinity is for the backends whose sandbox can live on a
    # worker's host: a project with remote backends alone has no two-host
    # test (the runtime's suite proves affinity, and a remote sandbox's
    # moves, once).
    # A run that moves between workers with its sandbox: the runtime's suite
    # proves it for a service that also has sandboxes on its hosts; a
    # project with remote backends alone proves it under its own names.
    if not derived.host_bound_backends:
        unused.append("tests/test_affinity_processes.py")
    else:
        unused.append("tests/test_remote_sandboxes.py")
    # Without approvals, no approval code at all.
    if answers["approval"] == "none":
        unused.append("docs/approvals.md")
    # The recorded histories a project replays are the ones its workflow
    # makes (scripts/record_histories.py): with approvals or without, and
    # with the step that asks where a sandbox lives or, remote backends
    # alone, without it.
    kept = history_kind(answers)
    for history in sorted((PROJECT / "tests" / "histories").glob("*.json")):
        if not history.name.startswith(f"{kept}.") or (
            history.name.endswith(".encrypted.json") and not has_encrypted_history(answers)
        ):
            unused.append(f"tests/histories/{history.name}")
    # "none" means all rights reserved: no license text at all.
    if answers["license"] == "none":
        unused.append("LICENSE")
    return unused


# The provider name scripts/record_histories.py records the encrypted history under.
ENCRYPTED_HISTORY_PROVIDER = "local"


def has_encrypted_history(answers: Mapping[str, object]) -> bool:
    """Whether a project ships the history recorded with encryption on
    (tests/histories/scripted-chain.encrypted.json). Its request is
    ciphertext, provider and all, so it cannot become a template: it replays
    only in the kind it was recorded in, under the provider name it was
    recorded with."""
    return (
        history_kind(answers) == "scripted-chain"
        and answers["sandbox_provider_name"] == ENCRYPTED_HISTORY_PROVIDER
    )


def history_kind(answers: Mapping[str, object]) -> str:
    """The kind of the recorded histories (tests/histories/<kind>.run-N.json)
    a project with these answers replays."""
    kind = "scripted-chain" if answers["approval"] == "none" else "approved-chain"
    return kind if derive(answers).host_bound_backends else f"remote-{kind}"


def answers_json(answers: Mapping[str, object]) -> str:
    """The answers that made the project, in the order they are asked, as
    JSON: what cruft link and copier copy take to adopt a project made with
    plain Cookiecutter (docs/updating.md). The comma-separated ones are given
    as their items."""
    given = {
        **answers,
        "additional_sandbox_backends": ",".join(items(answers["additional_sandbox_backends"])),
        "sandbox_secret_env_vars": ",".join(items(answers["sandbox_secret_env_vars"])),
    }
    return json.dumps({question: given[question] for question in QUESTIONS}, indent=2, ensure_ascii=False)


def python_versions(answers: Mapping[str, object]) -> list[str]:
    """Every Python the project claims (``requires-python >= python_version``)
    that the template offers: its CI tests each."""
    offered = CHOICES["python_version"]
    return offered[offered.index(str(answers["python_version"])) :]


def slugify(text: object) -> str:
    """The slug of a name ("Sandbox Agent" is "sandbox-agent"), as
    cookiecutter's filter makes it (python-slugify's). Without that package
    (copier alone), the same for names in Latin letters: accents dropped,
    everything but letters and digits a dash."""
    try:
        from slugify import slugify as python_slugify
    except ImportError:
        ascii_text = unicodedata.normalize("NFKD", str(text)).encode("ascii", "ignore").decode()
        ascii_text = re.sub(r"(?<=\d),(?=\d)", "", ascii_text)
        return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return str(python_slugify(str(text)))


# Where every project comes from: the template's public address, which its
# README, docs/updating.md and its citations of the template's docs name.
TEMPLATE_NAME = "sandbox-agent-template"
TEMPLATE_URL = "https://github.com/org/sandbox-agent-template"
# The same, as cookiecutter, cruft and copier take it.
TEMPLATE_ADDRESS = "gh:org/sandbox-agent-template"
# The message of the commit copier adds to its clone of a local template
# with uncommitted changes (copier/_vcs.py): the commit before it is the real one.
COPIER_DRAFT_COMMIT = "Copier automated commit for draft changes"


class Provenance(NamedTuple):
    # The template's own version, as its pyproject.toml says ("unknown" without one).
    version: str
    # The git commit whose files were rendered; "unknown" when they were not
    # a git checkout of the template (a copy, an archive).
    commit: str
    # Whether the files rendered had changes not committed to that commit.
    uncommitted: bool
    # The template's release at that commit (its tag, "v0.2.0"); "" when the
    # commit is no release (RELEASING.md).
    tag: str = ""


# A release's tag: "v" and the version of the template and its runtime.
RELEASE_TAG = re.compile(r"v[0-9]+\.[0-9]+\.[0-9]+")


def release_tag(tags: str) -> str:
    """The newest release among ``tags`` (one a line, as ``git tag`` prints
    them), or ""."""
    releases = [tag for tag in tags.split() if RELEASE_TAG.fullmatch(tag)]
    return max(releases, key=lambda tag: tuple(int(part) for part in tag[1:].split(".")), default="")


def provenance(root: Path = Path(__file__).parent) -> Provenance:
    """What a project says about the template files it was rendered from.
    Cookiecutter renders them where they are (its clone of a git address, or
    a local directory); cruft and copier from a clone at the commit they
    record. Never a guess: what git does not say is "unknown"."""
    try:
        version = str(tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        version = "unknown"

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30, check=True)
        return done.stdout.strip()

    try:
        # The template's own repository, not one it happens to sit inside.
        if Path(git("rev-parse", "--show-toplevel")).resolve() != root.resolve():
            return Provenance(version, "unknown", False)
        if git("log", "-1", "--format=%s") == COPIER_DRAFT_COMMIT:
            commit, uncommitted = git("rev-parse", "HEAD^"), True
        else:
            commit, uncommitted = git("rev-parse", "HEAD"), bool(git("status", "--porcelain"))
        return Provenance(version, commit, uncommitted, release_tag(git("tag", "--points-at", commit)))
    except (OSError, subprocess.SubprocessError):
        return Provenance(version, "unknown", False)


def runtime_version(root: Path = Path(__file__).parent) -> str:
    """The version of the runtime beside the template (its pyproject.toml),
    which a render pins; "unknown" without one."""
    try:
        return str(tomllib.loads((root / RUNTIME_DIRECTORY / "pyproject.toml").read_text())["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


# The runtime library (sandbox_agent_runtime) lives beside the template, in
# this directory of its repository; every project depends on it.
RUNTIME_DIRECTORY = "runtime"
# Copier's clones of a template (copier/_vcs.py: CLONE_PREFIX).
COPIER_CLONE_PREFIX = "copier._vcs.clone."


def _engine_clone(root: Path, answers: Mapping[str, object]) -> bool:
    """Whether ``root`` is a clone an engine made of the template, not a
    directory it was given: cookiecutter says what it was given
    (``_template``) and the directory it renders (``_repo_dir``), the same
    string for a local directory, wherever its config file puts its clones
    (``cookiecutters_dir``); cruft gives ``_template`` alone and always
    renders its own clone; copier's clones are named for it."""
    if "_template" in answers:
        return answers.get("_repo_dir") != answers["_template"]
    return root.name.startswith(COPIER_CLONE_PREFIX)


@functools.cache
def runtime_origin(
    root: Path = Path(__file__).parent, template: str | None = None, repo_dir: str | None = None
) -> dict[str, str]:
    """Where a project takes the runtime from, given the template's root
    and, from cookiecutter or cruft, what they were given (``template``)
    and rendered (``repo_dir``).

    An engine's clone of a repository elsewhere gives that repository at the
    commit it cloned ({"git": url, "rev": commit, "subdirectory": ...}): on
    another machine when its address is a URL, on this one when it is a
    directory (``file://``), so that ``copier copy --vcs-ref OLD`` runs OLD's
    runtime. A template rendered in place (a local checkout, or files outside
    git), or a clone of a checkout's uncommitted changes (copier's draft
    commit), gives its runtime directory ({"path": ...}): the working tree,
    which no commit pins (``runtime_notice`` says so)."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30, check=True)
        return done.stdout.strip()

    def path(directory: Path) -> dict[str, str]:
        return {"path": str((directory / RUNTIME_DIRECTORY).resolve())}

    answers = {} if template is None else {"_template": template, "_repo_dir": repo_dir}
    if not _engine_clone(root, answers):
        return path(root)
    try:
        origin = git("config", "--get", "remote.origin.url")
        draft = git("log", "-1", "--format=%s") == COPIER_DRAFT_COMMIT
        commit = git("rev-parse", "HEAD^" if draft else "HEAD")
    except (OSError, subprocess.SubprocessError):
        return path(root)
    remote = re.match(r"^[a-z][a-z0-9+.-]*://|^[^/]+@[^/]+:", origin) and not origin.startswith("file://")
    if not remote:
        local = Path(origin.removeprefix("file://")).expanduser().resolve()
        if draft or not local.is_dir():
            return path(local if local.is_dir() else root)
        return {"git": local.as_uri(), "rev": commit, "subdirectory": RUNTIME_DIRECTORY}
    url = origin.removesuffix("/").removesuffix(".git")
    return {"git": url, "rev": commit, "subdirectory": RUNTIME_DIRECTORY}


def _origin(answers: Mapping[str, object] | None) -> dict[str, str]:
    """runtime_origin() for the answers an engine renders with (copier's
    and a bare call's have no ``_template``)."""
    answers = answers or {}
    if "_template" not in answers:
        return runtime_origin()
    repo_dir = answers.get("_repo_dir")
    return runtime_origin(Path(__file__).parent, str(answers["_template"]), None if repo_dir is None else str(repo_dir))


def runtime_source(answers: Mapping[str, object] | None = None) -> str:
    """runtime_origin() as pyproject.toml's [tool.uv.sources] entry (TOML)."""
    return "{ " + ", ".join(f"{key} = {json.dumps(value)}" for key, value in _origin(answers).items()) + " }"


def runtime_directory(answers: Mapping[str, object] | None = None) -> str:
    """The directory on this machine that the runtime's source reads, which
    an image build needs as its named context: the runtime's directory (a
    path source), or the repository (a git source on this machine); else ""."""
    origin = _origin(answers)
    if "path" in origin:
        return origin["path"]
    return urllib.parse.unquote(origin["git"].removeprefix("file://")) if origin["git"].startswith("file://") else ""


def runtime_notice(answers: Mapping[str, object] | None = None) -> str:
    """One line for a project whose runtime no one else can install (empty
    for one pinned at a commit of a repository with an address): it names
    where the runtime is and what to do."""
    origin = _origin(answers)
    if "path" in origin:
        return (
            f"Note: the runtime is {origin['path']}, the template's working tree, unpinned "
            "(uv.lock records that directory, no commit): only this machine can install it. Render from the "
            "template's git address to pin a commit (docs/updating.md, The runtime)."
        )
    if origin["git"].startswith("file://"):
        return (
            f"Note: the runtime is pinned at commit {origin['rev'][:12]} of {origin['git']}, a repository on "
            "this machine: only this machine can install it. Render from the template's git address for a "
            "teammate or CI (docs/updating.md, The runtime)."
        )
    return ""


# The runtime's settings, as its declarations make them (runtime/docs/settings.json,
# which the runtime's tests keep equal to them): read here, not imported, since the
# runtime need not be installed where an engine renders.
RUNTIME_SETTINGS = Path(__file__).parent / RUNTIME_DIRECTORY / "docs" / "settings.json"


def runtime_settings(answers: Mapping[str, object], command: str) -> list[dict[str, str]]:
    """The runtime's settings ``command`` ("worker", "starter", "codec server",
    "API") of a project of these answers reads, each with its name, one line
    of help and the value an example shows."""
    derived = derive(answers)
    when = {
        "": True,
        "approvals": answers.get("approval", "none") != "none",
        "host-bound backend": bool(derived.host_bound_backends),
        "docker backend": "docker" in generated_backends(answers),
    }
    declared = json.loads(RUNTIME_SETTINGS.read_text())
    return [setting for setting in declared if command in setting["readers"] and when[setting["when"]]]


def runtime_reference(answers: Mapping[str, object] | None = None) -> str:
    """The address of the runtime's settings reference at the commit a project
    pins (the template's main branch for one that pins none)."""
    commit = _origin(answers).get("rev", "main")
    return f"{TEMPLATE_URL}/blob/{commit}/{RUNTIME_DIRECTORY}/docs/settings.md"


class DerivedAnswers(Extension):
    """One Jinja filter per fact, each applied to ``cookiecutter``."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        # `cruft update` renders the project's old template commit and then the
        # new one in one process. Forgetting this module here makes the next
        # render import it again, as the new commit has it; otherwise Python
        # would reuse the old one, and a filter added since would be missing.
        sys.modules.pop(__name__, None)
        environment.filters.update(
            backends=generated_backends,
            additional_backends=lambda answers: derive(answers).additional_backends,
            remote_backends=lambda answers: derive(answers).remote_backends,
            host_bound_backends=lambda answers: derive(answers).host_bound_backends,
            secret_env_vars=lambda answers: derive(answers).secret_env_vars,
            providers=lambda answers: derive(answers).providers,
            refusal=refusal,
            stop_at_refusal=stop_at_refusal,
            unused_files=unused_files,
            python_versions=python_versions,
            answers_json=answers_json,
            items=items,
            has_encrypted_history=has_encrypted_history,
            runtime_settings=runtime_settings,
        )
        # For the recorded histories (tests/histories/), whose payloads are
        # base64: the workflow's input, a RunRequest naming the provider, is one.
        environment.filters["b64encode"] = lambda text: base64.b64encode(str(text).encode()).decode()
        environment.globals["choices"] = CHOICES
        # The catalog of backends, and each one's options as the answers make them.
        environment.globals["catalog"] = CATALOG
        environment.filters["backend_options"] = lambda answers, backend: backend_options(backend, answers)
        environment.filters["extra"] = lambda backend: CATALOG[backend]["extra"]
        hooks_logger = logging.getLogger("cookiecutter.hooks")
        if not any(getattr(f, "__name__", "") == _not_a_refusals_traceback.__name__ for f in hooks_logger.filters):
            hooks_logger.addFilter(_not_a_refusals_traceback)
        environment.globals["default_model_activity_timeout"] = DEFAULT_MODEL_ACTIVITY_TIMEOUT
        # The copyright line's year (cookiecutter's {% now %} tag is not copier's).
        environment.globals["this_year"] = lambda: str(datetime.now(UTC).year)
        # Where the project came from (README.md, docs/updating.md).
        environment.globals["template_name"] = TEMPLATE_NAME
        environment.globals["template_url"] = TEMPLATE_URL
        environment.globals["template_address"] = TEMPLATE_ADDRESS
        environment.globals["template_provenance"] = provenance
        # Where the project takes the runtime from (pyproject.toml).
        environment.globals["runtime_source"] = runtime_source
        environment.globals["runtime_directory"] = runtime_directory
        environment.globals["runtime_notice"] = runtime_notice
        environment.globals["runtime_reference"] = runtime_reference
        environment.globals["runtime_version"] = runtime_version


class CookiecutterNamespace(ContextHook):
    """For copier: the answers as every template file reads them, under
    ``cookiecutter`` (one template tree serves both engines), with what
    cookiecutter's environment has and copier's lacks: the ``slugify``
    filter and includes from ``templates/``."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        environment.filters.setdefault("slugify", slugify)
        loader: Any = environment.loader
        loader.searchpath.append(str(Path(__file__).with_name("templates")))

    def hook(self, context: dict[str, Any]) -> None:
        context["cookiecutter"] = {answer: context[answer] for answer in QUESTIONS if answer in context}
