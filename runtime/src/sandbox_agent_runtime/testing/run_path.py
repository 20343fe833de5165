"""The path a run takes through the service's modules, as its recorded
history replays: which module calls into which, in order.

``traced()`` replays a history with a profiler (``sys.setprofile``, and
``threading.setprofile`` for the workflow's threads) noting every call, from
the workflow's ``run_agent`` on, into a module of the runtime or of the
project's package from another of them: the calling module being the nearest
of these up the stack, the SDKs' frames in between skipped. A coroutine
resumed after an ``await`` is not a call (its ``RESUME`` is not the
function's first). Left out: the modules the data converter calls whatever
the run does (``encryption``, ``payloads``), the workflow interceptors'
methods (they pass each call on, as the SDK's frames do: ``costs`` counting
the run's actions) and the test helpers.

``Layers`` ranks each module by the runtime's ``[tool.importlinter]``
contracts (pyproject.toml): a top-level module by its layer, a module of a
package with a contract of its own (``phases``, ``starter``, ``workspace``)
by its layer in the package too. A **climb** is an entry into a module
ranked above its caller's: a call back up, into a module that imports the
caller's. The project's own modules (its workflow type, its agent) stand
outside the layers: the workflow asks the project's subclass for its agent.

The tests hold the runtime to it (tests/test_run_path.py), and
``benchmarks/in_project.py run_path`` prints the figures for a project.
"""

import dis
import sys
import threading
import tomllib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from temporalio.worker import WorkflowInboundInterceptor, WorkflowOutboundInterceptor

RUNTIME = "sandbox_agent_runtime."
# Called by the SDK's data converter, whatever the run does.
CONVERTER = ("encryption", "payloads")
# A workflow interceptor passes each call on: it is no caller, nor called,
# and what it calls (costs counting an action) is no call from the run.
INTERCEPTORS = (WorkflowInboundInterceptor, WorkflowOutboundInterceptor)
_RESUME = dis.opmap["RESUME"]
# The run's phases: the workflow and the modules it takes in order
# (phases/), but the records they share (the run's progress, what it is
# given), which any of them may use.
PHASES = frozenset(
    {
        "workflow",
        "phases.begin",
        "phases.prompting",
        "phases.deciding",
        "phases.between",
        "phases.interruptions",
        "phases.ending",
    }
)


@dataclass(frozen=True)
class Entry:
    """A call into ``called`` (a module, or None) from ``calling``."""

    calling: str
    called: str
    function: str


def module_of(frame: FrameType, package: str) -> str | None:
    """The module of ``frame`` (the runtime's by its name inside the
    runtime) when it is the runtime's, but the test helpers', the data
    converter's and a workflow interceptor's, or the project's
    ``package``'s; else None."""
    module = str(frame.f_globals.get("__name__", ""))
    if _intercepting(frame):
        return None
    if module.startswith(RUNTIME):
        module = module.removeprefix(RUNTIME)
        return None if module.startswith(("testing", *CONVERTER)) else module
    return module if module.startswith(package + ".") else None


def _intercepting(frame: FrameType) -> bool:
    """Whether ``frame`` runs a method of a workflow interceptor (its class
    looked up by name in its module: its ``self`` may be one of the workflow
    sandbox's proxies, which ``isinstance`` must not touch)."""
    owner = frame.f_globals.get(frame.f_code.co_qualname.partition(".")[0])
    return isinstance(owner, type) and issubclass(owner, INTERCEPTORS)


def _first_call(frame: FrameType) -> bool:
    """Whether a ``call`` event is the function's start (at its first
    ``RESUME``), not a coroutine or generator resumed, or thrown into or
    closed where it waits: the garbage collector closing a finished
    replay's workflow coroutines, at any moment and under whatever frame
    happens to run then, would otherwise read as calls from that frame."""
    code, at = frame.f_code.co_code, frame.f_lasti
    if at < 0:
        return True
    return at + 1 < len(code) and code[at] == _RESUME and code[at + 1] & 3 == 0


def traced(replay: Callable[[], Awaitable[None]], package: str) -> list[Entry]:
    """Each entry into a module while ``replay()`` runs (from the
    workflow's ``run_agent`` on), in order."""
    import asyncio

    entries: list[Entry] = []
    following = False

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal following
        if event != "call":
            return
        called = module_of(frame, package)
        if called is None or not _first_call(frame):
            return
        if frame.f_code.co_name == "run_agent" and called == "workflow":
            following = True
        if not following:
            return
        caller = frame.f_back
        while caller is not None and module_of(caller, package) is None:
            if _intercepting(caller):
                return  # what an interceptor calls is its own business
            caller = caller.f_back
        calling = module_of(caller, package) if caller is not None else None
        if calling is not None and calling != called:
            entries.append(Entry(calling, called, frame.f_code.co_name))

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        asyncio.run(replay())  # type: ignore[arg-type]
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return entries


class Layers:
    """The runtime's modules ranked by its import contracts (the
    ``[tool.importlinter]`` of its ``pyproject``)."""

    def __init__(self, pyproject: Path) -> None:
        contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
        self.levels: dict[str, dict[str, int]] = {}
        for contract in contracts:
            if contract["type"] != "layers":
                continue  # an independence contract ranks nothing
            [container] = contract["containers"]
            container = container.removeprefix(RUNTIME.rstrip(".")).lstrip(".")
            order = list(reversed(contract["layers"]))
            self.levels[container] = {
                name.strip(): level
                for level, layer in enumerate(order)
                for name in layer.split("|")
            }

    def rank(self, module: str) -> tuple[int, ...] | None:
        """``module``'s rank (higher: above), None outside the runtime."""
        parts = module.split(".")
        top = self.levels[""].get(parts[0])
        if top is None:
            return None
        inner = self.levels.get(parts[0], {}).get(parts[1]) if len(parts) > 1 else None
        return (top,) if inner is None else (top, inner)

    def climbs(self, entries: Sequence[Entry]) -> list[Entry]:
        """The entries into a module ranked above the caller's."""
        found = []
        for entry in entries:
            below, above = self.rank(entry.calling), self.rank(entry.called)
            if below is None or above is None:
                continue
            if above[0] > below[0] or (
                above[0] == below[0] and len(above) == len(below) == 2 and above[1] > below[1]
            ):
                found.append(entry)
        return found
