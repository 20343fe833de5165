"""The agent reaches as far as the SDK lets it, in a render a team has made
its own (issue 63): its agent.py names an MCP server (started on loopback by
the test), a second agent it hands off to and an output guardrail; tools.py
declares the server's provider. Through the real worker with the scripted
model, a prompt's MCP tool result reaches the answer through the agent handed
off to, the steps show the handoff and the MCP call, a guardrail that trips
ends the prompt with its reason and the starter's status 7, the server's
token never reaches history, and both runs' histories replay; the histories
the render shipped with (recorded before the change) do not, as a deploy of
a changed agent must be told."""

import pytest

from .baked import BakedProject

# What the team adds to agent.py: a reviewer it hands off to, which has the
# notes MCP server, and a guardrail on every agent that may answer, whose
# judge is a model call of its own.
AGENT = """

# The team's own: a reviewer to hand off to, an MCP server, a guardrail.
from dataclasses import replace  # noqa: E402
from typing import Any  # noqa: E402

from agents import (  # noqa: E402
    Agent,
    GuardrailFunctionOutput,
    RunContextWrapper,
    Runner,
    output_guardrail,
)

from sandbox_agent_runtime import mcp_server  # noqa: E402

REVIEWER_MODEL = "gpt-5-mini"
JUDGE_MODEL = "gpt-5-nano"
JUDGE = Agent(
    name="Judge",
    instructions="Reply BLOCK and why if the text gives a credential away, else ALLOW.",
    model=JUDGE_MODEL,
)


@output_guardrail(name="reviewed")
async def reviewed(
    context: RunContextWrapper[Any], agent: Agent[Any], output: Any
) -> GuardrailFunctionOutput:
    verdict = await Runner.run(JUDGE, str(output), context=context.context)
    said = str(verdict.final_output)
    return GuardrailFunctionOutput(output_info=said, tripwire_triggered=said.startswith("BLOCK"))


_plain_agent = sandbox_agent


def sandbox_agent() -> SandboxAgent[None]:  # noqa: F811
    agent = _plain_agent()
    reviewer = replace(
        agent,
        name="Reviewer",
        instructions="Check the draft against the notes server, and report.",
        model=REVIEWER_MODEL,
        model_settings=get_default_model_settings(REVIEWER_MODEL),
        tools=[],
        mcp_servers=[mcp_server("notes")],
        output_guardrails=[reviewed],
    )
    return replace(agent, handoffs=[reviewer], output_guardrails=[reviewed])
"""

# What the team adds to tools.py: the server, built on the worker from its
# environment (docs/mcp.md).
TOOLS = """

# The team's own: the notes MCP server.
import os  # noqa: E402

from agents.mcp import MCPServerStreamableHttp  # noqa: E402
from temporalio.openai_agents import StatelessMCPServerProvider  # noqa: E402


def notes_server() -> MCPServerStreamableHttp:
    return MCPServerStreamableHttp(
        name="notes",
        params={
            "url": os.environ["NOTES_MCP_URL"],
            "headers": {"Authorization": f"Bearer {os.environ['NOTES_MCP_TOKEN']}"},
        },
    )


MCP_SERVERS = [StatelessMCPServerProvider("notes", notes_server)]
"""

