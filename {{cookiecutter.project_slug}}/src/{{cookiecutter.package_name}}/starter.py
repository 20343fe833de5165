"""The starter: asks the agent to do something and prints its answer.

    python -m {{ cookiecutter.package_name }}.starter "Count the files in /etc"

Exit status: 0 when the run completed, 1 when it failed or timed out, 2 when
the Temporal service could not be reached.
"""

import argparse
import asyncio
import sys
import uuid

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.openai_agents import OpenAIAgentsPlugin

from {{ cookiecutter.package_name }}.connection import (
    ConnectionFailed,
    connect,
)
from {{ cookiecutter.package_name }}.shared import (
    TASK_QUEUE,
    WORKFLOW_EXECUTION_TIMEOUT,
)
from {{ cookiecutter.package_name }}.workflow import (
    SandboxAgentWorkflow,
)

DEFAULT_PROMPT = (
    "Write a file holding the first 20 Fibonacci numbers, one per line, "
    "then tell me how many lines it has and what the last one is."
)


async def start(
    client: Client, prompt: str, workflow_id: str | None = None
) -> WorkflowHandle[SandboxAgentWorkflow, str]:
    """Start one run of the agent on the worker's task queue."""
    return await client.start_workflow(
        SandboxAgentWorkflow.run,
        prompt,
        id=workflow_id or f"{TASK_QUEUE}-{uuid.uuid4()}",
        task_queue=TASK_QUEUE,
        execution_timeout=WORKFLOW_EXECUTION_TIMEOUT,
    )


async def run(prompt: str) -> int:
    try:
        client = await connect(plugins=[OpenAIAgentsPlugin()])
    except ConnectionFailed as e:
        print(e, file=sys.stderr)
        return 2
    handle = await start(client, prompt)
    print(f"Started workflow {handle.id}", flush=True)
    try:
        answer = await handle.result()
    except WorkflowFailureError as e:
        # The workflow's own failure says which step failed and why.
        reason = getattr(e.cause, "message", None) or str(e.cause)
        print(f"Workflow {handle.id} failed: {reason}", file=sys.stderr)
        return 1
    print(answer)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompt", nargs="?", default=DEFAULT_PROMPT, help="what to ask the agent")
    args = parser.parse_args()
    sys.exit(asyncio.run(run(args.prompt)))


if __name__ == "__main__":
    main()
