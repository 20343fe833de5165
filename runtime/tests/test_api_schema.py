"""The API serves what its OpenAPI document says: schemathesis, with every
check it has, against the API as a process (beside a real dev server, the
service's real worker and a scripted model), with a caller's bearer token
and the id of the caller's finished run, so that the run's routes are
exercised, reports nothing: no 5xx, no answer its document does not
declare, no schema-valid request refused, no invalid one taken, a 405 with
``Allow``. The document links a started run to its routes, declares each
body and each error as a problem, and its patterns take what the checks take.
docs/api.md."""

import asyncio
import itertools
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client

from sandbox_agent_runtime.api.bodies import prompt_in
from sandbox_agent_runtime.api.document import LAST_EVENT_ID
from sandbox_agent_runtime.api.events import BadEventId, event_id_parts
from sandbox_agent_runtime.api.models import RunBody
from sandbox_agent_runtime.api.problems import Problem
from sandbox_agent_runtime.testing.api_client import TOKENS, ApiProcess, api_process, read_events
from sandbox_agent_runtime.testing.processes import WORKER, service, service_environment
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import no_schedules

# Examples per operation and phase: enough for every status a route
# declares, few enough that the run takes a minute or two.
EXAMPLES = 25
API_SETTINGS = {
    # Runs schemathesis starts stay few: past the bound, a 429.
    "API_RUNS_IN_FLIGHT_PER_CALLER": "3",
    # A repository only on loopback, named by its address: a request's
    # repository is refused before any host is looked up (the worker,
    # without these settings, would refuse it before it clones).
    "REPO_ALLOWED_HOSTS": "127.0.0.1",
    "REPO_ALLOWED_NETWORKS": "127.0.0.0/8",
    # A callback only to loopback, named by its address.
    "CALLBACK_HOSTS": "127.0.0.1",
}


@pytest.fixture(scope="module")
async def api(temporal_client: Client) -> AsyncIterator[ApiProcess]:
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server([]) as model:
        environment = service_environment(address, model.url)
        async with (
            service(WORKER, environment) as worker,
            api_process({**environment, **API_SETTINGS}) as api,
        ):
            await worker.wait_for("Worker polling")
            yield api
            # The schedules schemathesis made would start runs in later tests.
            await no_schedules(temporal_client)


@pytest.mark.process
async def test_schemathesis_with_every_check_reports_nothing(
    api: ApiProcess, tmp_path: Path
) -> None:
    async with api.client() as client:
        started = await client.post("/v1/runs", json={"prompt": "Say done."})
        assert started.status_code == 201, started.text
        run = started.json()["id"]
        # A finished run: its stream ends, so a request for it does too.
        await read_events(client, run)
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        f"""
generation.max-examples = {EXAMPLES}
generation.database = "none"
request-timeout = 30.0
max-stream-events = 100
headers = {{ Authorization = "Bearer {TOKENS["alice"]}" }}

[parameters]
"path.run" = "{run}"
"""
    )
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(config),
        "run",
        f"{api.url}/openapi.json",
        "--checks",
        "all",
        "--seed",
        "62",
        "--no-color",
        "--workers",
        "1",
    ]
    # In a thread: the API's output is read by this event loop as it comes.
    done = await asyncio.to_thread(
        subprocess.run,
        command,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={
            **os.environ,
            "SCHEMATHESIS_HOOKS": "schemathesis_hooks",
            "PYTHONPATH": str(Path(__file__).parent),
            # Straight to the API, on loopback, whatever proxy the machine names.
            "NO_PROXY": "127.0.0.1",
            "no_proxy": "127.0.0.1",
        },
    )
    report = done.stdout + done.stderr
    said = "\n".join(api.process.output[-40:])
    assert done.returncode == 0, report[-20_000:] + "\nThe API said:\n" + said
    print(report)


@pytest.mark.process
async def test_the_document_declares_each_body_each_problem_and_a_started_runs_links(
    api: ApiProcess,
) -> None:
    async with api.client(None) as client:
        document = (await client.get("/openapi.json")).json()
    operations = {
        operation["operationId"]: (path, operation)
        for path, methods in document["paths"].items()
        for operation in methods.values()
    }
    # A run just started links to each of its routes but the decision
    # (which names a call too), by the id it answered with.
    links = operations["start_run"][1]["responses"]["201"]["links"]
    run_routes = {
        name
        for name, (path, _) in operations.items()
        if path.startswith("/v1/runs/{run}") and "{call_id}" not in path
    }
    assert {link["operationId"] for link in links.values()} == run_routes
    assert all(link["parameters"] == {"run": "$response.body#/id"} for link in links.values())
    # Each body is required, and says its fields and which of them are.
    for name, required in [("start_run", ["prompt"]), ("follow_up", ["prompt"])]:
        body = operations[name][1]["requestBody"]
        assert body["required"] is True
        for kind in ("application/json", "multipart/form-data"):
            assert body["content"][kind]["schema"]["required"] == required
    decision = operations["decide"][1]["requestBody"]
    assert decision["required"] is True
    assert decision["content"]["application/json"]["schema"]["required"] == ["run_id", "approve"]
    # Each error is a problem; each JSON answer has its model.
    for name, (_, operation) in operations.items():
        for status, response in operation["responses"].items():
            [(kind, content)] = response["content"].items()
            if int(status) >= 400:
                assert kind == "application/problem+json", (name, status)
                assert content["schema"] == {"$ref": "#/components/schemas/Problem"}
            elif kind == "application/json":
                assert content["schema"]["$ref"].startswith("#/components/schemas/"), name
    assert document["components"]["schemas"]["Problem"]["required"] == [
        "title",
        "status",
        "detail",
        "instance",
    ]


def taken(check: object, value: str) -> bool:
    try:
        check(value)  # type: ignore[operator]
    except (BadEventId, Problem):
        return False
    return True


def test_the_documents_patterns_take_exactly_what_the_checks_take() -> None:
    # Every string of up to four of these characters: white space Python
    # strips and ECMA's \s does not ("\x1c"), and the other way round
    # ("\ufeff"), a digit only str.isdigit() takes ("²").
    alphabet = ["r", ".", "1", "²", " ", "\x1c", "\ufeff", "\u3000", "\n"]
    values = [
        "".join(each) for size in range(5) for each in itertools.product(alphabet, repeat=size)
    ]
    properties = RunBody.model_json_schema()["properties"]
    prompt = properties["prompt"]["pattern"]
    # No class whose characters differ between regular expression engines
    # (Python's \s is str.isspace(), ECMA's is not): the patterns say
    # the same to every client.
    for pattern in (prompt, properties["repo"]["pattern"], LAST_EVENT_ID):
        assert not re.search(r"\\[sSdDwWbB]", pattern), pattern
    for value in values:
        assert bool(re.search(prompt, value)) == taken(lambda v: prompt_in({"prompt": v}), value), (
            repr(value)
        )
        # (Empty: none, from the first event.)
        assert bool(re.fullmatch(LAST_EVENT_ID, value)) == (
            not value or taken(event_id_parts, value)
        ), repr(value)
