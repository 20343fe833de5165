"""A run's callback (callbacks.py, issue 65): a run started with a callback
URL gets one POST when it ends, signed as the Standard Webhooks
specification says (checked here by a verifier of the test's own), retried
with back-off until the receiver answers 2xx, the same webhook-id on every
attempt; the key never in history. Only the servers CALLBACK_HOSTS lists are
called, a loopback, private or link-local address only when listed:
refused at start by the API (422) and the starter (its usage status) in one
line, and by the worker again, before any connection."""

import asyncio
import base64
import dataclasses
import hashlib
import hmac
import http.server
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle, WorkflowHistory
from temporalio.worker import Replayer

from sandbox_agent_runtime import callbacks
from sandbox_agent_runtime.callbacks import CALLBACK_ACTIVITY, CALLBACK_PATCH
from sandbox_agent_runtime.run_request import Input, RunRequest
from sandbox_agent_runtime.settings import BadSetting, callback_key, callback_policy
from sandbox_agent_runtime.shared import END
from sandbox_agent_runtime.starter import EXIT_COMPLETED, EXIT_USAGE, start
from sandbox_agent_runtime.testing.api_client import api_process
from sandbox_agent_runtime.testing.conversing import answered
from sandbox_agent_runtime.testing.long_workflow import ContinuesBetweenPromptsWorkflow
from sandbox_agent_runtime.testing.processes import STARTER, WORKER, service, service_environment
from sandbox_agent_runtime.testing.registration import project, project_service
from sandbox_agent_runtime.testing.repositories import listening
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import (
    SETTINGS,
    running_worker,
    runs_of_chain,
    sandboxes_for_tests,
    started_id,
)
from sandbox_agent_runtime.worker import agents_plugin, workflow_runner

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()


@dataclass
class Delivery:
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A receiver of callbacks on loopback: it answers each POST with the
    next of ``statuses`` (the last one from then on) and records it."""

    statuses: list[int]
    port: int = 0
    deliveries: list[Delivery] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/runs?team=a"


@contextmanager
def receiving(*statuses: int, location: str = "") -> Iterator[Receiver]:
    """A ``Receiver``; a redirect it answers names ``location``."""
    receiver = Receiver(list(statuses))

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            receiver.deliveries.append(
                Delivery({k.lower(): v for k, v in self.headers.items()}, body)
            )
            at = min(len(receiver.deliveries), len(receiver.statuses)) - 1
            self.send_response(receiver.statuses[at])
            if 300 <= receiver.statuses[at] < 400:
                self.send_header("location", location)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def verified(delivery: Delivery, secret: str = SECRET) -> dict[str, Any]:
    """The delivery's message, once its signature is checked as the
    specification says, written apart from the runtime's code: the key is
    the base64 after whsec_; the signed text "{id}.{timestamp}.{body}"; the
    header a list of "v1,<base64 HMAC-SHA256>"; the timestamp within 5 minutes."""
    key = base64.b64decode(secret.split("_", 1)[1])
    message_id = delivery.headers["webhook-id"]
    timestamp = delivery.headers["webhook-timestamp"]
    assert "." not in message_id and timestamp.isdigit()
    assert abs(time.time() - int(timestamp)) < 300
    signed = message_id.encode() + b"." + timestamp.encode() + b"." + delivery.body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    given = [part.split(",", 1) for part in delivery.headers["webhook-signature"].split(" ")]
    assert any(
        version == "v1" and hmac.compare_digest(value, expected) for version, value in given
    ), delivery.headers
    message: dict[str, Any] = json.loads(delivery.body)
    return message


def callback_events(history: WorkflowHistory) -> list[Any]:
    """The callback activity's events: scheduled, started, and how it closed."""
    scheduled = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == CALLBACK_ACTIVITY
    }
    return [
        e
        for e in history.events
        if e.event_id in scheduled
        or {
            e.activity_task_started_event_attributes.scheduled_event_id,
            e.activity_task_completed_event_attributes.scheduled_event_id,
            e.activity_task_failed_event_attributes.scheduled_event_id,
            e.activity_task_timed_out_event_attributes.scheduled_event_id,
        }
        & scheduled
    ]


def refusal(history: WorkflowHistory) -> str:
    """The failure of the run's one callback attempt, "type: message"."""
    events = callback_events(history)
    [failed] = [e for e in events if e.HasField("activity_task_failed_event_attributes")]
    [started] = [e for e in events if e.HasField("activity_task_started_event_attributes")]
    assert started.activity_task_started_event_attributes.attempt == 1
    failure = failed.activity_task_failed_event_attributes.failure
    return f"{failure.application_failure_info.type}: {failure.message}"