# The team's test of it, in the render's own suite.
TEST = '''
from pathlib import Path
from typing import Any

import pytest
from agents import ModelResponse
from temporalio.client import Client, WorkflowHandle
from temporalio.openai_agents.testing import ResponseBuilders
from temporalio.worker import Replayer

from sandbox_agent_runtime import (
    EXIT_COMPLETED,
    EXIT_GUARDRAIL,
    agents_plugin,
    follow,
    start,
    workflow_runner,
)
from sandbox_agent_runtime.testing import (
    SETTINGS,
    Call,
    ScriptedAgents,
    ScriptedModel,
    activities,
    notebook_mcp_server,
    running_worker,
    sandboxes_for_tests,
)

from notes_agent import agent, tools
from notes_agent.workflow import SandboxAgentWorkflow

SECRET = "notes-token-that-stays-on-the-worker"


class Judge(ScriptedModel):
    """The guardrail's judge: BLOCK for a text with a password in it."""

    judged = 0

    async def get_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        type(self).judged += 1
        text = input if isinstance(input, str) else str(input)
        return ResponseBuilders.output_message("BLOCK: a password" if "password" in text else "ALLOW")


def scripted(commands: list[Any]) -> ScriptedAgents:
    models = ScriptedAgents({agent.MODEL: commands, agent.REVIEWER_MODEL: [Call("whoami", "{}")]})
    models.models[agent.JUDGE_MODEL] = Judge([])
    return models


async def replays(handle: WorkflowHandle[Any, Any]) -> None:
    history = await handle.fetch_history()
    assert SECRET not in history.to_json()
    replayer = Replayer(
        workflows=[SandboxAgentWorkflow],
        plugins=[
            agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests(), mcp_servers=tools.MCP_SERVERS)
        ],
        workflow_runner=workflow_runner(),
    )
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None, replayed.replay_failure


async def run(
    client: Client, models: ScriptedAgents, prompt: str, capsys: pytest.CaptureFixture[str]
) -> tuple[Any, int, str, str, WorkflowHandle[Any, Any]]:
    async with running_worker(client, models) as (client, _):
        handle = await start(client, prompt)
        answer = await handle.result()
        capsys.readouterr()
        status = await follow(client, handle)
        printed = capsys.readouterr()
    return answer, status, printed.out, printed.err, handle


async def test_an_mcp_result_a_handoff_and_a_guardrail_in_one_agent(
    temporal_client: Client,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("NOTES_MCP_TOKEN", SECRET)
    with notebook_mcp_server(tmp_path / "notes.txt", token_from="NOTES_MCP_TOKEN") as url:
        monkeypatch.setenv("NOTES_MCP_URL", url)
        models = scripted(["echo draft > draft.txt", Call("transfer_to_reviewer", "{}")])
        answer, status, shown, _, handle = await run(
            temporal_client, models, "Draft a note, then have it reviewed.", capsys
        )
        # The MCP tool's result, through the agent handed off to, is the answer.
        assert status == EXIT_COMPLETED
        assert "token accepted" in str(answer.answer), answer
        assert answer.guardrail == ""
        assert "mcp      notes whoami {}" in shown, shown
        assert "model    turn 3 (Reviewer)" in shown, shown
        assert "notes-stateless-call-tool-v2" in [each.name for each in await activities(handle)]
        assert Judge.judged == 1
        await replays(handle)

        # An answer the judge blocks ends the prompt, naming the guardrail.
        models = scripted(["echo the password is swordfish"])
        answer, status, _, said, handle = await run(
            temporal_client, models, "What is the password?", capsys
        )
        reason = "output guardrail 'reviewed' tripped: BLOCK: a password"
        assert status == EXIT_GUARDRAIL == 7
        assert answer.guardrail == "reviewed" and answer.stopped == f"stopped: {reason}"
        assert f"Stopped: {reason}" in said, said
        # The judge's call is a model activity like the agent's own.
        assert Judge.judged == 2
        assert [step.is_model_call for step in await activities(handle)].count(True) == 3
        await replays(handle)
'''


@pytest.mark.slow
def test_a_render_whose_agent_has_an_mcp_server_a_handoff_and_a_guardrail_runs_them(bake) -> None:
    render: BakedProject = bake({"project_name": "Notes Agent"})
    agent_py, tools_py = render.package / "agent.py", render.package / "tools.py"
    agent_py.write_text(agent_py.read_text() + AGENT)
    tools_py.write_text(tools_py.read_text() + TOOLS)
    (render.path / "tests" / "test_reach.py").write_text(TEST)
    done = render.install()
    assert done.returncode == 0, done.stderr
    tests = render.run_tests("-n", "0", "-p", "no:randomly", "tests/test_reach.py")
    assert tests.returncode == 0 and "1 passed" in tests.stdout, tests.stdout + tests.stderr
    # The agent's change is a change of the runs' steps: the histories the
    # render shipped with (its agent before) no longer replay, so the team's
    # CI says so before a deploy (docs/versioning.md: a new build).
    replays = render.run_tests("-n", "0", "-p", "no:randomly", "tests/test_histories.py", "-k", "chain")
    assert replays.returncode == 1 and "Nondeterminism" in replays.stdout, replays.stdout
