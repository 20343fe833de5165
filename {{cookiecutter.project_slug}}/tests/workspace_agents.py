"""The service's workflow with another agent than agent.py's, as a team
would write it there: one that brings files of its own (``default_manifest``)
and one that answers in a structure (``output_type``). Everything else is the
service's code; tests/test_inputs_outputs.py registers them on test workers."""

from dataclasses import replace
from typing import Any

from agents.sandbox import SandboxAgent
from agents.sandbox.entries import File
from agents.sandbox.manifest import Manifest
from pydantic import BaseModel
from temporalio import workflow

from sandbox_agent_runtime.chain import Carried
from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
from sandbox_agent_runtime.shared import WORKFLOW_TYPE

from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow

# What the agent's own file holds.
NOTES = b"notes the agent brings with it\n"


@workflow.defn(name="AgentWithFilesWorkflow")
class AgentWithFilesWorkflow(SandboxAgentWorkflow):
    """An agent whose workspace starts with ``notes.txt`` (its default_manifest)."""

    def agent(self) -> SandboxAgent[Any]:
        own = Manifest(entries={"notes.txt": File(content=NOTES)})
        return replace(super().agent(), default_manifest=own)

    @workflow.run
    async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        return await super().run(request, carried)


class Summary(BaseModel):
    """What the structured agent answers with."""

    rows: int
    columns: list[str]


@workflow.defn(name=WORKFLOW_TYPE)
class StructuredAnswerWorkflow(SandboxAgentWorkflow):
    """An agent whose answer is a ``Summary`` (its output_type), registered
    under the service's own workflow type, so the starter starts it."""

    def agent(self) -> SandboxAgent[Any]:
        return replace(super().agent(), output_type=Summary)

    @workflow.run
    async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        return await super().run(request, carried)
