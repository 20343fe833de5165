"""The runtime's API reference: pdoc over its two public modules, as HTML.

    uv run python tests/reference.py -o reference

Some names of ``sandbox_agent_runtime.testing`` are the registered
project's (its worker command, its manifests): the default stand-in is
registered first, as the suite registers it (conftest.py). pdoc reads a
module's own attributes, not its ``__getattr__``: each public name is
imported before pdoc runs."""

import importlib
import sys
from pathlib import Path

import pdoc.__main__

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests import conftest  # noqa: E402, F401  (registers the stand-in project)

FACES = ["sandbox_agent_runtime", "sandbox_agent_runtime.testing"]


def main(argv: list[str]) -> None:
    for name in FACES:
        face = importlib.import_module(name)
        for public in face.__all__:
            setattr(face, public, getattr(face, public))
    pdoc.__main__.cli([*FACES, "--docformat", "google", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
