"""The API's page shows the answer as it is written, in headless Chromium:
beside a dev server, the service's worker (in the test, with a scripted model
that streams 8 characters each 10 ms) and an API process, a person starts a
run in the page and sees its text grow under its steps, each state of it a
beginning of the answer, even across a dropped connection (Last-Event-ID:
nothing repeated, nothing missed on screen), then the answer in its place."""

import asyncio
from pathlib import Path

import pytest
from temporalio.client import Client

from sandbox_agent_runtime.testing.api_client import TOKENS, api_process, read_events
from sandbox_agent_runtime.testing.browser import chromium, evaluate, headless_chromium
from sandbox_agent_runtime.testing.processes import service_environment
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import running_worker
from tests.test_api_deltas import batches_of_100_ms
from tests.test_api_page import click, open_page, screenshot, type_into, use_token

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(
        chromium() is None,
        reason="no Chromium on this machine (apt-get install chromium, or set CHROMIUM)",
    ),
]

# What the page shows: the text being written, the answer, and how many steps.
SHOWN = (
    "[document.querySelector('.writing .writing-text')?.textContent ?? null,"
    " document.querySelector('.answer .answer-text')?.textContent ?? null,"
    " document.querySelectorAll('#steps li').length]"
)


async def test_the_page_shows_the_answer_growing_under_its_steps_and_a_reconnect_repeats_nothing(
    temporal_client: Client, tmp_path: Path
) -> None:
    environment = service_environment(
        temporal_client.service_client.config.target_host, "http://127.0.0.1:9"
    )
    async with (
        running_worker(
            temporal_client,
            ScriptedModel(["seq 1 600"], delta_every=0.01),
            settings=batches_of_100_ms(),
        ),
        api_process(environment) as api,
        headless_chromium(str(chromium()), tmp_path / "chromium") as browser,
    ):
        page = await browser.new_page()
        await open_page(page, f"{api.url}/")
        await use_token(page, TOKENS["alice"])
        await type_into(page, "#prompt", "Count to 600.")
        await click(page, "#start-button")
        # What the page shows, every 20 ms, until the answer is there; the
        # connection dropped once the text is under way.
        writing: list[str] = []
        steps_while_writing = 0
        dropped_at = -1
        answer = None
        async with asyncio.timeout(60):
            while answer is None:
                being_written, answer, steps = await evaluate(page, SHOWN)
                if being_written is not None and answer is None:
                    writing.append(being_written)
                    steps_while_writing = max(steps_while_writing, steps)
                    if dropped_at < 0 and len(being_written) > 300:
                        await screenshot(page, tmp_path, "page-writing.png")
                        await evaluate(page, "window.sandboxAgent.dropConnection()")
                        dropped_at = len(writing)
                await asyncio.sleep(0.02)
        workflow_id = await evaluate(page, "document.querySelector('#run-id').textContent")
        connections = await evaluate(page, "document.querySelector('#run').dataset.connections")
        left_writing = await evaluate(page, "document.querySelectorAll('.writing').length")
        async with api.client("alice") as client:
            events = await read_events(client, workflow_id)

    assert answer == next(event.data["text"] for event in events if event.name == "answer")
    # The text grew as it was written, under the steps so far...
    assert len(set(writing)) >= 5, writing
    assert steps_while_writing > 0
    # ...each state of it a beginning of the answer, before and after the
    # drop: nothing shown twice, nothing out of place.
    assert all(answer.startswith(shown) for shown in writing)
    assert [len(shown) for shown in writing] == sorted(len(shown) for shown in writing)
    assert 0 < dropped_at < len(writing) and connections == "2"
    assert len(writing[-1]) > len(writing[dropped_at - 1])
    # The answer took its place.
    assert left_writing == 0
