"""The API, as a caller meets it: the API command as a process (two
replicas), beside a real dev server, the service's real worker and a
scripted model, driven by a real HTTP client.

A run started over HTTP with a file streams its steps in order and its
answer; a client that reconnects with ``Last-Event-ID``, to the same
replica or another, misses nothing and gets nothing twice, even when the
replica it was reading from is killed; a follow-up continues in the same
workspace; the outputs are the files the run made, byte for byte; a caller
without a token gets 401 and another caller's run is a 404; bad requests get
one problem line and start nothing, keep nothing. docs/api.md."""

import asyncio
import hashlib
import io
import os
import signal
import socket
import subprocess
import tarfile
import time
from collections.abc import AsyncIterator

import httpx2 as httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from temporalio.client import Client

from sandbox_agent_runtime.api.events import event_id_parts
from sandbox_agent_runtime.shared import INLINE_FILES_LIMIT, LONGEST_PROMPT
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing.api_client import (
    TOKENS,
    ApiProcess,
    Event,
    api_process,
    api_tokens,
    read_events,
)
from sandbox_agent_runtime.testing.processes import API, WORKER, service, service_environment
from sandbox_agent_runtime.testing.scripted_openai import (
    ScriptedOpenAIServer,
    scripted_openai_server,
)
from sandbox_agent_runtime.testing.support import free_address

pytestmark = pytest.mark.process

# What the agent does: the first prompt counts the rows of data.csv (when
# the run has it) and writes a file; a follow-up reads that file back.
PROMPTS = [
    ["(cat data.csv 2>/dev/null | wc -l) > rows.txt; echo made > made.txt; ls"],
    ["cat made.txt"],
]
DATA = b"a,b\n1,2\n3,4\n"


class Stack:
    """The service and two API replicas, shared by this module's tests."""

    def __init__(
        self, model: ScriptedOpenAIServer, environment: dict[str, str], a: ApiProcess, b: ApiProcess
    ):
        self.model = model
        self.environment = environment
        self.a = a
        self.b = b


