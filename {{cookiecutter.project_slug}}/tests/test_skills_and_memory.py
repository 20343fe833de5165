"""docs/skills-and-memory.md's example, run as written: its capabilities
added to this service's agent, its SKILL.md in a skills folder (tests/skills,
checked against the page), a conversation through the real worker with a
scripted model that keeps the instructions it is given; and skills sent as a
run's input directory skills/, as the page's starter command sends them, to
this service's own agent."""

import re
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from agents import ModelResponse
from agents.sandbox import SandboxAgent
from temporalio import workflow
from temporalio.client import Client

from sandbox_agent_runtime import (
    END,
    FOLLOW_UP,
    WORKFLOW_TYPE,
    Carried,
    FollowUp,
    RunAnswer,
    RunRequest,
)
from sandbox_agent_runtime.testing import (
    Conversing,
    answered,
    inputs_of,
    project_service,
    running_worker,
)

from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow

# Read again where the workflow's sandbox imports this module: reading the
# page is deterministic (the same file on every replay of the test).
with workflow.unsafe.sandbox_unrestricted():
    PAGE = Path(__file__).parents[1] / "docs" / "skills-and-memory.md"
    BLOCKS = re.findall(r"```(\w+)\n(.*?)```", PAGE.read_text(), re.S)
    EXAMPLE = next(code for kind, code in BLOCKS if kind == "python")
    SKILL_MD = next(code for kind, code in BLOCKS if kind == "markdown")
    COMMANDS = next(code for kind, code in BLOCKS if kind == "sh")

    # The page's example, as agent.py would hold it, beside tests/skills.
    _example: dict[str, Any] = {"__file__": __file__}
    exec(compile(EXAMPLE, str(PAGE), "exec"), _example)
    CAPABILITIES = _example["CAPABILITIES"]

REMEMBERED = "The user prefers tabs to spaces."


@workflow.defn(name="SkillsAndMemoryWorkflow")
class SkillsAndMemoryWorkflow(SandboxAgentWorkflow):
    def agent(self) -> SandboxAgent[None]:
        agent = super().agent()
        return replace(agent, capabilities=[*agent.capabilities, *CAPABILITIES])

    @workflow.run
    async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        return await self.run_agent(request, carried)


class Remembering(Conversing):
    """The conversing model, keeping the instructions of each call."""

    def __init__(self, prompts: list[list[str]]) -> None:
        super().__init__(prompts)
        self.instructions: list[str] = []

    async def get_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.instructions.append(system_instructions or "")
        return await super().get_response(system_instructions, input, *args, **kwargs)


def test_the_skill_in_the_tests_is_the_page_s() -> None:
    skill = Path(__file__).parent / "skills" / "release-notes" / "SKILL.md"
    assert skill.read_text() == SKILL_MD


async def test_the_page_s_skill_reaches_the_agent_and_a_later_prompt_reads_the_memory(
    temporal_client: Client,
) -> None:
    model = Remembering(
        [
            ["cat .agents/release-notes/SKILL.md"],
            [f"mkdir -p memories && echo '{REMEMBERED}' > memories/memory_summary.md"],
            ["echo third"],
        ]
    )
    async with running_worker(temporal_client, model, workflows=[SkillsAndMemoryWorkflow]) as (
        client,
        _,
    ):
        handle = await client.start_workflow(
            "SkillsAndMemoryWorkflow",
            RunRequest("Read the skill.", follow_ups=True),
            id=f"{project_service().task_queue}-{uuid.uuid4()}",
            task_queue=project_service().task_queue,
            result_type=RunAnswer,
        )
        first = await answered(handle, 1)
        listing = model.instructions[0]
        await handle.execute_update(FOLLOW_UP, FollowUp("Remember my preference."))
        await answered(handle, 2)
        before = len(model.instructions)
        await handle.execute_update(FOLLOW_UP, FollowUp("What do you remember?"))
        await answered(handle, 3)
        later = model.instructions[before]
        await handle.execute_update(END)
        await handle.result()

    assert "- release-notes: Write release notes from a list of changes" in listing
    assert first.answer is not None and "# Release notes" in str(first.answer.answer)
    assert REMEMBERED not in listing
    assert REMEMBERED in later


async def test_skills_in_a_runs_inputs_reach_the_agent_as_the_page_sends_them(
    temporal_client: Client, tmp_path: Path
) -> None:
    # The page's starter command sends a directory named skills.
    assert "-starter --input skills/ " in COMMANDS
    skill = tmp_path / "skills" / "release-notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    model = Remembering([["cat skills/release-notes/SKILL.md"]])
    async with running_worker(temporal_client, model) as (client, _):
        answer = await client.execute_workflow(
            WORKFLOW_TYPE,
            RunRequest("Write the notes.", inputs=inputs_of([str(tmp_path / "skills")], False)),
            id=f"{project_service().task_queue}-{uuid.uuid4()}",
            task_queue=project_service().task_queue,
            result_type=RunAnswer,
        )

    assert "- release-notes: Write release notes from a list of changes" in model.instructions[0]
    assert "(file: skills/release-notes)" in model.instructions[0]
    assert "# Release notes" in str(answer.answer)
