"""The runtime's API reference: pdoc over its two public modules, as HTML.

    uv run python tests/reference.py -o reference

Some names of ``sandbox_agent_runtime.testing`` are the registered
project's (its worker command, its manifests): the default stand-in is
registered first, as the suite registers it (conftest.py)."""

import sys

import pdoc.__main__

import conftest  # noqa: F401  (registers the stand-in project)

FACES = ["sandbox_agent_runtime", "sandbox_agent_runtime.testing"]

if __name__ == "__main__":
    pdoc.__main__.cli([*FACES, "--docformat", "google", *sys.argv[1:]])
