"""Callbacks (docs/callbacks.md): the page's receiver, run as written
(tests/callbacks_example.py, word for word), takes a real run's callback,
signed with the worker's CALLBACK_SECRET, and refuses a message it did not
sign."""

import base64
import http.server
import os
import re
import threading
import time
from pathlib import Path

import pytest
from temporalio.client import Client

from sandbox_agent_runtime import RunRequest, start
from sandbox_agent_runtime.testing import ScriptedModel, running_worker, settings_with

from tests import callbacks_example

DOCS = Path(__file__).resolve().parents[1] / "docs" / "callbacks.md"
SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()


def test_the_docs_show_the_receiver_as_it_runs() -> None:
    source = Path(callbacks_example.__file__).read_text()
    [block] = re.findall(
        r"# docs/callbacks.md: receiver.py\n(.*?)# docs/callbacks.md: end\n", source, re.S
    )
    assert f"```python\n{block.strip()}\n```" in DOCS.read_text()


async def test_the_docs_receiver_takes_a_runs_callback(
    temporal_client: Client,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(callbacks_example, "SECRET", SECRET)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), callbacks_example.Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings = settings_with({"CALLBACK_HOSTS": "127.0.0.1", "CALLBACK_SECRET": SECRET})
    try:
        async with running_worker(
            temporal_client, ScriptedModel(["echo called-back"]), settings=settings
        ) as (client, _):
            url = f"http://127.0.0.1:{server.server_address[1]}/runs"
            handle = await start(client, RunRequest("Say it.", callback_url=url))
            await handle.result()
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    printed = capsys.readouterr().out
    assert f"run {handle.id} completed: " in printed and "called-back" in printed
    assert len(callbacks_example.HANDLED) == 1
    with pytest.raises(ValueError, match="no signature matches"):
        now = str(int(time.time()))
        callbacks_example.verify(SECRET, "msg_1", now, "v1,bm90IGl0", b'{"data": null}')