def history_bytes(history: WorkflowHistory) -> bytes:
    return history.to_json().encode() + b"".join(e.SerializeToString() for e in history.events)


def replayer(workflows: list[type] | None = None) -> Replayer:
    return Replayer(
        workflows=workflows or [project().workflow],
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
        workflow_runner=workflow_runner(),
    )


def with_callbacks(hosts: str) -> Any:
    return dataclasses.replace(
        SETTINGS,
        callbacks=callback_policy({"CALLBACK_HOSTS": hosts}),
        callback_key=callback_key({"CALLBACK_SECRET": SECRET}),
    )


# ------------------------------------------------------------ the message


@pytest.mark.process
async def test_a_callback_arrives_once_signed_after_the_receiver_failed_twice(
    temporal_client: Client,
) -> None:
    """The worker and the starter as a team runs them: the starter's
    --callback run (a conversation) answers, and is ended; its callback
    reached the receiver on the third attempt (500, a redirect it does not
    follow, then 204), the same webhook-id and a valid signature each time,
    the run's id, state, answer and usage in it; one activity scheduled;
    the key nowhere in history; the history replays."""
    address = temporal_client.service_client.config.target_host
    with (
        scripted_openai_server(["echo all-done"]) as model,
        listening() as elsewhere,
        receiving(500, 307, 204, location=f"http://127.0.0.1:{elsewhere.port}/") as hook,
    ):
        environment = {
            **service_environment(address, model.url),
            "CALLBACK_HOSTS": "127.0.0.1",
            "CALLBACK_SECRET": SECRET,
        }
        async with service(WORKER, environment) as worker:
            await worker.wait_for("Worker polling")
            starter_environment = {k: v for k, v in environment.items() if k != "CALLBACK_SECRET"}
            async with service(
                [*STARTER, "--callback", hook.url, "Say it."], starter_environment
            ) as starter:
                assert await starter.exit_status() == EXIT_COMPLETED, starter.output
            # The starter's run is a conversation: it calls back when it ends.
            workflow_id = started_id("\n".join(starter.output))
            assert hook.deliveries == []
            async with service([*STARTER, "--end", workflow_id], starter_environment) as ending:
                assert await ending.exit_status() == EXIT_COMPLETED, ending.output
            handle = temporal_client.get_workflow_handle(workflow_id)
            await handle.result()
    history = await handle.fetch_history()

    assert len(hook.deliveries) == 3 and elsewhere.accepted == []
    messages = [verified(each) for each in hook.deliveries]
    assert len({each.headers["webhook-id"] for each in hook.deliveries}) == 1
    assert all(each.headers["content-type"] == "application/json" for each in hook.deliveries)
    message = messages[-1]
    assert message["type"] == "run.ended" and message == messages[0]
    data = message["data"]
    assert data["id"] == workflow_id and data["state"] == "completed" and data["reason"] is None
    assert "all-done" in data["answer"]["text"]
    assert data["usage"]["model_calls"] == 2 and data["usage"]["input_tokens"] > 0

    events = callback_events(history)
    scheduled = [e for e in events if e.HasField("activity_task_scheduled_event_attributes")]
    [started] = [e for e in events if e.HasField("activity_task_started_event_attributes")]
    assert len(scheduled) == 1 and started.activity_task_started_event_attributes.attempt == 3
    recorded = history_bytes(history)
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    assert SECRET.encode() not in recorded and key not in recorded
    assert SECRET.removeprefix("whsec_").encode() not in recorded
    replayed = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None