@pytest.fixture(scope="module")
async def stack(
    temporal_client: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server([], prompts=PROMPTS) as model:
        environment = service_environment(address, model.url)
        # Each API process's temporary files, to see it keeps none.
        for name in ("a", "b"):
            (tmp_path_factory.getbasetemp() / f"api-tmp-{name}").mkdir(exist_ok=True)
        async with (
            service(WORKER, environment) as worker,
            api_process(
                {**environment, "TMPDIR": str(tmp_path_factory.getbasetemp() / "api-tmp-a")}
            ) as a,
            api_process(
                {**environment, "TMPDIR": str(tmp_path_factory.getbasetemp() / "api-tmp-b")}
            ) as b,
        ):
            await worker.wait_for("Worker polling")
            yield Stack(model, environment, a, b)


def positions(events: list[Event]) -> list[tuple[int, int, int]]:
    """Each event's place in its chain, from its id: (run, event, asked),
    the runs numbered in the order they come."""
    runs: dict[str, int] = {}
    found = []
    for event in events:
        run, number, asked = event_id_parts(event.id)
        found.append((runs.setdefault(run, len(runs)), number, asked))
    return found


def as_read(events: list[Event]) -> tuple[list[Event], list[tuple[str, str]]]:
    """The steps among ``events``, and the text of each turn their deltas give."""
    texts: dict[str, str] = {}
    for event in events:
        if event.name == "delta":
            turn = event.data["turn"]
            texts[turn] = texts.get(turn, "")[: event.data["at"]] + event.data["text"]
    return [event for event in events if event.name != "delta"], sorted(texts.items())


async def start_job(client: httpx.AsyncClient, with_file: bool = True) -> str:
    files = {"files": ("data.csv", DATA, "text/csv")} if with_file else None
    started = await client.post("/v1/runs", data={"prompt": "Count the rows."}, files=files)
    assert started.status_code == 201, started.text
    workflow_id = started.json()["id"]
    assert started.headers["location"] == f"/v1/runs/{workflow_id}"
    return str(workflow_id)


async def test_a_job_started_with_a_file_streams_its_steps_in_order_then_its_answer(
    stack: Stack,
) -> None:
    async with stack.a.client() as client:
        workflow_id = await start_job(client)
        events = await read_events(client, workflow_id)
        state = (await client.get(f"/v1/runs/{workflow_id}")).json()
        archive = await client.get(f"/v1/runs/{workflow_id}/outputs")
        scraped = (await client.get("/metrics")).text

    names = [event.name for event in events]
    texts = [f"{event.name} {event.data.get('text', '')}" for event in events]
    # Every step the starter shows, in the order history recorded them.
    assert texts[0] == "sandbox provider 'local'"
    assert texts.index("sandbox input data.csv (12 B)") < texts.index("model turn 1")
    assert (
        texts.index("model turn 1")
        < texts.index(f"sandbox $ {PROMPTS[0][0]}")
        < texts.index("model turn 2")
    )
    assert "sandbox output 2 files (7 B)" in texts, texts
    assert names[-2:] == ["answer", "end"]
    assert events[-1].data["status"] == "completed" and events[-1].data["time"].endswith("Z")
    # Each event has its own id, in the order of the chain.
    assert len({event.id for event in events}) == len(events)
    assert positions(events) == sorted(positions(events))
    answer = events[-2].data
    assert "made.txt" in answer["text"] and "rows.txt" in answer["text"]
    # The outputs: the files the run made, byte for byte, as the answer lists them.
    assert archive.status_code == 200 and archive.headers["content-type"] == "application/gzip"
    with tarfile.open(fileobj=io.BytesIO(archive.content)) as tar:
        files = {member.name: tar.extractfile(member).read() for member in tar if member.isfile()}  # type: ignore[union-attr]
    assert files == {"made.txt": b"made\n", "rows.txt": b"3\n"}
    listed = {each["path"]: each["sha256"] for each in answer["outputs"]}
    assert listed == {path: hashlib.sha256(data).hexdigest() for path, data in files.items()}
    assert state["state"] == "ended" and state["answer"]["text"] == answer["text"]
    assert state["usage"]["model_calls"] == 2
    # The API's metrics: its requests by route and status, and the delay of
    # each step recorded while the run was followed.
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(scraped)
        for sample in family.samples
    }
    started = (("method", "POST"), ("route", "/v1/runs"), ("status", "201"))
    assert samples[("agent_api_requests_total", started)] >= 1
    assert samples[("agent_api_event_delay_seconds_count", ())] >= 5
    assert samples[("agent_api_open_streams", ())] == 0


