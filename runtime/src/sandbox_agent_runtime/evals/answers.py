"""The checks on a run's answer that a dataset's patterns drive
(``answer_matches``, ``answer_json_schema``), each made in a child process
under a time limit.

Python's regular expressions backtrack: a pattern such as ``(a+)+$`` takes
longer than the universe's age on a few dozen characters, and holds the
interpreter while it does (a thread cannot be stopped). A schema's
``pattern`` and ``patternProperties`` are the same kind of expression. So
each check runs in a process of its own, given ``CHECK_SECONDS`` once its
imports are done; past it the process is killed and the check fails in one
line saying so, and the evaluation goes on with its other attempts. A
schema resolves its ``$ref`` within itself only (``dataset.schema_validator``):
nothing is fetched, in the child either.
"""

import asyncio
import json
import math
import re
import resource
import sys
from typing import Any

import jsonschema  # type: ignore[import-untyped,unused-ignore]
import referencing.exceptions

from sandbox_agent_runtime.evals.dataset import schema_validator

# How long one check of an answer may take, its process's start aside.
CHECK_SECONDS = 10.0
# How long its process may take to start and import what it needs.
START_SECONDS = 60.0

# What the child says once it is ready for the answer.
_READY = b"ready\n"

# (the check that failed, why), or None when it passes.
Failure = tuple[str, str] | None


def failure(kind: str, given: Any, text: str) -> Failure:
    """Whether ``text`` passes the check ``kind`` with ``given`` (a
    pattern, or a schema), in this process and with no time limit."""
    if kind == "answer_matches":
        if re.search(given, text) is None:
            return kind, f"the answer does not match the pattern {given}"
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        return kind, f"the answer is not JSON ({e})"
    try:
        schema_validator(given).validate(value)
    except jsonschema.ValidationError as e:
        return kind, f"the answer does not fit the schema: {e.message}"
    except referencing.exceptions.Unresolvable as e:
        return kind, f"the schema refers to {e.ref!r}, which is not in it (nothing is fetched)"
    return None


async def checked(kind: str, given: Any, text: str) -> Failure:
    """``failure()`` made in a child process: a check that takes over
    ``CHECK_SECONDS`` fails, saying so, and its process is killed."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-P",  # not the current directory's modules (a json.py there, say)
        "-c",
        "from sandbox_agent_runtime.evals.answers import child; child()",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        ready = await asyncio.wait_for(child.stdout.readline(), START_SECONDS)
        if ready != _READY:
            return kind, "the check could not be made: its process did not start"
        asked = {"kind": kind, "given": given, "text": text, "seconds": CHECK_SECONDS}
        child.stdin.write(json.dumps(asked).encode())
        await child.stdin.drain()
        child.stdin.close()
        said = await asyncio.wait_for(child.stdout.read(), CHECK_SECONDS)
    except TimeoutError:
        return kind, (
            f"the check took over {CHECK_SECONDS:g} s and was stopped "
            "(a pattern that backtracks without end?)"
        )
    except (BrokenPipeError, ConnectionResetError):
        said = b""
    finally:
        if child.returncode is None:
            child.kill()
        await child.wait()
    try:
        found = json.loads(said)
    except ValueError:
        return (
            kind,
            f"the check could not be made: its process ended with status {child.returncode}",
        )
    return None if found is None else (str(found[0]), str(found[1]))


def child() -> None:
    """The child's side: ready, then one check read from stdin, its
    ``failure()`` written to stdout as JSON. Its CPU time is limited too,
    so it ends by itself should its parent die before killing it."""
    sys.stdout.buffer.write(_READY)
    sys.stdout.buffer.flush()
    asked = json.loads(sys.stdin.buffer.read())
    limit = math.ceil(asked["seconds"]) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 1))
    try:
        found = failure(asked["kind"], asked["given"], asked["text"])
    except RecursionError:
        found = (asked["kind"], "the check could not be made: the answer is nested too deep")
    sys.stdout.write(json.dumps(found))
    sys.stdout.flush()
