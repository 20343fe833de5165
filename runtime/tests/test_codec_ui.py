"""A person looking at an encrypted run in the Web UI, in a real browser:
through the codec server with its token they read the prompt, without it
only ciphertext (codec_server.py, docs/encryption.md).

A dev server of its own with its Web UI, pointed at the codec server
(``--ui-codec-endpoint``); a worker with PAYLOAD_ENCRYPTION_KEYS runs a
prompt; headless Chromium (tests/browser.py) opens the run's page. The
token travels as a proxy in front of the codec server, or Temporal Cloud's
"pass the access token", sends it: an ``Authorization`` header on the UI's
requests. Each page's screenshot is kept in the test's temporary directory
(pytest keeps the last three runs'), its path printed.
"""

import asyncio
import dataclasses
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from sandbox_agent_runtime.codec_server import Codec, CodecServer
from sandbox_agent_runtime.encryption import EncryptionCodec, parse_keys
from sandbox_agent_runtime.object_store import data_converter
from sandbox_agent_runtime.run_request import RunRequest
from sandbox_agent_runtime.settings import codec_server_settings
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing.browser import chromium, headless_chromium
from sandbox_agent_runtime.testing.object_stores import client_with
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import (
    SETTINGS,
    dev_server_options,
    free_port,
    running_worker,
)

from .test_encryption import TOKEN, A

PROMPT_MARK = "prompt-seen-in-the-browser-5e1a"

# What the Web UI says when the codec server does not decode for it.
REFUSED = "Codec Server could not connect"

# How long the Web UI gets to load a run's page and decode it.
PAGE_WAIT = 30.0

pytestmark = pytest.mark.skipif(
    chromium() is None,
    reason="no Chromium on this machine (apt-get install chromium, or set CHROMIUM)",
)


async def page_text_once(page, url: str, wanted: str, refused: str) -> str:  # type: ignore[no-untyped-def]
    """Open ``url``; the page's text once it shows ``wanted`` or ``refused``
    (or after PAGE_WAIT: whatever it shows then)."""
    await page.send("Page.navigate", url=url)
    text = ""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PAGE_WAIT
    while loop.time() < deadline:
        text = await page.text()
        if wanted in text or refused in text:
            break
        await asyncio.sleep(0.25)
    return text


@pytest.mark.process
async def test_the_web_ui_shows_the_prompt_through_the_codec_server_with_its_token_only(
    tmp_path: Path,
) -> None:
    keys = parse_keys(A)
    codec = EncryptionCodec(keys)
    ui_port, codec_port = free_port(), free_port()
    origin = f"http://127.0.0.1:{ui_port}"
    settings = codec_server_settings(
        {
            "PAYLOAD_ENCRYPTION_KEYS": A,
            "CODEC_SERVER_TOKEN": TOKEN,
            "CODEC_SERVER_ALLOWED_ORIGINS": origin,
        }
    )
    settings = dataclasses.replace(settings, address=("127.0.0.1", codec_port))
    server = CodecServer(
        settings, Codec(data_converter(None, codec=codec), codec), asyncio.get_running_loop()
    )
    serving = asyncio.create_task(asyncio.to_thread(server.http.serve_forever, 0.05))
    options = dev_server_options()
    options["dev_server_extra_args"] += ["--ui-codec-endpoint", server.url]
    try:
        async with await WorkflowEnvironment.start_local(
            ui=True, ui_port=ui_port, **options
        ) as environment:
            client = client_with(environment.client, data_converter(None, codec=codec))
            model = ScriptedModel(["echo done"])
            worker_settings = dataclasses.replace(SETTINGS, keys=keys)
            async with running_worker(client, model, settings=worker_settings) as (plugged, _):
                handle = await start(plugged, RunRequest(f"Say done. {PROMPT_MARK}"))
                await handle.result()
            url = f"{origin}/namespaces/{client.namespace}/workflows/{handle.id}"
            async with headless_chromium(str(chromium()), tmp_path / "profile") as browser:
                allowed = await browser.new_page({"Authorization": f"Bearer {TOKEN}"})
                shown = await page_text_once(allowed, url, PROMPT_MARK, REFUSED)
                shot = await allowed.screenshot(tmp_path / "with-the-token.png")
                print(f"screenshot: {shot}")
                assert PROMPT_MARK in shown, (shot, shown[:2000])

                anyone = await browser.new_page()
                shown = await page_text_once(anyone, url, PROMPT_MARK, REFUSED)
                shot = await anyone.screenshot(tmp_path / "without-the-token.png")
                print(f"screenshot: {shot}")
                assert PROMPT_MARK not in shown, (shot, shown[:2000])
                # The UI says the codec server refused it, and shows ciphertext.
                assert REFUSED in shown, (shot, shown[:2000])
    finally:
        server.http.shutdown()
        await serving
        server.http.server_close()
