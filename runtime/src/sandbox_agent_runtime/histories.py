"""Record runs of the agent's workflow, for the suite to replay before a deploy.

It writes the history of each of the latest runs of this service's workflow
as JSON (the format ``temporal workflow show --output json`` writes); the
suite replays every file against the workflow's current code, so a change
that would make runs in flight fail replay fails the suite, naming the file.
A history holds what its run recorded (the prompt, the model's answers,
command outputs): record from a namespace whose runs may be kept in git.
"""

import argparse
import asyncio
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from temporalio.client import Client

from sandbox_agent_runtime.connection import ConnectionFailed, connect
from sandbox_agent_runtime.exits import exit_after
from sandbox_agent_runtime.owners import of_this_service
from sandbox_agent_runtime.shared import WORKFLOW_TYPE

DEFAULT_DIRECTORY = Path("tests/histories")
DEFAULT_LIMIT = 10


def file_name(workflow_id: str, run_id: str) -> str:
    """A history's file name: its workflow id (what a file system allows of
    it) and its run id, which tells the runs of one chain apart."""
    return f"{re.sub(r'[^A-Za-z0-9._-]', '_', workflow_id)}.{run_id}.json"


async def record(
    client: Client, directory: Path, limit: int, query: str | None = None
) -> list[Path]:
    """Write the histories of the latest runs of this service's workflow (another
    service's runs in the namespace left out).

    Args:
        client: the Temporal client.
        directory: where to write them, as JSON.
        limit: how many runs.
        query: a visibility query selecting the runs; None for all.

    Returns:
        The files written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    query = f"WorkflowType = {WORKFLOW_TYPE!r}" + (f" AND ({query})" if query else "")
    async for run in client.list_workflows(query):
        if len(written) == limit:
            break
        if not of_this_service(run, await run.memo()):
            continue
        history = await client.get_workflow_handle(run.id, run_id=run.run_id).fetch_history()
        path = directory / file_name(run.id, run.run_id)
        path.write_text(history.to_json() + "\n")
        written.append(path)
    return written


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return int(text)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--limit", type=positive, default=DEFAULT_LIMIT, help="runs to record")
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_DIRECTORY,
        help=f"directory (default {DEFAULT_DIRECTORY})",
    )
    parser.add_argument("--query", help="only the runs this visibility query selects")
    arguments = parser.parse_args(argv)

    async def recorded() -> list[Path]:
        return await record(await connect(), arguments.out, arguments.limit, arguments.query)

    try:
        written = asyncio.run(recorded())
    except ConnectionFailed as e:
        sys.exit(str(e))
    for path in written:
        print(path)
    print(f"Recorded {len(written)} run{'s' if len(written) != 1 else ''} of {WORKFLOW_TYPE}.")


def cli() -> NoReturn:
    """The installed command that records runs' histories: ``main()``, then exit
    with its status.
    """
    exit_after(main)


if __name__ == "__main__":
    cli()
