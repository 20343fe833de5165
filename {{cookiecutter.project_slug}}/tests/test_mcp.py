"""docs/mcp.md's example, run: an MCP server's provider on the worker
(tools.py's MCP_SERVERS) and the agent naming it (mcp_server() in
agent.py), against a real MCP server on loopback, the scripted model calling
its tools; the call shown by server and tool, and the server's token, from
the worker's environment, nowhere in the run's history."""

import re
from pathlib import Path

import pytest
from temporalio.client import Client

from sandbox_agent_runtime import EXIT_COMPLETED, follow, start
from sandbox_agent_runtime.testing import (
    Call,
    ScriptedModel,
    activities,
    notebook_mcp_server,
    running_worker,
)

from tests import mcp_example

DOCS = Path(__file__).resolve().parents[1] / "docs" / "mcp.md"
SECRET = "notes-token-that-stays-on-the-worker"


def test_the_docs_show_the_example_as_it_runs() -> None:
    source = Path(mcp_example.__file__).read_text()
    blocks = re.findall(r"# docs/mcp.md: \w+\.py\n(.*?)# docs/mcp.md: end\n", source, re.S)
    assert len(blocks) == 2
    for block in blocks:
        assert f"```python\n{block.strip()}\n```" in DOCS.read_text()


async def test_the_docs_example_gives_the_agent_the_servers_tools(
    temporal_client: Client,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    notes = tmp_path / "notes.txt"
    monkeypatch.setenv("NOTES_MCP_TOKEN", SECRET)
    model = ScriptedModel([Call("write_note", '{"text": "from the docs"}'), Call("whoami", "{}")])
    with notebook_mcp_server(notes, token_from="NOTES_MCP_TOKEN") as url:
        monkeypatch.setenv("NOTES_MCP_URL", url)
        async with running_worker(
            temporal_client,
            model,
            workflows=[mcp_example.NotesAgentWorkflow],
            mcp_servers=mcp_example.MCP_SERVERS,
        ) as (client, _):
            handle = await start(client, "Write a note, then ask who you are.")
            assert await follow(client, handle) == EXIT_COMPLETED

    printed = capsys.readouterr().out
    assert 'mcp      notes write_note {"text": "from the docs"}' in printed
    assert "token accepted" in printed
    assert notes.read_text() == "from the docs\n"
    assert "notes-stateless-call-tool-v2" in [each.name for each in await activities(handle)]
    history = (await handle.fetch_history()).to_json()
    assert SECRET not in history
