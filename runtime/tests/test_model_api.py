"""The model endpoint's API (OPENAI_API, model_api.py), with the service's
real worker and starter as processes and a scripted OpenAI-compatible
endpoint that speaks one API alone: a worker set to Chat Completions
completes a run against an endpoint that speaks only that; a worker left on
the Responses API against it fails the run at the first model call, at once,
with one line that says what to set; a value that is neither stops the
worker before it starts, in one line. Over either API, a success (200) that
holds a web page or an error object fails the run at once, after one model
call, with one line naming the endpoint, the status and what came back."""

import json
import subprocess

import pytest
from temporalio.client import Client

from sandbox_agent_runtime.model_api import SHOWN_OF_AN_ANSWER
from sandbox_agent_runtime.shared import CONVERSATION_LIMIT, LONGEST_OUTPUT
from sandbox_agent_runtime.testing.processes import STARTER, WORKER, service, service_environment
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server

pytestmark = pytest.mark.process


async def test_a_worker_set_to_chat_completions_runs_against_an_endpoint_that_speaks_only_that(
    temporal_client: Client,
) -> None:
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(["echo spoken-in-chat"], apis=("chat_completions",)) as model:
        environment = {**service_environment(address, model.url), "OPENAI_API": "chat_completions"}
        async with service(WORKER, environment) as worker:
            await worker.wait_for("Worker polling")
            async with service([*STARTER, "Say it."], environment) as asking:
                status = await asking.exit_status()
        # Left on the Responses API, the worker fails the run at its first call.
        left = service_environment(address, model.url)
        async with service(WORKER, left) as worker:
            await worker.wait_for("Worker polling")
            async with service([*STARTER, "Say it."], left) as refused:
                refused_status = await refused.exit_status(timeout=60)

    assert status == 0, asking.output
    assert "spoken-in-chat" in "\n".join(asking.output)
    assert set(model.apis_called) == {"chat_completions"} and len(model.apis_called) == 2
    assert refused_status == 1, refused.output
    [line] = [line for line in refused.output if line.startswith("Workflow ")]
    assert line.endswith(
        f"the model call failed with an error that retrying cannot fix: The model endpoint "
        f"answered 404 Not Found to {model.url}/responses: it does not serve the Responses API "
        "(OPENAI_API=responses); if it serves Chat Completions, set OPENAI_API=chat_completions, "
        "or point OPENAI_BASE_URL at an endpoint that serves the Responses API"
    ), line
    # No retry: the 404 was the answer.
    assert len(model.apis_called) == 2


# A sign-in page, as an OPENAI_BASE_URL that leads to a proxy's answers.
SIGN_IN_PAGE = (
    b"<!DOCTYPE html>\n<html>\n  <head><title>Sign in</title></head>\n  <body>"
    + b"<p>Please sign in to continue.</p>" * 20
    + b"</body>\n</html>\n"
)
# An error in a 200, as some gateways answer a key without credit.
OUT_OF_QUOTA = json.dumps(
    {
        "error": {
            "message": "You exceeded your current quota, please check your plan.",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
).encode()


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
async def test_a_200_holding_a_web_page_or_an_error_fails_the_run_at_once_in_one_line(
    temporal_client: Client, api: str
) -> None:
    address = temporal_client.service_client.config.target_host
    lines, calls = [], []
    with scripted_openai_server(["echo never-run"], apis=(api,)) as model:
        environment = {**service_environment(address, model.url), "OPENAI_API": api}
        async with service(WORKER, environment) as worker:
            await worker.wait_for("Worker polling")
            for answer in (
                ("text/html; charset=utf-8", SIGN_IN_PAGE),
                ("application/json", OUT_OF_QUOTA),
            ):
                model.answer_200 = answer
                before = model.requests
                async with service([*STARTER, "Say it."], environment) as asking:
                    # Eight attempts would take three minutes.
                    assert await asking.exit_status(timeout=60) == 1, asking.output
                calls.append(model.requests - before)
                [line] = [line for line in asking.output if line.startswith("Workflow ")]
                lines.append(line)

    # One model call each: the answer was the answer.
    assert calls == [1, 1]
    page, quota = lines
    url = f"{model.url}/{'responses' if api == 'responses' else 'chat/completions'}"
    failed = "the model call failed with an error that retrying cannot fix: "
    shown = " ".join(SIGN_IN_PAGE.decode().split())[:SHOWN_OF_AN_ANSWER]
    assert page.endswith(
        f"{failed}The model endpoint answered 200 OK to {url} with text/html, not JSON: "
        f"'{shown}...' (OPENAI_BASE_URL must lead to the model API itself)"
    ), page
    assert quota.endswith(
        f"{failed}The model endpoint answered 200 OK to {url} with an error: "
        "'insufficient_quota: You exceeded your current quota, please check your plan.'"
    ), quota


def test_an_api_that_is_neither_stops_the_worker_in_one_line(temporal_client: Client) -> None:
    address = temporal_client.service_client.config.target_host
    environment = {
        **service_environment(address, "http://127.0.0.1:9"),
        "OPENAI_API": "completions",
    }
    done = subprocess.run(WORKER, env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert line == (
        "OPENAI_API='completions' is not allowed: use responses (OpenAI's Responses API, "
        "the default) or chat_completions (an endpoint that speaks Chat Completions alone)."
    ), line


@pytest.mark.long
async def test_over_chat_completions_a_long_conversation_stays_within_its_limit(
    temporal_client: Client,
) -> None:
    # Chat Completions has no compaction (the Responses API's context_management):
    # what bounds the conversation is the runtime's own cut (chain.bounded()).
    # 18 commands printing 64 KiB each: over CONVERSATION_LIMIT if nothing cut it.
    commands = ["head -c 70000 /dev/zero | tr '\\0' x"] * 18
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(commands, apis=("chat_completions",)) as model:
        environment = {**service_environment(address, model.url), "OPENAI_API": "chat_completions"}
        async with service(WORKER, environment) as worker:
            await worker.wait_for("Worker polling")
            async with service([*STARTER, "Print a lot."], environment) as asking:
                status = await asking.exit_status(timeout=300)

    assert status == 0, asking.output[-5:]
    sizes = [len(json.dumps(body["messages"])) for body in model.bodies]
    assert len(sizes) == 19
    assert max(sizes) <= CONVERSATION_LIMIT + 20_000, sizes
    # Without the cut the last calls would carry every output: 18 x 64 KiB.
    assert sum(LONGEST_OUTPUT for _ in commands) > CONVERSATION_LIMIT
    left_out = [
        body
        for body in model.bodies
        if "earlier items of this conversation were left out" in json.dumps(body)
    ]
    assert left_out and left_out[-1] is model.bodies[-1]
    assert "context_management" not in json.dumps(model.bodies)
