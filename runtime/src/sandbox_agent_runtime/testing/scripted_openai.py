"""A scripted OpenAI-compatible HTTP server, so the real ``openai`` client and
the real model activity can run without an API key or a network.

It serves the endpoint the SDK's default model calls, the Responses API
(``POST /v1/responses``), or (``apis``) Chat Completions (``POST
/v1/chat/completions``), or both, each other path a 404 as on an endpoint
without that API; and it answers exactly as ``ScriptedModel`` does: it
works out the step from the request's input items (the latest tool call's
id) and asks for the next command, or answers with the last output. Point
``OPENAI_BASE_URL`` at ``server.url``.
"""

import json
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sandbox_agent_runtime.testing.scripted_model import steps_done, tool_outputs, user_messages


def responses_input(request: dict[str, Any]) -> list[dict[str, Any]]:
    """A Chat Completions request's messages as the Responses API's input
    items, which the script reads its progress from."""
    items: list[dict[str, Any]] = []
    for message in request.get("messages", []):
        role = message.get("role")
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                items.append({"type": "function_call", "call_id": call["id"], **call["function"]})
            if message.get("content"):
                items.append({"role": "assistant", "content": message["content"]})
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id"),
                    "output": message.get("content"),
                }
            )
        elif role in ("user", "system", "developer"):
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(
                    str(part.get("text", "")) for part in content if isinstance(part, dict)
                )
            items.append({"role": role, "content": content})
    return items


def chat_completion(reply: dict[str, Any]) -> dict[str, Any]:
    """A Responses API answer (one item) as a Chat Completions one."""
    [item] = reply["output"]
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if item["type"] == "function_call":
        message["tool_calls"] = [
            {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]},
            }
        ]
        finish = "tool_calls"
    else:
        message["content"] = "".join(part["text"] for part in item["content"])
        finish = "stop"
    usage = reply["usage"]
    return {
        "id": f"chatcmpl-{reply['id']}",
        "object": "chat.completion",
        "created": 0,
        "model": reply["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": usage["input_tokens"],
            "completion_tokens": usage["output_tokens"],
            "total_tokens": usage["total_tokens"],
        },
    }


def chat_completion_chunks(completion: dict[str, Any], size: int = 8) -> list[bytes]:
    """A Chat Completions answer as that API streams it (``stream: true``):
    its role, its text in deltas of ``size`` characters or its tool call
    whole, its finish, its usage (as ``stream_options.include_usage``
    asks), then ``[DONE]``; one server-sent event each."""
    [choice] = completion["choices"]
    message = choice["message"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    text = message.get("content") or ""
    deltas += [{"content": text[start : start + size]} for start in range(0, len(text), size)]
    for index, call in enumerate(message.get("tool_calls") or []):
        deltas.append({"tool_calls": [{"index": index, **call}]})
    head = {key: completion[key] for key in ("id", "created", "model")}
    chunks = [
        {**head, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
        for delta in deltas
    ]
    chunks.append(
        {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}],
        }
    )
    chunks.append(
        {**head, "object": "chat.completion.chunk", "choices": [], "usage": completion["usage"]}
    )
    return [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks] + [b"data: [DONE]\n\n"]


# A stamp: when it was written, "%.3f|" of time.time() (15 characters until 2286).
STAMP = re.compile(rb"\d{10}\.\d{3}\|")


def stamp() -> str:
    """The time now as a stamp (STAMP)."""
    return f"{time.time():.3f}|"


def stamped(event: bytes, sent: list[bytes]) -> bytes:
    """A streamed answer's event with its stamps written now: a delta's one
    stamp the time now (added to ``sent``); the completed answer's stamps
    those sent, in order (each stamp as long as another, so the answer's
    length does not change)."""
    if b'"type": "response.output_text.delta"' in event:
        now = stamp().encode()
        sent.append(now)
        return STAMP.sub(now, event, count=1)
    if b'"type": "response.completed"' in event and sent:
        ordered = iter(sent)
        return STAMP.sub(lambda match: next(ordered, match.group(0)), event)
    return event


