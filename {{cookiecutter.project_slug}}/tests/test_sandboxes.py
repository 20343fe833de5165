{%- set backends = cookiecutter | backends -%}
"""The sandboxes command (docs/sandboxes.md): the page's commands, run as
written against a real Temporal service, exit 0 and say what they did; a bad
``--grace`` is refused in one line, status 2. (The runtime's tests prove a
terminated run's workspace and container removed past the grace, never an
open run's or another service's.)"""

import asyncio
{%- if "docker" in backends %}
import os
{%- endif %}
import re
import tempfile
from pathlib import Path

from temporalio.client import Client

from sandbox_agent_runtime.testing import SCRIPTS

DOCS = Path(__file__).resolve().parents[1] / "docs" / "sandboxes.md"
COMMAND = "{{ cookiecutter.project_slug }}-sandboxes"
{%- if "docker" in backends %}


def engine_answers() -> bool:
    import docker  # type: ignore[import-untyped]

    try:
        docker.from_env().ping()
    except docker.errors.DockerException:
        return False
    return True
{%- endif %}


async def run(arguments: list[str], temporal_client: Client, tmp: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        str(SCRIPTS / COMMAND),
        *arguments,
        env={
            "PATH": "/usr/bin:/bin",
            "TMPDIR": tmp,
            "TEMPORAL_ADDRESS": temporal_client.service_client.config.target_host,
{%- if "docker" in backends %}
            **({"DOCKER_HOST": os.environ["DOCKER_HOST"]} if "DOCKER_HOST" in os.environ else {}),
{%- endif %}
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_the_docs_commands_run(temporal_client: Client) -> None:
    shown = re.findall(rf"^uv run --env-file \.env {COMMAND} (.*)$", DOCS.read_text(), re.M)
    assert shown == ["list", "reap --grace 600"]
    with tempfile.TemporaryDirectory() as tmp:
        listed = await run(shown[0].split(), temporal_client, tmp)
        reaped = await run(shown[1].split(), temporal_client, tmp)
        refused = await run(["reap", "--grace", "soon"], temporal_client, tmp)

{%- if "docker" in backends %}
    if not engine_answers():
        # Status 1, one line: the engine is a backend that cannot be reached.
        for status, out, err in (listed, reaped):
            assert (status, out) == (1, "")
            assert err.startswith("Cannot list the sandboxes of docker: ")
            assert len(err.splitlines()) == 1
        return
{%- endif %}
    assert listed == (0, "", "")
    assert reaped[:2] == (0, "Removed 0 sandboxes.\n")
    assert refused[0] == 2 and refused[1] == ""
    assert refused[2].splitlines() == [
        f"{COMMAND} reap: argument --grace: 'soon' is not a whole number of seconds (0 or more)"
    ]
