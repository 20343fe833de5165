"""What one caller may hold at once, so that no caller grows the API (or
the service) without bound: its open event streams and its downloads, in
this API process (``Slots``), and its runs in flight, across the service
(``runs_in_flight``). Past a bound, a 429 with ``Retry-After``, naming the
setting that sets it (ApiSettings: API_STREAMS_PER_CALLER, ...)."""

import asyncio
import shutil
import tempfile
from collections import Counter
from collections.abc import AsyncIterable, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send
from temporalio.client import Client

from sandbox_agent_runtime.api.callers import Caller
from sandbox_agent_runtime.api.problems import Problem
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.shared import CALLER_MEMO

# What a 429 asks the caller to wait before it tries again (seconds).
RETRY_AFTER = 5


class Slots:
    """At most ``each`` held by one caller, and ``overall`` by all callers
    (None: no bound but each caller's), in this API process."""

    def __init__(
        self, what: str, each: tuple[int, str], overall: tuple[int, str] | None = None
    ) -> None:
        self.what = what
        self.each, self.each_setting = each
        self.overall, self.overall_setting = overall or (0, "")
        self.held: Counter[str] = Counter()

    def take(self, caller: Caller) -> Callable[[], None]:
        """One slot for ``caller``, and what gives it back (once, however
        often it is called); a 429 when none is free."""
        if self.held[caller.owner] >= self.each:
            raise Problem(
                429,
                f"you have {self.held[caller.owner]:,} {self.what} open, the most one caller may "
                f"({self.each_setting}={self.each:,}): close one, or ask again in "
                f"{RETRY_AFTER} s.",
                retry_after=RETRY_AFTER,
            )
        if self.overall and self.held.total() >= self.overall:
            raise Problem(
                429,
                f"{self.held.total():,} {self.what} are open, the most this API serves at once "
                f"({self.overall_setting}={self.overall:,}): ask again in {RETRY_AFTER} s.",
                retry_after=RETRY_AFTER,
            )
        self.held[caller.owner] += 1
        given_back = False

        def give_back() -> None:
            nonlocal given_back
            if not given_back:
                given_back = True
                self.held[caller.owner] -= 1
                if self.held[caller.owner] <= 0:
                    del self.held[caller.owner]

        return give_back


class HeldStream(StreamingResponse):
    """A streamed answer that gives back what it holds (``release``) once it
    ends, however it ends: sent whole, its client gone, or never started."""

    def __init__(
        self, content: AsyncIterable[bytes], release: Callable[[], None], **options: Any
    ) -> None:
        super().__init__(content, **options)
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


@dataclass
class _Making:
    directory: Path
    task: "asyncio.Task[Path]"
    users: int = 0


class SharedFiles:
    """A file made once for everyone who asks for it by the same key while
    it is in use (a run's outputs archive, for downloads of it by its owner
    at once: its answer is read, and the archive made, once), in a
    directory of its own removed when the last of them lets go."""

    def __init__(self) -> None:
        self.making: dict[tuple[str, str], _Making] = {}

    async def get(
        self, key: tuple[str, str], make: Callable[[Path], Awaitable[Path]]
    ) -> tuple[Path, Callable[[], None]]:
        """The file ``make`` makes in a directory it is given, and what lets
        go of it (once, however often it is called)."""
        making = self.making.get(key)
        if making is None or (making.task.done() and making.task.exception() is not None):
            directory = Path(tempfile.mkdtemp(prefix="api-outputs-"))
            making = _Making(directory, asyncio.ensure_future(make(directory)))
            self.making[key] = making
        making.users += 1
        let_go = False

        def release() -> None:
            nonlocal let_go
            if let_go:
                return
            let_go = True
            making.users -= 1
            if making.users == 0:
                if self.making.get(key) is making:
                    del self.making[key]
                making.task.cancel()
                shutil.rmtree(making.directory, ignore_errors=True)

        try:
            return await asyncio.shield(making.task), release
        except BaseException:
            release()
            raise


async def runs_in_flight(client: Client, caller: Caller, most: int) -> None:
    """A 429 when ``caller`` has ``most`` runs of this service still going
    (API_RUNS_IN_FLIGHT_PER_CALLER), as Temporal's visibility lists them
    (a run just started may take a moment to be listed)."""
    service = current()
    query = f"TaskQueue = '{service.task_queue}' AND ExecutionStatus = 'Running'"
    going = 0
    async for execution in client.list_workflows(query, page_size=1000):
        if (await execution.memo()).get(CALLER_MEMO) == caller.owner:
            going += 1
            if going >= most:
                raise Problem(
                    429,
                    f"you have {going:,} runs going, the most one caller may "
                    f"(API_RUNS_IN_FLIGHT_PER_CALLER={most:,}): end a conversation, or wait for "
                    f"a run to end and ask again (in {RETRY_AFTER} s or later).",
                    retry_after=RETRY_AFTER,
                )