def server_sent_events(response: dict[str, Any], size: int = 8) -> list[bytes]:
    """A Responses API answer as that API streams it (``stream: true``):
    created, each message's text in deltas of ``size`` characters,
    completed; one server-sent event each."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**response, "output": []}}
    ]
    for index, item in enumerate(response.get("output", [])):
        if item.get("type") != "message":
            continue
        text = "".join(part.get("text", "") for part in item.get("content", []))
        for start in range(0, len(text), size):
            events.append(
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": 0,
                    "delta": text[start : start + size],
                    "logprobs": [],
                }
            )
    events.append({"type": "response.completed", "response": response})
    return [
        f"event: {event['type']}\ndata: {json.dumps({**event, 'sequence_number': n})}\n\n".encode()
        for n, event in enumerate(events)
    ]


class ScriptedOpenAIServer:
    def __init__(
        self,
        commands: Sequence[str],
        *,
        error_status: int | None = None,
        prompts: Sequence[Sequence[str]] | None = None,
        apis: Sequence[str] = ("responses",),
    ) -> None:
        self.commands = list(commands)
        # The APIs it speaks ("responses", "chat_completions"); any other
        # path is a 404, as on an endpoint without it. And each one called.
        self.apis = tuple(apis)
        self.apis_called: list[str] = []
        # A conversation's commands by prompt (as conversing.Conversing
        # takes them): prompt N runs its own, then answers "prompt N: <what
        # the last command printed>". None: every command, then the answer.
        self.ends: list[int] | None = None
        if prompts is not None:
            self.commands = [command for prompt in prompts for command in prompt]
            self.ends = [sum(len(each) for each in prompts[: n + 1]) for n in range(len(prompts))]
        # Answer every request with this HTTP error instead (e.g. 401: a bad key).
        self.error_status = error_status
        # Streamed, the seconds between two of an answer's events (None: all
        # at once); and the answer's events after which to hold the rest
        # until release is set (reached is set then).
        self.delta_every: float | None = None
        self.hold_after_events: int | None = None
        # Answer with this many stamps instead of the last output: each the
        # time it was written (STAMP); streamed, a delta each, written as it
        # is sent, so that a reader can tell when the model sent each delta.
        self.stamps: int | None = None
        # Answer with a body that is not JSON (cut short, as by a broken proxy).
        self.malformed = False
        # Answer every request 200 with this body, of this Content-Type,
        # instead (a web page, an error object).
        self.answer_200: tuple[str, bytes] | None = None
        # Report these input and output tokens in every answer instead of
        # its own count (negative, absurd).
        self.usage: tuple[int, int] | None = None
        # A storm: from its first request until `storm` seconds later, answer
        # 429 with Retry-After `retry_after` and 500, in turn.
        self.storm: float | None = None
        self.retry_after = 10
        self._storm_began: float | None = None
        # Each request: when it came (time.monotonic()) and the status answered.
        self.answered: list[tuple[float, int]] = []
        self.requests = 0
        # Each request's body, as the worker sent it.
        self.bodies: list[dict[str, Any]] = []
        # The input and output tokens each answer reported, in order.
        self.reported: list[tuple[int, int]] = []
        # Set hold_at_step to hold the request made after that many commands
        # until release is set; reached is set when it arrives.
        self.hold_at_step: int | None = None
        self.reached = threading.Event()
        self.release = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/v1"

    def storming(self) -> int | None:
        """The status a storm answers now with (429 or 500), or None."""
        if self.storm is None:
            return None
        now = time.monotonic()
        self._storm_began = self._storm_began or now
        if now - self._storm_began >= self.storm:
            return None
        return 500 if self.answered and self.answered[-1][1] == 429 else 429

    def respond(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests += 1
        self.bodies.append(request)
        if self.error_status is not None:
            return self.error_status, {
                "error": {"message": "Incorrect API key provided.", "type": "invalid_request_error"}
            }
        status = self.storming()
        if status is not None:
            kind = "rate_limit_exceeded" if status == 429 else "server_error"
            error = {"message": f"A storm: {status}.", "type": kind}
            return status, {"error": error}
        outputs = tool_outputs(request.get("input", []))
        step = steps_done(request.get("input", []))
        if step == self.hold_at_step:
            self.reached.set()
            self.release.wait()
            self.hold_at_step = None
        answer_now = False
        if self.ends is not None:
            prompt = len(user_messages(request.get("input", [])))
            answer_now = step >= self.ends[min(max(prompt, 1), len(self.ends)) - 1]
            if answer_now:
                printed = outputs[-1].split("Output:\n", 1)[-1] if outputs else ""
                outputs = [*outputs, f"prompt {prompt}: {printed}"]
        if step < len(self.commands) and not answer_now:
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{step}",
                "call_id": f"call_{step}",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": self.commands[step]}),
                "status": "completed",
            }
        else:
            text = outputs[-1] if outputs else "nothing to do"
            if self.stamps is not None:
                text = stamp() * self.stamps
            item = {
                "type": "message",
                "id": f"msg_{step}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        # About four bytes a token, as for English text.
        tokens = (len(json.dumps(request.get("input", []))) // 4, len(json.dumps(item)) // 4)
        tokens = self.usage or tokens
        self.reported.append(tokens)
        return 200, {
            "id": f"resp_{self.requests}",
            "object": "response",
            "created_at": 0,
            "model": request.get("model", "scripted"),
            "status": "completed",
            "output": [item],
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": tokens[0],
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": tokens[1],
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": sum(tokens),
            },
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                api = {
                    "/v1/responses": "responses",
                    "/v1/chat/completions": "chat_completions",
                }.get(self.path.rstrip("/"))
                if api not in server.apis:
                    # As an endpoint without the API does: a 404 with no word of a model.
                    self.send_error(404)
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.apis_called.append(api)
                request = json.loads(body)
                if api == "chat_completions":
                    status, reply = server.respond({**request, "input": responses_input(request)})
                    if status == 200:
                        reply = chat_completion(reply)
                else:
                    status, reply = server.respond(request)
                server.answered.append((time.monotonic(), status))
                data = json.dumps(reply).encode()
                if server.malformed:
                    data = data[: len(data) // 2]
                content_type = "application/json"
                if server.answer_200 is not None:
                    status, (content_type, data) = 200, server.answer_200
                # Asked to stream, its answer streams; a web page, an error
                # object or a body cut short comes as it is, as from an
                # endpoint (or proxy) that answers a streamed request so.
                streamed = request.get("stream") is True
                scripted = server.answer_200 is None and not server.malformed
                events = [data]
                if streamed and status == 200 and scripted:
                    size = len(stamp()) if server.stamps else 8
                    if api == "responses":
                        events = server_sent_events(reply, size)
                    else:
                        events = chat_completion_chunks(reply, size)
                    data = b"".join(events)
                    content_type = "text/event-stream"
                sent: list[bytes] = []
                try:
                    self.send_response(status)
                    if status == 429:
                        self.send_header("Retry-After", str(server.retry_after))
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    for n, event in enumerate(events):
                        if n and server.delta_every is not None:
                            time.sleep(server.delta_every)
                        if n and n == server.hold_after_events and len(events) > n + 1:
                            server.hold_after_events = None
                            server.reached.set()
                            server.release.wait()
                        if server.stamps is not None and streamed:
                            event = stamped(event, sent)
                        self.wfile.write(event)
                        self.wfile.flush()
                except OSError:
                    pass  # the client is gone (a worker that was killed)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


@contextmanager
def scripted_openai_server(
    commands: Sequence[str],
    *,
    error_status: int | None = None,
    prompts: Sequence[Sequence[str]] | None = None,
    apis: Sequence[str] = ("responses",),
) -> Iterator[ScriptedOpenAIServer]:
    """An OpenAI-compatible endpoint on loopback, its model scripted to run
    ``commands`` one per turn, then answer; served while the block runs.

    Args:
        commands: the shell commands the model runs, in order.
        error_status: answer every request with this status instead.
        prompts: for each prompt of a conversation, its own commands.
        apis: the APIs it serves ("responses", "chat_completions").

    Returns:
        A context manager giving the server (its ``url``, what it was asked).
    """
    server = ScriptedOpenAIServer(commands, error_status=error_status, prompts=prompts, apis=apis)
    thread = threading.Thread(target=server._server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server._server.shutdown()
        server._server.server_close()
