"""The starter prints the model's text as it is written when its output is
a terminal, and the answer whole when it is piped: the real worker and
starter as processes, the starter's output a pseudo-terminal, and a scripted
OpenAI-compatible endpoint that streams its answer and holds it halfway."""

import asyncio
import os
import re
import subprocess
from contextlib import suppress

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from sandbox_agent_runtime.client.stream import StreamEvent
from sandbox_agent_runtime.starter.following import latest_answer
from sandbox_agent_runtime.starter.writing import INDENT, Writing
from sandbox_agent_runtime.testing.processes import STARTER, WORKER, service, service_environment
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server

# The answer's events the endpoint sends before it holds the rest: created
# and four deltas of 8 characters.
HELD_AFTER = 5


class Terminal:
    """A process whose standard output is a pseudo-terminal, read as it comes."""

    def __init__(self, command: list[str], environment: dict[str, str]) -> None:
        self.primary, secondary = os.openpty()
        self.process = subprocess.Popen(
            command,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=secondary,
            stderr=secondary,
        )
        os.close(secondary)
        self.shown = b""

    async def read_until(self, pattern: str, timeout: float = 60) -> str:
        """What it printed, once ``pattern`` is in it."""
        loop = asyncio.get_running_loop()
        with suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._read(loop, pattern)
        if not re.search(pattern, self.text()):
            raise AssertionError(f"{pattern!r} not shown within {timeout} s: {self.text()}")
        return self.text()

    async def _read(self, loop: asyncio.AbstractEventLoop, pattern: str) -> None:
        while not re.search(pattern, self.text()):
            try:
                chunk = await loop.run_in_executor(None, os.read, self.primary, 4096)
            except OSError:  # the process ended and closed it
                chunk = b""
            if not chunk:
                return
            self.shown += chunk

    def text(self) -> str:
        # A terminal shows a line feed as a carriage return and a line feed.
        return self.shown.decode(errors="replace").replace("\r\n", "\n")

    async def exit_status(self) -> int:
        """Its exit status, what it printed read to its end."""
        async with asyncio.timeout(90):
            await self._read(asyncio.get_running_loop(), r"(?!)")  # (?!) is never found
        return await asyncio.to_thread(self.process.wait, 60)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self.primary)


@pytest.mark.process
async def test_on_a_terminal_the_answer_is_printed_as_it_is_written_and_once(
    temporal_client: Client,
) -> None:
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(["seq 1 30"]) as model:
        model.hold_after_events = HELD_AFTER
        environment = service_environment(address, model.url)
        async with service(WORKER, environment) as worker:
            await worker.wait_for("Worker polling")
            terminal = Terminal([*STARTER, "Count to 30."], environment)
            try:
                workflow_id = re.search(
                    r"Started workflow (\S+)", await terminal.read_until(r"Started workflow \S+\n")
                ).group(1)  # type: ignore[union-attr]
                assert await asyncio.to_thread(model.reached.wait, 60), "\n".join(worker.output)
                # Half of the answer is written, the rest held: it is on the screen already.
                halfway = await terminal.read_until(rf"\n{INDENT}Chunk ID: \w+\n{INDENT}Wall")
                assert "Answer" not in halfway
                handle = temporal_client.get_workflow_handle(workflow_id)
                assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
                model.release.set()
                status = await terminal.exit_status()
                shown = terminal.text()
            finally:
                terminal.close()
            # The run's answer, as it holds it (it waits for a follow-up).
            answer = str((await latest_answer(temporal_client, workflow_id)).answer)

            # Piped, as a script reads it: the answer whole, after "Answer:".
            async with service([*STARTER, "Count to 30."], environment) as piped:
                piped_status = await piped.exit_status()
            [piped_id] = [line.split()[-1] for line in piped.output if line.startswith("Started")]
            piped_answer = str((await latest_answer(temporal_client, piped_id)).answer)

    assert status == 0, shown
    # The text as it was written, indented under the steps, each line once...
    written = [line.removeprefix(INDENT) for line in shown.splitlines() if line.startswith(INDENT)]
    assert "\n".join(written) == answer.rstrip("\n")
    # ...and not printed again after it.
    assert "Answer: as written above" in shown and "Answer:\n" not in shown
    assert shown.count("\n" + INDENT + "30\n") == 1
    assert piped_status == 0, piped.output
    at = piped.output.index("Answer:")
    assert "\n".join(piped.output[at + 1 :]).startswith(piped_answer.rstrip("\n") + "\n")
    assert not any(line.startswith(INDENT) for line in piped.output)


def test_a_turns_text_read_ahead_of_the_history_waits_for_its_step_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The stream is read apart from the history: while the history's reader
    # waits (at a prompt, or behind under load), the next turn's text may
    # come. It is shown under its own "model turn" line, not the one before.
    writing = Writing(from_start=True)
    first = [
        StreamEvent("turn_started", 0, 0, "agent"),
        StreamEvent("delta", 1, 0, "agent", "one"),
        StreamEvent("turn_ended", 2, 0, "agent", "one"),
    ]
    second = [
        StreamEvent("turn_started", 3, 3, "agent"),
        StreamEvent("delta", 4, 3, "agent", "two"),
        StreamEvent("turn_ended", 5, 3, "agent", "two"),
    ]
    writing.line("  model    turn 1")
    for event in [*first, *second]:
        writing.take(event)
    writing.line("  sandbox  $ echo two")
    writing.line("  model    turn 2")
    assert capsys.readouterr().out.splitlines() == [
        "  model    turn 1",
        f"{INDENT}one",
        "  sandbox  $ echo two",
        "  model    turn 2",
        f"{INDENT}two",
    ]
    # Read (held or shown): the history's reader does not wait for it.
    assert writing.offset == 5
    assert writing.shown_whole("two")


def test_text_held_for_a_line_never_printed_is_shown_at_the_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    writing = Writing(from_start=True)
    writing.take(StreamEvent("turn_started", 0, 0, "agent"))
    writing.take(StreamEvent("delta", 1, 0, "agent", "late"))
    assert capsys.readouterr().out == ""
    writing._release(every=True)  # noqa: SLF001 (caught_up(last=True) at the run's end)
    assert capsys.readouterr().out == f"{INDENT}late"
