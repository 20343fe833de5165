"""The service's real worker, its agent talking to another model than
agent.py's, as a team sets MODEL there (a ``litellm/<provider>/<model>`` one:
litellm_models.py):
``python -m sandbox_agent_runtime.testing.other_model_worker <package> <model>``,
``<package>`` the project's import package. Everything but the agent's model
(settings, connection, plugin, model provider, signals) is the real worker's.

The workflow type, a subclass of the project's registered under the
service's own name (so the starter starts it), is defined in this module as
imported by its name, not as ``__main__``: the workflow sandbox finds a
workflow type in its module (passed through, as the whole runtime is)."""

import importlib
import sys
from dataclasses import replace
from typing import Any

from agents.sandbox import SandboxAgent

from sandbox_agent_runtime.chain import Carried
from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
from sandbox_agent_runtime.shared import WORKFLOW_TYPE
from sandbox_agent_runtime.testing.registration import workflow_type


def define(base: Any, model: str) -> type[Any]:
    """``base``, the project's workflow type, with its agent's model ``model``."""

    class OtherModelWorkflow(base):  # type: ignore[misc]
        def agent(self) -> SandboxAgent[Any]:
            return replace(super().agent(), model=model)

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    return workflow_type(OtherModelWorkflow, WORKFLOW_TYPE)


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(f"usage: python -m {__spec__.name if __spec__ else __name__} <package> <model>")
    package, model = sys.argv.pop(1), sys.argv.pop(1)
    worker: Any = importlib.import_module(f"{package}.worker")
    this: Any = importlib.import_module("sandbox_agent_runtime.testing.other_model_worker")
    this.OtherModelWorkflow = this.define(worker.SandboxAgentWorkflow, model)
    # The project's worker command, with its workflow type swapped.
    worker.SandboxAgentWorkflow = this.OtherModelWorkflow
    worker.cli()


if __name__ == "__main__":
    main()