async def test_every_end_the_run_sees_calls_back_once(temporal_client: Client) -> None:
    """A conversation whose chain continued as new after its first answer
    calls back once, when it is ended, with its last answer; a run cancelled
    while it waits calls back "cancelled", one stopped at its budget
    "stopped", one that fails "failed", with why. Every history replays,
    its patch marker recorded."""
    model = ScriptedModel(["echo first"])
    clash = Input("a", "file", 0, 1, "", "")
    with receiving(204) as hook:
        async with running_worker(
            temporal_client,
            model,
            settings=with_callbacks("127.0.0.1"),
            workflows=[project().workflow, ContinuesBetweenPromptsWorkflow],
        ) as (client, _):
            ended = await client.start_workflow(
                ContinuesBetweenPromptsWorkflow.run,
                RunRequest("Go.", follow_ups=True, callback_url=hook.url),
                id=f"{project_service().task_queue}-{uuid.uuid4()}",
                task_queue=project_service().task_queue,
            )
            await answered(ended, 1)
            while (await ended.describe()).run_id == ended.first_execution_run_id:
                await asyncio.sleep(0.05)
            assert hook.deliveries == []
            await ended.execute_update(END)
            await ended.result()
            cancelled = await start(
                client, RunRequest("Go.", follow_ups=True, callback_url=hook.url)
            )
            await answered(cancelled, 1)
            await cancelled.cancel()
            with pytest.raises(WorkflowFailureError):
                await cancelled.result()
            stopped = await start(client, RunRequest("Go.", token_budget=1, callback_url=hook.url))
            await stopped.result()
            failed = await start(
                client, RunRequest("Go.", inputs=[clash, clash], callback_url=hook.url)
            )
            with pytest.raises(WorkflowFailureError):
                await failed.result()
    by_run = {}
    for delivery in hook.deliveries:
        data = verified(delivery)["data"]
        by_run[data["id"]] = data
    assert len(hook.deliveries) == 4 == len(by_run), hook.deliveries
    assert by_run[ended.id]["state"] == "completed"
    assert "first" in by_run[ended.id]["answer"]["text"]
    assert by_run[cancelled.id]["state"] == "cancelled" and by_run[cancelled.id]["answer"] is None
    assert by_run[stopped.id]["state"] == "stopped"
    assert by_run[stopped.id]["answer"]["stopped"].startswith("stopped: ")
    assert by_run[failed.id]["state"] == "failed" and by_run[failed.id]["answer"] is None
    assert "Two of the run's inputs" in by_run[failed.id]["reason"]
    ended_runs = await runs_of_chain(client, ended.id, ended.first_execution_run_id or "")
    histories = [run.history for run in ended_runs]
    assert len(histories) == 2 and CALLBACK_PATCH.encode() not in history_bytes(histories[0])
    for handle in (cancelled, stopped, failed):
        histories.append(await handle.fetch_history())
    chain_replayer = replayer([ContinuesBetweenPromptsWorkflow])
    for history in histories[:2]:
        replayed = await chain_replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert replayed.replay_failure is None
    for history in histories[1:]:
        assert CALLBACK_PATCH.encode() in history_bytes(history)
    for history in histories[2:]:
        replayed = await replayer().replay_workflow(history, raise_on_replay_failure=False)
        assert replayed.replay_failure is None


# ------------------------------------------------------------ who may be called


async def test_the_worker_refuses_a_server_not_allowed_before_any_connection(
    temporal_client: Client,
) -> None:
    """Runs started straight through Temporal (no client's check), with
    CALLBACK_HOSTS=localhost: the loopback address the name resolves to is
    not listed, nor is 127.0.0.1, 10.1.2.3 or 169.254.169.254. Each run
    answers; its one callback attempt is refused in one line, and nothing
    connected to the listener."""
    model = ScriptedModel(["echo done"])
    with listening() as listener:
        urls = [
            f"http://127.0.0.1:{listener.port}/hook",
            f"http://localhost:{listener.port}/hook",
            "http://10.1.2.3/hook",
            "http://169.254.169.254/latest/meta-data",
            f"ftp://localhost:{listener.port}/hook",
        ]
        async with running_worker(temporal_client, model, settings=with_callbacks("localhost")) as (
            client,
            _,
        ):
            handles: list[WorkflowHandle[Any, Any]] = [
                await start(client, RunRequest("Go.", callback_url=url)) for url in urls
            ]
            answers = [await handle.result() for handle in handles]
            reasons = [refusal(await handle.fetch_history()) for handle in handles]
    assert listener.accepted == []
    assert all("done" in answer.answer for answer in answers)
    for url, reason in zip(urls, reasons, strict=True):
        assert reason.startswith(f"CallbackRefused: Callback URL {url!r} is not allowed: "), reason
        assert "\n" not in reason
    assert "its server 127.0.0.1 is not one this service allows (CALLBACK_HOSTS)" in reasons[0]
    assert (
        "its server localhost resolves to 127.0.0.1, a loopback, private or link-local "
        "address CALLBACK_HOSTS does not list" in reasons[1]
    )
    assert "its server 10.1.2.3 is not one this service allows" in reasons[2]
    assert "its server 169.254.169.254 is not one this service allows" in reasons[3]
    assert "it is not an http:// or https:// URL" in reasons[4]


