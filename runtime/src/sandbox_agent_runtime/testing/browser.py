"""A real browser for the tests: headless Chromium, driven over the Chrome
DevTools Protocol (CDP) with a websocket, as a person's browser would load a
page (test_codec_ui.py: the Web UI through the codec server).

Debian's and Ubuntu's ``chromium`` package (``apt-get install chromium``) or
Google Chrome; ``CHROMIUM`` names another binary. ``chromium()`` is None when
there is none, and the tests that need one skip, saying so."""

import asyncio
import itertools
import json
import os
import shutil
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import websockets

BINARIES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium() -> str | None:
    """The browser's binary, or None when this machine has none."""
    named = os.environ.get("CHROMIUM")
    if named:
        return shutil.which(named)
    return next((found for name in BINARIES if (found := shutil.which(name))), None)


class Page:
    """One tab: CDP commands go to it, its events are read as they come."""

    def __init__(self, connection: Any, session: str, ids: "itertools.count[int]") -> None:
        self.connection = connection
        self.session = session
        self.ids = ids
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self.ids)
        answer = asyncio.get_running_loop().create_future()
        self.waiting[number] = answer
        message = {"id": number, "method": method, "params": params, "sessionId": self.session}
        await self.connection.send(json.dumps(message))
        return await asyncio.wait_for(answer, 30)

    async def text(self) -> str:
        """What the page shows, as text (``document.body.innerText``)."""
        found = await self.send(
            "Runtime.evaluate", expression="document.body ? document.body.innerText : ''"
        )
        return str(found.get("result", {}).get("value", ""))

    async def screenshot(self, path: Path) -> Path:
        import base64

        shot = await self.send("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


class Browser:
    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.ids = itertools.count(1)
        self.pages: dict[str, Page] = {}
        self.browser_waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for raw in self.connection:
            message = json.loads(raw)
            if "id" not in message:
                continue  # an event: not needed here
            page = self.pages.get(message.get("sessionId", ""))
            waiting = page.waiting if page is not None else self.browser_waiting
            answer = waiting.pop(message["id"], None)
            if answer is not None and not answer.done():
                if "error" in message:
                    answer.set_exception(RuntimeError(f"CDP: {message['error']}"))
                else:
                    answer.set_result(message.get("result", {}))

    async def _send(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self.ids)
        answer = asyncio.get_running_loop().create_future()
        self.browser_waiting[number] = answer
        await self.connection.send(json.dumps({"id": number, "method": method, "params": params}))
        return await asyncio.wait_for(answer, 30)

    async def new_page(self, headers: dict[str, str] | None = None) -> Page:
        """A fresh tab (its own browser context: no cookies, no storage of
        another), sending ``headers`` with every request it makes."""
        context = await self._send("Target.createBrowserContext")
        target = await self._send(
            "Target.createTarget", url="about:blank", browserContextId=context["browserContextId"]
        )
        attached = await self._send(
            "Target.attachToTarget", targetId=target["targetId"], flatten=True
        )
        page = Page(self.connection, attached["sessionId"], self.ids)
        self.pages[page.session] = page
        await page.send("Page.enable")
        await page.send("Network.enable")
        if headers:
            await page.send("Network.setExtraHTTPHeaders", headers=headers)
        return page

    async def close(self) -> None:
        self._reader.cancel()


@asynccontextmanager
async def headless_chromium(binary: str, profile: Path) -> AsyncIterator[Browser]:
    """Chromium, headless, with a profile of its own in ``profile``."""
    process = await asyncio.create_subprocess_exec(
        binary,
        "--headless=new",
        "--no-sandbox",  # root in CI containers
        "--disable-gpu",
        "--no-first-run",
        "--remote-debugging-port=0",
        f"--user-data-dir={profile}",
        "--window-size=1400,1000",
        "about:blank",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        async with asyncio.timeout(30):
            while not port_file.exists() or len(port_file.read_text().splitlines()) < 2:
                await asyncio.sleep(0.1)
        port, path = port_file.read_text().splitlines()[:2]
        async with websockets.connect(f"ws://127.0.0.1:{port}{path}", max_size=None) as connection:
            browser = Browser(connection)
            try:
                yield browser
            finally:
                await browser.close()
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()


async def evaluate(page: Page, expression: str) -> Any:
    """The value of ``expression`` in ``page`` (awaited when a promise), as
    JSON; a JavaScript exception raised as ``RuntimeError``, with its text."""
    found = await page.send(
        "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
    )
    if "exceptionDetails" in found:
        details = found["exceptionDetails"]
        raise RuntimeError(
            f"{details.get('exception', {}).get('description') or details.get('text')}"
        )
    return found.get("result", {}).get("value")


async def wait_for(page: Page, expression: str, timeout: float = 30.0) -> Any:
    """The value of ``expression`` in ``page`` once it is truthy (polled);
    ``TimeoutError`` after ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        while True:
            value = await evaluate(page, expression)
            if value:
                return value
            await asyncio.sleep(0.1)
