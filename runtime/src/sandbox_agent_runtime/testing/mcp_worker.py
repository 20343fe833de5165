"""A worker process of the service's workflow with the stateful COUNTER
server (mcp_agents.py), for a test that kills it part-way through a run:
``python -m sandbox_agent_runtime.testing.mcp_worker <package> <temporal address> <notes>``.
Its scripted model calls ``visits`` until the conversation holds
``STALL_AFTER`` results, then never answers again; the process prints
"ready" once it polls, and runs until it is killed."""

import asyncio
import importlib
import sys
from pathlib import Path
from typing import Any

from agents import ModelResponse
from temporalio.client import Client

from sandbox_agent_runtime.testing.mcp_server import VISITS
from sandbox_agent_runtime.testing.registration import Project, use
from sandbox_agent_runtime.testing.scripted_model import Call, ScriptedModel, tool_outputs

# The calls of the run: the first worker makes STALL_AFTER of them.
CALLS, STALL_AFTER = 4, 2


def counting() -> list[Call]:
    """The model's steps: CALLS calls of ``visits``."""
    return [Call(VISITS, "{}")] * CALLS


class StallsAfterTwoVisits(ScriptedModel):
    """The scripted model, which waits for ever once STALL_AFTER calls were made."""

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        if len(tool_outputs(input)) >= STALL_AFTER:
            await asyncio.Future()
        return await super().get_response(system_instructions, input, *args, **kwargs)


async def serve(address: str, notes: Path) -> None:
    from sandbox_agent_runtime.testing.mcp_agents import CounterAgentWorkflow, mcp_providers
    from sandbox_agent_runtime.testing.support import running_worker

    client = await Client.connect(address)
    async with running_worker(
        client,
        StallsAfterTwoVisits(counting()),
        workflows=[CounterAgentWorkflow],
        mcp_servers=mcp_providers("http://unused.invalid/mcp", notes),
    ):
        print("ready", flush=True)
        await asyncio.Future()


def main() -> None:
    package, address, notes = sys.argv[1:4]
    sys.path.insert(0, str(Path.cwd()))
    agent = importlib.import_module(f"{package}.agent")
    tools = importlib.import_module(f"{package}.tools")
    workflow = importlib.import_module(f"{package}.workflow")
    use(
        Project(
            root=Path.cwd(),
            package=package,
            workflow=workflow.SandboxAgentWorkflow,
            tool_activities=tools.ACTIVITIES,
            model=agent.MODEL,
        )
    )
    asyncio.run(serve(address, Path(notes)))


if __name__ == "__main__":
    main()
