"""What the template derives from the answers, derived once.

Two answers are typed as comma-separated text: ``additional_sandbox_backends``
and ``sandbox_secret_env_vars``. They are read here and nowhere else: each item
trimmed, blank items dropped, so ``" e2b , "`` is ``["e2b"]`` and ``","`` is
``[]``, the same as an empty answer. Cookiecutter (and cruft) load this module for every render
(``_extensions`` in cookiecutter.json, from the template's root directory), so
template files and both hooks use its filters, for example::

    {% set backends = cookiecutter | backends -%}

and the template's tests import ``derive``. A fact that several files need
about the chosen backends (a fourth backend, say) belongs here too.

The options of every choice are declared once, in cookiecutter.json beside
this module: ``CHOICES`` reads them (the hooks see it as the Jinja global
``choices``), and ``BACKENDS`` is the sandbox_backend choice's options.
"""

import base64
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from jinja2 import Environment
from jinja2.ext import Extension

# Every answer offered as a choice, with its options in the order cookiecutter.json lists them.
CHOICES: dict[str, list[str]] = {
    answer: options
    for answer, options in json.loads(Path(__file__).with_name("cookiecutter.json").read_text()).items()
    if isinstance(options, list) and not answer.startswith("_")
}
BACKENDS: list[str] = CHOICES["sandbox_backend"]
# The backends whose sandbox can be bound to one worker host.
HOST_BOUND = ("local", "docker")


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


def derive(answers: Mapping[str, object]) -> Derived:
    """The facts every file needs from the answers. The pre-generation hook
    checks the items; this only reads them, so it never fails."""
    additional = items(answers["additional_sandbox_backends"])
    backends = [str(answers["sandbox_backend"]), *additional]
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
            backends=lambda answers: derive(answers).backends,
            additional_backends=lambda answers: derive(answers).additional_backends,
            remote_backends=lambda answers: derive(answers).remote_backends,
            host_bound_backends=lambda answers: derive(answers).host_bound_backends,
            secret_env_vars=lambda answers: derive(answers).secret_env_vars,
            providers=lambda answers: derive(answers).providers,
        )
        # For the recorded histories (tests/histories/), whose payloads are
        # base64: the provider's name, the workflow's second argument, is one.
        environment.filters["b64encode"] = lambda text: base64.b64encode(str(text).encode()).decode()
        environment.globals["choices"] = CHOICES
