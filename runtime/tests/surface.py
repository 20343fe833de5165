"""What a service depends on, as text: the runtime's version, its public
names with their signatures, and the settings it reads.

``surface.txt`` beside the runtime's pyproject.toml keeps the listing of the
released version; test_surface.py fails when the listing moves and the
version does not. Rewrite it after a bump, from the runtime's directory::

    uv run python -m tests.surface --write

What counts as the surface is the two tables below: a module added to
``FACES``, or a settings declaration to ``settings_listing``, is listed too.
"""

import importlib
import inspect
import os
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[1]
SURFACE = RUNTIME / "surface.txt"
REWRITE = "cd runtime && uv run python -m tests.surface --write"

# The modules whose ``__all__`` a service imports from.
FACES = ("sandbox_agent_runtime", "sandbox_agent_runtime.testing")


def version() -> str:
    """The runtime's version, as its pyproject.toml says."""
    return str(tomllib.loads((RUNTIME / "pyproject.toml").read_text())["project"]["version"])


def _shown(thing: object) -> str:
    """A signature or a value as text that does not change from run to run
    (no object's address)."""
    return re.sub(r" at 0x[0-9a-f]+", "", str(thing))


class _Named:
    """A default shown by its name (``os.environ``, not this machine's environment)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


def _signature(thing: object) -> str:
    try:
        signature = inspect.signature(thing)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    parameters = [
        parameter.replace(default=_Named("os.environ"))
        if parameter.default is os.environ
        else parameter
        for parameter in signature.parameters.values()
    ]
    return _shown(signature.replace(parameters=parameters))


def _name_lines(module: str, name: str) -> Iterator[str]:
    thing = getattr(importlib.import_module(module), name)
    if inspect.isclass(thing):
        yield f"{module}.{name}: class{_signature(thing)}"
        for attribute, member in sorted(vars(thing).items()):
            if attribute.startswith("_"):
                continue
            if isinstance(member, property):
                yield f"{module}.{name}.{attribute}: property"
            elif callable(member) or isinstance(member, staticmethod | classmethod):
                yield f"{module}.{name}.{attribute}{_signature(getattr(thing, attribute))}"
    elif callable(thing):
        yield f"{module}.{name}{_signature(thing)}"
    elif isinstance(thing, int | float | str | tuple | type(None)):
        yield f"{module}.{name} = {_shown(repr(thing))}"
    else:
        # A value made when the tests start (keys, paths): its type alone.
        yield f"{module}.{name}: {type(thing).__name__}"


def faces_listing() -> list[str]:
    """Each public name of each face, with its signature (a class's, and its
    public methods' and properties'), or its value."""
    lines: list[str] = []
    for module in FACES:
        names = sorted(importlib.import_module(module).__all__)
        for name in names:
            lines.extend(_name_lines(module, name))
    return lines


def settings_listing() -> list[str]:
    """Each setting's declaration (which commands read it and when, its kind,
    default and bounds, for the stand-in service where a bound depends on
    the service), and each backend's options."""
    from sandbox_agent_runtime.backends import backend_module
    from sandbox_agent_runtime.service import BACKENDS
    from sandbox_agent_runtime.settings.declared import SETTINGS

    lines = []
    for setting in SETTINGS:
        high = setting.high() if callable(setting.high) else setting.high
        lines.append(
            f"setting {setting.name}: {setting.kind}, read by {', '.join(setting.readers)}"
            f"{' with ' + setting.when if setting.when else ''}, default {setting.default!r}"
            f"{' (' + setting.unset + ')' if setting.unset else ''}"
            f"{f', from {setting.low} to {high} {setting.unit}'.rstrip() if high else ''}"
        )
    lines.extend(
        f"backends.{backend}.{key} = {_shown(repr(option))}"
        for backend in BACKENDS
        for key, option in backend_module(backend).OPTIONS.items()
    )
    return lines


def listing() -> str:
    """The whole listing, as surface.txt keeps it."""
    # The testing face's names need a project: the stand-in, as the suite
    # registers it (its service configured).
    importlib.import_module("tests.conftest")
    return "\n".join([f"version {version()}", *faces_listing(), *settings_listing()]) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        SURFACE.write_text(listing())
    else:
        sys.stdout.write(listing())