async def test_a_worker_without_a_key_refuses_to_call_back(temporal_client: Client) -> None:
    with receiving(204) as hook:
        settings = dataclasses.replace(with_callbacks("127.0.0.1"), callback_key=None)
        async with running_worker(
            temporal_client, ScriptedModel(["echo x"]), settings=settings
        ) as (
            client,
            _,
        ):
            handle = await start(client, RunRequest("Go.", callback_url=hook.url))
            await handle.result()
    assert hook.deliveries == []
    assert refusal(await handle.fetch_history()).startswith(
        "CallbackRefused: The run's callback was not sent: this worker has no CALLBACK_SECRET"
    )


@pytest.mark.process
async def test_the_api_and_the_starter_refuse_a_server_not_allowed_in_one_line(
    temporal_client: Client,
) -> None:
    address = temporal_client.service_client.config.target_host
    environment = {
        **service_environment(address, "http://127.0.0.1:9/v1"),
        "CALLBACK_HOSTS": "localhost,*.example.com",
    }
    with listening() as listener:
        bad = [
            f"http://127.0.0.1:{listener.port}/hook",
            f"http://localhost:{listener.port}/hook",
            "http://10.0.0.7/hook",
            "http://169.254.169.254/latest/meta-data",
            "file:///etc/passwd",
            f"http://user:pw@localhost:{listener.port}/hook",
        ]
        async with api_process(environment) as api, api.client() as client:
            said = []
            for url in bad:
                answer = await client.post("/v1/runs", json={"prompt": "x", "callback_url": url})
                said.append((answer.status_code, answer.json()["detail"]))
        starters = []
        for url in bad[:4]:
            async with service([*STARTER, "--callback", url, "Say it."], environment) as starter:
                starters.append((await starter.exit_status(), starter.output))
    assert listener.accepted == []
    for url, (status, detail) in zip(bad, said, strict=True):
        assert status == 422, detail
        assert detail.startswith(f"field 'callback_url' {url!r} is not allowed: "), detail
        assert "\n" not in detail and detail.endswith("."), detail
    assert "resolves to 127.0.0.1, a loopback, private or link-local address" in said[1][1]
    assert "use an http:// or https:// URL of a server CALLBACK_HOSTS lists" in said[2][1]
    assert "its server 169.254.169.254 is not one this service allows" in said[3][1]
    assert "it carries a user name or a password" in said[5][1]
    for url, (status, output) in zip(bad, starters, strict=False):
        assert status == EXIT_USAGE, output
        [line] = output
        assert line.startswith(f"ERROR: --callback {url!r} is not allowed: "), line


# ------------------------------------------------------------ the settings


def test_the_settings_are_read_as_declared() -> None:
    policy = callback_policy({"CALLBACK_HOSTS": "hooks.example.com, *.corp.example,10.20.0.5"})
    assert policy.names == ("hooks.example.com", "*.corp.example")
    assert callbacks.target_of("https://a.corp.example/x", policy).host == "a.corp.example"
    assert callbacks.target_of("http://10.20.0.5:8080/x", policy).port == 8080
    with pytest.raises(callbacks.BadCallback, match="CALLBACK_HOSTS is unset"):
        callbacks.target_of("https://hooks.example.com/x", callback_policy({}))
    with pytest.raises(BadSetting, match=r"^CALLBACK_SECRET is not allowed \(its key is 3 bytes"):
        callback_key({"CALLBACK_SECRET": "whsec_YWJj"})
    with pytest.raises(BadSetting) as refused:
        callback_key({"CALLBACK_SECRET": SECRET + "!"})
    assert SECRET not in str(refused.value) and SECRET[6:20] not in str(refused.value)
    assert re.fullmatch(r"v1,[A-Za-z0-9+/]{43}=", callbacks.signature(b"k" * 24, "msg_1", 1, b"{}"))


# ------------------------------------------------------------ recorded runs

HISTORIES = Path(__file__).parent / "histories"


@pytest.mark.parametrize(
    "name", ["scripted-chain.run-1", "scripted-chain.run-2", "scripted-chain.conversation"]
)
async def test_a_run_recorded_before_callbacks_still_replays(name: str) -> None:
    history = WorkflowHistory.from_json(name, (HISTORIES / f"{name}.json").read_text())
    replayed = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None