async def test_a_client_that_reconnects_with_last_event_id_gets_the_rest_once(stack: Stack) -> None:
    async with stack.a.client() as on_a, stack.b.client() as on_b:
        workflow_id = await start_job(on_a, with_file=False)
        whole = await read_events(on_a, workflow_id)
        assert [event.name for event in whole][-1] == "end"
        for cut in (0, len(whole) // 2, len(whole) - 3, len(whole) - 2):
            # To the replica it read from, and to the other (which follows
            # the run afresh), by the header and by the query parameter. The
            # model's text that was read live in batches comes, once its
            # turn ended, in one delta (test_api_deltas.py).
            rest = as_read(whole[cut + 1 :])
            assert as_read(await read_events(on_a, workflow_id, whole[cut].id)) == rest
            assert as_read(await read_events(on_b, workflow_id, whole[cut].id)) == rest
        by_query = await on_b.get(
            f"/v1/runs/{workflow_id}/events", params={"last_event_id": whole[-3].id}
        )
        assert [line for line in by_query.text.splitlines() if line.startswith("event:")] == [
            f"event: {event.name}" for event in whole[-2:]
        ]
        # An id that is none of the API's: one line, 400.
        bad = await on_a.get(f"/v1/runs/{workflow_id}/events", headers={"Last-Event-ID": "../../x"})
        assert bad.status_code == 400 and "Last-Event-ID" in bad.json()["detail"]


async def answer_after(
    client: httpx.AsyncClient, workflow_id: str, last: str | None
) -> list[Event]:
    """The run's events after ``last`` up to and with its next answer."""
    found: list[Event] = []
    while not found or found[-1].name != "answer":
        more = await read_events(client, workflow_id, found[-1].id if found else last, most=1)
        found += more
    return found


async def test_a_follow_up_continues_in_the_same_workspace(stack: Stack) -> None:
    async with stack.a.client() as client:
        started = await client.post(
            "/v1/runs", json={"prompt": "Write made.txt.", "follow_ups": True}
        )
        assert started.status_code == 201, started.text
        workflow_id = started.json()["id"]
        first = await answer_after(client, workflow_id, None)
        waiting = (await client.get(f"/v1/runs/{workflow_id}")).json()
        sent = await client.post(
            f"/v1/runs/{workflow_id}/messages", json={"prompt": "Read made.txt."}
        )
        second = await answer_after(client, workflow_id, first[-1].id)
        ended = await client.post(f"/v1/runs/{workflow_id}/end")
        rest = await read_events(client, workflow_id, second[-1].id)
        after = (await client.get(f"/v1/runs/{workflow_id}")).json()

    assert first[-1].data["prompt"] == 1 and "made.txt" in first[-1].data["text"]
    assert waiting["state"] in ("waiting", "released") and waiting["answered"] == 1
    assert sent.status_code == 202 and sent.json()["prompt"] == 2
    assert [event.data.get("text") for event in second if event.name == "prompt"] == [
        "2, a follow-up"
    ]
    # The follow-up read the file the first prompt wrote: the same workspace.
    assert second[-1].data["prompt"] == 2
    assert second[-1].data["text"].endswith("prompt 2: made\n")
    assert ended.status_code == 202
    assert rest[-1].name == "end" and rest[-1].data["status"] == "completed"
    assert after["state"] == "ended" and after["answered"] == 2


async def test_a_prompt_stopped_at_its_budget_says_so_and_a_follow_up_goes_on(
    stack: Stack,
) -> None:
    async with stack.a.client() as client:
        started = await client.post(
            "/v1/runs", json={"prompt": "Write made.txt.", "follow_ups": True, "token_budget": 1}
        )
        assert started.status_code == 201, started.text
        workflow_id = started.json()["id"]
        first = await answer_after(client, workflow_id, None)
        stopped = (await client.get(f"/v1/runs/{workflow_id}")).json()
        sent = await client.post(
            f"/v1/runs/{workflow_id}/messages",
            data={"prompt": "Read made.txt.", "token_budget": "100000"},
        )
        second = await answer_after(client, workflow_id, first[-1].id)
        going_on = (await client.get(f"/v1/runs/{workflow_id}")).json()
        await client.post(f"/v1/runs/{workflow_id}/end")

    assert first[-1].data["text"].startswith("stopped: token budget reached: ")
    assert stopped["answer"]["stopped"] == stopped["answer"]["text"]
    assert stopped["answer"]["stopped"].endswith(" of 1 tokens (the prompt's own token budget)")
    # The usage shows its cost: none here, the stand-in's model has no price;
    # its sandbox's time and its actions are there (at 0 USD: a local
    # sandbox, a self-hosted server), and no total without the tokens'.
    usage = stopped["usage"]
    assert usage["model_calls"] == 1 and usage["cost_usd"] is None
    assert usage["sandbox_seconds"] > 0 and usage["actions"] > 0
    assert usage["sandbox_usd"] == usage["actions_usd"] == 0 and usage["total_usd"] is None
    assert sent.status_code == 202, sent.text
    assert second[-1].data["prompt"] == 2 and going_on["answer"]["stopped"] == ""


async def test_a_run_is_its_callers_alone(stack: Stack, temporal_client: Client) -> None:
    async with (
        stack.a.client("alice") as alice,
        stack.a.client("bob") as bob,
        stack.a.client(None) as nobody,
    ):
        workflow_id = await start_job(alice, with_file=False)
        by_the_starters = await start(temporal_client, "Count the files.")
        by_the_starter = by_the_starters.id
        refused = {}
        for run in (workflow_id, by_the_starter, "sandbox-agent-no-such-run"):
            caller = bob if run == workflow_id else alice
            for method, path in [
                ("GET", ""),
                ("GET", "/events"),
                ("GET", "/outputs"),
                ("GET", "/approvals"),
                ("POST", "/messages"),
                ("POST", "/end"),
                ("POST", "/approvals/call_0"),
            ]:
                response = await caller.request(
                    method, f"/v1/runs/{run}{path}", json={"prompt": "x"}
                )
                refused[(run, method, path)] = (
                    response.status_code,
                    response.headers["content-type"],
                    response.json(),
                )
        no_token = await nobody.get(f"/v1/runs/{workflow_id}")
        wrong_token = await nobody.get(
            f"/v1/runs/{workflow_id}", headers={"Authorization": "Bearer guess"}
        )
        no_start = await nobody.post("/v1/runs", json={"prompt": "x"})
        # Alice's run went on: the refusals did nothing to it.
        events = await read_events(alice, workflow_id)
        await by_the_starters.result()

    for (run, _, _), (status, kind, body) in refused.items():
        # Another caller's run, a starter's run and no run are told apart by nothing.
        assert status == 404 and kind == "application/problem+json", body
        assert body["detail"] == f"run {run!r}: no such run of yours."
    for response in (no_token, wrong_token, no_start):
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.headers["content-type"] == "application/problem+json"
    assert [event.name for event in events][-2:] == ["answer", "end"]


def send_forever(
    url: str, request: str = "POST /v1/runs", caller: str | None = "alice"
) -> tuple[int, bytes]:
    """A JSON body sent in chunks, without end, with a raw socket, until the
    API closes the connection (at most 30 s): the bytes sent, and its answer."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    token = f"Authorization: Bearer {TOKENS[caller]}\r\n" if caller else ""
    with socket.create_connection((host, int(port))) as connection:
        connection.sendall(
            f"{request} HTTP/1.1\r\nHost: {host}\r\n{token}"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        )
        connection.settimeout(0.01)
        chunk = b"10000\r\n" + b" " * 65536 + b"\r\n"
        sent, answer, began = 0, b"", time.monotonic()
        while time.monotonic() - began < 30:
            try:
                connection.sendall(chunk)
                sent += 65536
                data = connection.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            answer += data
    return sent, answer


def send_slowly(url: str) -> bytes:
    """A small form sent in chunks, without a length, a chunk every 0.2 s,
    with a raw socket: the API's answer, or what came before the connection
    was reset."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    token = TOKENS["alice"]
    answer = b""
    with socket.create_connection((host, int(port))) as connection:
        connection.sendall(
            f"POST /v1/runs HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: multipart/form-data; boundary=x\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        try:
            for part in (b"5\r\n--x\r\n\r\n", b"5\r\n--x\r\n\r\n", b"0\r\n\r\n"):
                time.sleep(0.2)
                connection.sendall(part)
            connection.settimeout(10)
            while data := connection.recv(65536):
                answer += data
        except OSError:
            pass  # reset: the answer is what came before
    return answer


async def chunks() -> AsyncIterator[bytes]:
    for _ in range(3):
        yield b"--x\r\n"


def one_line_problem(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == status and body["title"]
    detail = str(body["detail"])
    assert "\n" not in detail and "Traceback" not in detail and detail.endswith(".")
    return detail


async def test_bad_requests_get_one_problem_line_and_leave_nothing_behind(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    heavy = b"x" * (INLINE_FILES_LIMIT + 1)
    async with stack.b.client() as client:
        finished = await start_job(client, with_file=False)
        said = {
            "bad json": one_line_problem(
                await client.post(
                    "/v1/runs", content=b"{not json", headers={"content-type": "application/json"}
                ),
                400,
            ),
            "not an object": one_line_problem(await client.post("/v1/runs", json=["a"]), 400),
            "no prompt": one_line_problem(
                await client.post("/v1/runs", json={"follow_ups": True}), 422
            ),
            "unknown field": one_line_problem(
                await client.post("/v1/runs", json={"prompt": "x", "model": "y"}), 422
            ),
            "wrong type": one_line_problem(
                await client.post("/v1/runs", json={"prompt": "x", "follow_ups": "y"}), 422
            ),
            "bad provider": one_line_problem(
                await client.post("/v1/runs", json={"prompt": "x", "provider": "z"}), 422
            ),
            "bad token budget": one_line_problem(
                await client.post("/v1/runs", json={"prompt": "x", "token_budget": 0}), 422
            ),
            "a fraction of a token": one_line_problem(
                await client.post("/v1/runs", json={"prompt": "x", "token_budget": 1.5}), 422
            ),
            "bad cost budget": one_line_problem(
                await client.post("/v1/runs", data={"prompt": "x", "cost_budget_usd": "free"}), 422
            ),
            "bad repo": one_line_problem(
                await client.post("/v1/runs", json={"prompt": "x", "repo": "a b"}), 422
            ),
            "plain text": one_line_problem(
                await client.post("/v1/runs", content=b"x", headers={"content-type": "text/plain"}),
                415,
            ),
            "oversized json": one_line_problem(
                await client.post("/v1/runs", json={"prompt": "x" * (LONGEST_PROMPT + 70_000)}), 413
            ),
            "oversized prompt": one_line_problem(
                await client.post("/v1/runs", json={"prompt": "x" * (LONGEST_PROMPT + 1)}), 413
            ),
            "oversized file": one_line_problem(
                await client.post(
                    "/v1/runs", data={"prompt": "x"}, files={"files": ("big.bin", heavy)}
                ),
                413,
            ),
            "dot-dot": one_line_problem(
                await client.post("/v1/runs", data={"prompt": "x"}, files={"files": ("..", b"x")}),
                400,
            ),
            "climbing": one_line_problem(
                await client.post(
                    "/v1/runs", data={"prompt": "x"}, files={"files": ("../up.txt", b"x")}
                ),
                400,
            ),
            "two of a name": one_line_problem(
                await client.post(
                    "/v1/runs",
                    data={"prompt": "x"},
                    files=[("files", ("a.txt", b"1")), ("files", ("a.txt", b"2"))],
                ),
                400,
            ),
            "unknown run": one_line_problem(
                await client.get("/v1/runs/sandbox-agent-nothing"), 404
            ),
            "unknown route": one_line_problem(await client.get("/v1/nothing"), 404),
            "wrong method": one_line_problem(wrong_method := await client.delete("/v1/runs"), 405),
            # A lone surrogate (half of a pair: no UTF-8 carries it), anywhere.
            "surrogate in repo": one_line_problem(
                await client.post(
                    "/v1/runs",
                    content=b'{"prompt": "x", "repo": "https://example.com/r\\ud800"}',
                    headers={"content-type": "application/json"},
                ),
                422,
            ),
            "surrogate in prompt": one_line_problem(
                await client.post(
                    "/v1/runs",
                    content=b'{"prompt": "x\\udfff"}',
                    headers={"content-type": "application/json"},
                ),
                422,
            ),
            "nested deep": one_line_problem(
                await client.post(
                    "/v1/runs",
                    content=b"[" * 100_000 + b"]" * 100_000,
                    headers={"content-type": "application/json"},
                ),
                400,
            ),
            "nested deep in a field": one_line_problem(
                await client.post(
                    "/v1/runs",
                    content=b'{"prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                    headers={"content-type": "application/json"},
                ),
                400,
            ),
            "many small files": one_line_problem(
                await client.post(
                    "/v1/runs",
                    data={"prompt": "x"},
                    files=[("files", (f"f{n}.txt", b"x")) for n in range(9_999)],
                ),
                413,
            ),
            "a superscript event id": one_line_problem(
                await client.get(
                    f"/v1/runs/{finished}/events",
                    headers={b"Last-Event-ID": f"{finished}.\u00b2".encode()},
                ),
                400,
            ),
            "a long event id": one_line_problem(
                await client.get(
                    f"/v1/runs/{finished}/events", params={"last_event_id": f"r.{'9' * 5_000}"}
                ),
                400,
            ),
            # A form sent in chunks, with no length: refused before a byte of it is read.
            "no length": one_line_problem(
                await client.post(
                    "/v1/runs",
                    content=chunks(),
                    headers={"content-type": "multipart/form-data; boundary=x"},
                ),
                411,
            ),
        }
    assert said["bad json"].startswith("the body is not JSON")
    assert said["no prompt"] == "field 'prompt' is missing or blank: say what the agent should do."
    assert (
        said["unknown field"]
        == "field 'model' is not one of this route's: prompt, follow_ups, provider, repo, "
        "token_budget, cost_budget_usd, callback_url."
    )
    assert said["bad token budget"] == (
        "field 'token_budget' 0 is not allowed: use a whole number of tokens, 1 or more."
    )
    assert said["bad cost budget"] == (
        "field 'cost_budget_usd' 'free' is not allowed: use an amount in USD over 0 "
        "(0.5 for 50 cents)."
    )
    assert said["bad provider"] == "provider 'z' is not one of this service's: local."
    assert said["plain text"].startswith("content type 'text/plain' is not taken here")
    assert "LONGEST_PROMPT" in said["oversized prompt"]
    assert said["oversized file"].startswith(
        "file big.bin: it weighs 1,048,577 bytes, over 1,048,576"
    )
    assert said["dot-dot"].startswith("file name '..' is not allowed")
    assert said["climbing"].startswith("file name '../up.txt' is not allowed")
    assert said["two of a name"] == "two files are named 'a.txt': each must have its own name."
    assert said["no length"] == "a form's body needs a Content-Length: send its length."
    assert wrong_method.headers["allow"] == "POST"
    assert said["surrogate in repo"] == (
        "field 'repo' holds a lone surrogate ('\\ud800') at character 21: send Unicode text; "
        "a surrogate only as half of a pair."
    )
    assert said["surrogate in prompt"].startswith("field 'prompt' holds a lone surrogate")
    assert said["nested deep"].startswith("the body nests too deep to read")
    assert said["many small files"].startswith("field 'files': 9,999 files pack to ")
    assert "OBJECT_STORE_URL" in said["many small files"]
    for long_or_odd in ("a superscript event id", "a long event id"):
        assert said[long_or_odd].startswith("Last-Event-ID "), said[long_or_odd]
        assert "at most 19 digits 0-9" in said[long_or_odd]
    # A body that never ends: refused at the limit, the connection closed.
    sent, answer = await asyncio.to_thread(send_forever, stack.b.url)
    assert answer.startswith(b"HTTP/1.1 413 ") and b"connection: close" in answer.lower(), answer
    assert sent < 4 * 1024 * 1024, sent
    # A refused body still arriving is read to its end before the answer, so
    # the answer arrives whole: closed with the body unread, the connection
    # would be reset, and the answer with it.
    slow = await asyncio.to_thread(send_slowly, stack.b.url)
    assert slow.startswith(b"HTTP/1.1 411 "), slow
    # Nothing started but the finished run, nothing kept.
    assert [line for line in stack.b.process.output if "started run" in line] == [
        line for line in stack.b.process.output if f"started run {finished}" in line
    ]
    assert not any("Traceback" in line for line in stack.b.process.output)
    assert os.listdir(tmp_path_factory.getbasetemp() / "api-tmp-b") == []


@pytest.mark.parametrize(
    ("request_line", "caller", "status"),
    [
        ("POST /v1/runs", None, 401),
        ("POST /v1/nothing", "alice", 404),
        ("PUT /v1/runs", "alice", 405),
        ("POST /v1/runs/sandbox-agent-no-such-run/messages", "alice", 404),
        ("GET /livez", None, 200),
    ],
)
async def test_an_answer_given_before_the_body_is_read_closes_the_connection(
    stack: Stack, request_line: str, caller: str | None, status: int
) -> None:
    # A body that never ends, after headers the API answers without reading it.
    sent, answer = await asyncio.to_thread(send_forever, stack.a.url, request_line, caller)
    assert answer.startswith(f"HTTP/1.1 {status} ".encode()), answer[:200]
    assert b"connection: close" in answer.lower(), answer[:400]
    # The API stopped reading: what it read and dropped (DRAIN_LIMIT), and
    # what the sockets' buffers held, no more.
    assert sent < 16 * 1024 * 1024, sent


async def test_the_metrics_label_a_method_they_do_not_know_as_other(stack: Stack) -> None:
    odd = [f"X{n}{'Q' * 2_000}" for n in range(20)]
    async with stack.a.client(None) as client:
        for method in odd:
            assert (await client.request(method, "/v1/runs")).status_code in (401, 405)
        await client.request("BREW", "/v1/nothing")
        scraped = (await client.get("/metrics")).text

    labels = {
        sample.labels["method"]
        for family in text_string_to_metric_families(scraped)
        for sample in family.samples
        if family.name == "agent_api_requests"
    }
    assert labels <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}
    assert "other" in labels
    assert "QQQQ" not in scraped and "BREW" not in scraped
    assert len(scraped) < 64 * 1024, len(scraped)


async def test_a_stream_goes_on_from_another_replica_when_one_is_killed(stack: Stack) -> None:
    # The model holds its first answer until released: the run is mid-way.
    stack.model.hold_at_step = 1
    async with (
        api_process(stack.environment) as doomed,
        doomed.client() as on_doomed,
        stack.b.client() as on_b,
    ):
        workflow_id = await start_job(on_doomed)
        await asyncio.to_thread(stack.model.reached.wait, 60)
        seen = await read_events(on_doomed, workflow_id, most=6)
        doomed.process.process.kill()
        with pytest.raises(httpx.TransportError):
            await read_events(on_doomed, workflow_id)
        stack.model.release.set()
        rest = await read_events(on_b, workflow_id, seen[-1].id)
        whole = await read_events(on_b, workflow_id)
    stack.model.release.clear()
    stack.model.reached.clear()

    assert seen + rest == whole
    assert [event.name for event in whole][-2:] == ["answer", "end"]


async def test_the_api_command_says_what_it_needs_and_stops_cleanly(
    stack: Stack, temporal_client: Client
) -> None:
    made = subprocess.run(
        [*API, "--new-token", "carol"], capture_output=True, text=True, timeout=60
    )
    assert made.returncode == 0, made.stderr
    token = made.stdout.split("it is shown once): ")[1].split()[0]
    entry = made.stdout.split("API_TOKENS entry (add it, comma-separated): ")[1].strip()
    assert entry == f"carol:{hashlib.sha256(token.encode()).hexdigest()}"

    def refusal(*arguments: str, **environment: str) -> tuple[int, str]:
        done = subprocess.run(
            [*API, *arguments],
            capture_output=True,
            text=True,
            timeout=60,
            env={**stack.environment, "API_BIND_ADDRESS": free_address(), **environment},
        )
        assert done.stdout == "" and "Traceback" not in done.stderr, done.stderr
        [line] = done.stderr.splitlines()
        return done.returncode, line

    assert refusal("--new-token", "no spaces allowed") == (
        1,
        "ERROR: --new-token 'no spaces allowed' is not allowed: use a name of letters, digits and "
        ". _ @ - (at most 64, starting with a letter or digit).",
    )
    status, line = refusal()
    assert status == 1 and line.startswith(
        "ERROR: API_TOKENS is unset: every route under /v1/ needs a caller"
    )
    status, line = refusal(API_TOKENS="alice:abc")
    assert status == 1 and "'alice''s digest is not 64 hexadecimal digits" in line
    status, line = refusal(API_TOKENS=api_tokens(), API_OIDC_ISSUER="https://login.example.com")
    assert status == 1 and line.startswith(
        "ERROR: API_OIDC_AUDIENCE='' is not allowed with API_OIDC_ISSUER set"
    )
    status, line = refusal(
        API_TOKENS=api_tokens(), API_OIDC_ISSUER="login.example.com", API_OIDC_AUDIENCE="a"
    )
    assert status == 1 and line.startswith(
        "ERROR: API_OIDC_ISSUER='login.example.com' is not allowed: use an http"
    )
    taken = stack.a.url.removeprefix("http://")
    status, line = refusal(API_TOKENS=api_tokens(), API_BIND_ADDRESS=taken)
    assert status == 1 and line.startswith(f"ERROR: cannot serve on {taken} (API_BIND_ADDRESS):")
    status, line = refusal(API_TOKENS=api_tokens(), TEMPORAL_ADDRESS="127.0.0.1:1")
    assert status == 2 and "127.0.0.1:1" in line

    # SIGTERM, with a stream open: it stops, with status 0.
    async with api_process(stack.environment) as stopping, stopping.client() as client:
        workflow_id = await start_job(client, with_file=False)
        async with client.stream("GET", f"/v1/runs/{workflow_id}/events") as stream:
            assert stream.status_code == 200
            stopping.process.process.send_signal(signal.SIGTERM)
            assert await stopping.process.exit_status(timeout=30) == 0
