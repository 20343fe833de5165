"""Other agents (docs/agents.md): the page's example, read from the page,
runs through the real worker: the agent asks a helper (an agent as a tool),
then hands off to a reviewer, all three in the run's one workspace, and
the steps name the agent of each turn."""

import json
import re
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from sandbox_agent_runtime import EXIT_COMPLETED, follow, start
from sandbox_agent_runtime.testing import (
{%- if cookiecutter.approval != "none" %}
    STARTER_SETTINGS,
{%- endif %}
    Call,
    ScriptedAgents,
    activities,
    running_worker,
    workflow_with_agent,
)

from {{ cookiecutter.package_name }} import agent
from {{ cookiecutter.package_name }}.service import SANDBOX_PROVIDER

PAGE = Path(__file__).resolve().parents[1] / "docs" / "agents.md"


def example() -> dict[str, Any]:
    """What the page's Python example defines, run as the page shows it."""
    [code] = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.DOTALL)
    defined: dict[str, Any] = {}
    exec(compile(code, str(PAGE), "exec"), defined)
    return defined


async def test_the_pages_example_hands_off_and_asks_a_helper_in_one_workspace(
    temporal_client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    defined = example()
    assert agent.MODEL not in (defined["REVIEWER_MODEL"], defined["HELPER_MODEL"])
    models = ScriptedAgents(
        {
            agent.MODEL: [
                "echo agent > notes.txt",
                Call("ask_helper", json.dumps({"input": "Add your line to notes.txt."})),
                Call("transfer_to_reviewer", "{}"),
            ],
            defined["HELPER_MODEL"]: ["echo helper >> notes.txt"],
            defined["REVIEWER_MODEL"]: ["cat notes.txt"],
        }
    )
    workflow = workflow_with_agent(defined["with_other_agents"])
    async with running_worker(temporal_client, models, workflows=[workflow]) as (client, _):
        handle = await start(client, "Write a note, ask the helper, then have it reviewed.")
        answer = (await handle.result()).answer
        names = [step.name for step in await activities(handle)]
        capsys.readouterr()
        assert await follow(client, handle{{ ", STARTER_SETTINGS.approver_key_file" if cookiecutter.approval != "none" }}) == EXIT_COMPLETED
        shown = [line.strip() for line in capsys.readouterr().out.splitlines()]

    # The reviewer read what the agent and the helper wrote.
    assert answer.endswith("Output:\nagent\nhelper\n"), answer
    # Each agent's model was called, the helper's in its nested run too.
    assert set(models.calls) == {agent.MODEL, defined["HELPER_MODEL"], defined["REVIEWER_MODEL"]}
    # One sandbox, removed once.
    assert names.count(f"{SANDBOX_PROVIDER}-sandbox_client_create") == 1
    assert names.count(f"{SANDBOX_PROVIDER}-sandbox_client_delete") == 1
    # The steps say which agent took each turn.
    turns = [line for line in shown if line.startswith("model")]
    assert turns == [
        "model    turn 1",
        "model    turn 2",
        "model    turn 3 (Helper)",
        "model    turn 4 (Helper)",
        "model    turn 5",
        "model    turn 6 (Reviewer)",
        "model    turn 7 (Reviewer)",
    ], shown
