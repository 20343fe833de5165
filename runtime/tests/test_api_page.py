"""The API's page for people (api/page/), in a real browser: headless
Chromium (sandbox_agent_runtime.testing.browser) on the page an API process
serves, beside a dev server, the service's worker (a process) and a
scripted model.

The decision a person signs in the page is, byte for byte, what Python's
``approvers.message()`` makes, whatever the request and the reason hold
(non-ASCII, characters above U+FFFF, control characters, DEL, quotes), and
the page's key is the person's; a person starts a run with a file in the
page and sees its steps (each once, across a dropped connection), its
answer and its outputs, on a wide screen and on a phone. The approvals are
proven against the remote stand-in (tests/remote/test_api_page_approvals.py).
Screenshots go to the test's temporary directory and, when
``API_PAGE_SCREENSHOTS`` names a directory, there too."""

import asyncio
import base64
import json
import os
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from temporalio.client import Client

from sandbox_agent_runtime import approvers
from sandbox_agent_runtime.api.events import STEP_NAMES
from sandbox_agent_runtime.testing import approver
from sandbox_agent_runtime.testing.api_client import TOKENS, ApiProcess, api_process, read_events
from sandbox_agent_runtime.testing.browser import (
    Browser,
    Page,
    chromium,
    evaluate,
    headless_chromium,
    wait_for,
)
from sandbox_agent_runtime.testing.processes import WORKER, service, service_environment
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(
        chromium() is None,
        reason="no Chromium on this machine (apt-get install chromium, or set CHROMIUM)",
    ),
]

# What the agent does: count the rows of the file the person attached, and
# write two files; a follow-up reads one back, with the file it brought.
PROMPTS = [
    ["(cat data.csv 2>/dev/null | wc -l) > rows.txt; echo made > made.txt; ls"],
    ["cat made.txt more.txt"],
]
DATA = b"a,b\n1,2\n3,4\n"

# Text that Python's json.dumps and JavaScript's JSON.stringify write
# differently, or that a careless canonical form gets wrong: non-ASCII (é),
# a CJK character, an emoji above U+FFFF (a surrogate pair), DEL (escaped by
# Python), control characters (short and \u00xx forms), quotes, backslashes,
# the separators U+2028/U+2029 and a slash (never escaped).
AWKWARD = 'é 中 😀 \t|\n|\r|\b|\f|\x01|\x1f|\x7f|\x80|"q"|\\|/|\u2028\u2029|\ufeff|\uffff'


async def open_page(page: Page, url: str) -> None:
    """Load the API's page and wait until its script and stylesheet are in."""
    await page.send("Page.navigate", url=url)
    await wait_for(
        page,
        "document.readyState === 'complete' && !!window.sandboxAgent"
        " && getComputedStyle(document.querySelector('main')).display === 'grid'",
    )


async def type_into(page: Page, selector: str, text: str) -> None:
    """Type ``text`` into the field ``selector``, as a person's keyboard would."""
    await evaluate(
        page,
        f"(e => {{ e.focus(); e.value = ''; }})(document.querySelector({json.dumps(selector)}))",
    )
    await page.send("Input.insertText", text=text)


async def click(page: Page, selector: str) -> None:
    await evaluate(page, f"document.querySelector({json.dumps(selector)}).click()")


async def attach(page: Page, selector: str, *paths: Path) -> None:
    """Choose ``paths`` in the file input ``selector``, as a person would."""
    found = await page.send(
        "Runtime.evaluate", expression=f"document.querySelector({json.dumps(selector)})"
    )
    await page.send(
        "DOM.setFileInputFiles",
        files=[str(path) for path in paths],
        objectId=found["result"]["objectId"],
    )


async def text_of(page: Page, selector: str) -> str:
    found = await evaluate(
        page, f"document.querySelector({json.dumps(selector)})?.textContent ?? ''"
    )
    return str(found)


async def screenshot(page: Page, tmp_path: Path, name: str) -> Path:
    """The page as shown, in ``tmp_path`` and in API_PAGE_SCREENSHOTS if set."""
    shot = await page.screenshot(tmp_path / name)
    print(f"screenshot: {shot}")
    kept = os.environ.get("API_PAGE_SCREENSHOTS")
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        (Path(kept) / name).write_bytes(shot.read_bytes())
        print(f"screenshot: {Path(kept) / name}")
    return shot


async def use_token(page: Page, token: str) -> None:
    await type_into(page, "#token", token)
    await click(page, "#token-form button[type=submit]")
    await wait_for(page, "document.querySelector('#token-form').hidden")


def js(value: Any) -> str:
    """``value`` as a JavaScript literal (JSON, ASCII only)."""
    return json.dumps(value)


class Stack:
    def __init__(self, api: ApiProcess, browser: Browser) -> None:
        self.api = api
        self.browser = browser


@pytest.fixture(scope="module")
async def stack(
    temporal_client: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server([], prompts=PROMPTS) as model:
        environment = service_environment(address, model.url)
        async with (
            service(WORKER, environment) as worker,
            api_process(environment) as api,
            headless_chromium(str(chromium()), tmp_path_factory.mktemp("chromium")) as browser,
        ):
            await worker.wait_for("Worker polling")
            yield Stack(api, browser)


async def test_a_decision_signed_in_the_page_is_pythons_message_byte_for_byte(
    stack: Stack,
) -> None:
    page = await stack.browser.new_page()
    await open_page(page, f"{stack.api.url}/")
    workflow_id = "sandbox-agent-0f6e-é"
    run_id = "0196a3c1-7e52-7cc1-9f0e-2a4b5c6d7e8f"
    request = {"call_id": 'call_"é"\\😀', "tool": "exec_command", "detail": f"$ echo {AWKWARD}"}
    reason = f"pas ce fichier-là, désolé {AWKWARD}"

    for approve, always in ((True, False), (False, True)):
        expected = approvers.message(workflow_id, run_id, request, approve, always, reason)
        made = await evaluate(
            page,
            "window.sandboxAgent.decisionMessage("
            + js(
                {
                    "workflowId": workflow_id,
                    "runId": run_id,
                    "callId": request["call_id"],
                    "tool": request["tool"],
                    "detail": request["detail"],
                    "approve": approve,
                    "always": always,
                    "reason": reason,
                }
            )
            + ")",
        )
        assert made == expected.decode("ascii")

    # What the person was shown: the SHA-256 of its UTF-8.
    shown = await evaluate(page, f"window.sandboxAgent.sha256Hex({js(request['detail'])})")
    assert shown == approvers.digest(request["detail"])

    # The canonical form of any value a decision may hold; keys sorted by
    # code point, as Python sorts them (U+FFFF before U+1F600, which a
    # UTF-16 sort puts the other way round), and a lone surrogate.
    value = {
        "😀": 1,
        "\uffff": [True, False, None, -7, 0],
        "é": {"z": "", "a": AWKWARD, "\ud800": "\udfff"},
        "B": "b",
        "a": "\x7f",
    }
    made = await evaluate(page, f"window.sandboxAgent.canonicalJson({js(value)})")
    assert made == json.dumps(value, sort_keys=True, separators=(",", ":"))

    # The person's key, loaded from its PEM: the public key is theirs, and a
    # signature made in the page verifies over Python's message.
    pem = approver.KEY.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = await evaluate(page, f"window.sandboxAgent.loadKey({js(pem)})")
    assert public == approver.PUBLIC
    message = approvers.message(workflow_id, run_id, request, True, False, reason)
    signature = await evaluate(page, f"window.sandboxAgent.sign({js(message.decode())})")
    approver.KEY.public_key().verify(base64.b64decode(signature), message)


async def test_a_person_starts_a_run_in_the_page_and_sees_its_steps_answer_and_outputs(
    stack: Stack, tmp_path: Path
) -> None:
    data = tmp_path / "data.csv"
    data.write_bytes(DATA)
    page = await stack.browser.new_page()
    await open_page(page, f"{stack.api.url}/")

    # A token the API does not know: its problem is shown, and asked again.
    await use_token(page, "not-a-token")
    await type_into(page, "#prompt", "Count the rows.")
    await click(page, "#start-button")
    alert = await wait_for(
        page,
        "!document.querySelector('#alert').hidden && document.querySelector('#alert').textContent",
    )
    async with stack.api.client(None) as anyone:
        refused = await anyone.get("/v1/runs/x", headers={"Authorization": "Bearer not-a-token"})
    assert refused.status_code == 401
    assert alert == refused.json()["detail"]
    assert not await evaluate(page, "document.querySelector('#token-form').hidden")
    assert await evaluate(page, "document.activeElement.id") == "token"

    await use_token(page, TOKENS["alice"])
    await attach(page, "#files", data)
    await click(page, "#start-button")
    await wait_for(page, "document.querySelectorAll('#steps li').length > 0")
    # The connection drops under the page while the run works: it reconnects.
    await evaluate(page, "window.sandboxAgent.dropConnection()")
    answer = await wait_for(page, "document.querySelector('.answer .answer-text')?.textContent")
    await wait_for(page, "document.querySelector('#run-state').textContent.includes('ended')")
    workflow_id = await text_of(page, "#run-id")
    shot = await screenshot(page, tmp_path, "page-run.png")
    # Read from the start, then again after the drop (Last-Event-ID).
    assert await evaluate(page, "document.querySelector('#run').dataset.connections") == "2"

    # Every step the API streams, in its order, each once: the page's steps
    # are the events a client reads in one go.
    async with stack.api.client("alice") as client:
        events = await read_events(client, workflow_id)
    steps = await evaluate(
        page,
        "[...document.querySelectorAll('#steps li')].map(li => [li.dataset.eventId,"
        " li.querySelector('.step-name').textContent, li.querySelector('.step-text').textContent])",
    )
    names = {*STEP_NAMES, "step", "failure"}
    assert steps == [
        [event.id, event.name, event.data["text"]] for event in events if event.name in names
    ], shot
    assert ["sandbox", "input data.csv (12 B)"] in [step[1:] for step in steps]
    assert answer == next(event.data["text"] for event in events if event.name == "answer")
    assert "made.txt" in answer and "rows.txt" in answer
    outputs = await evaluate(
        page, "[...document.querySelectorAll('.answer .outputs li code')].map(c => c.textContent)"
    )
    assert sorted(outputs) == ["made.txt", "rows.txt"]
    assert await text_of(page, "#run-state") == "The run ended (completed)."

    # The outputs, fetched with the token: a link to the archive, named for the run.
    await click(page, "#outputs-button")
    href = await wait_for(
        page,
        "!document.querySelector('#download').hidden && document.querySelector('#download').href",
    )
    assert href.startswith("blob:")
    assert await evaluate(page, "document.querySelector('#download').download") == (
        f"{workflow_id}-outputs.tar.gz"
    )
    # A person's click on it saves the archive (the page's CSP lets no
    # script read a blob: URL, and needs not: the browser downloads it).
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    await page.send("Page.setDownloadBehavior", behavior="allow", downloadPath=str(downloads))
    await click(page, "#download")
    saved = downloads / f"{workflow_id}-outputs.tar.gz"
    async with asyncio.timeout(20):
        while not saved.exists():
            await asyncio.sleep(0.1)
    with tarfile.open(saved) as tar:
        files = {member.name: tar.extractfile(member).read() for member in tar if member.isfile()}  # type: ignore[union-attr]
    assert files == {"made.txt": b"made\n", "rows.txt": b"3\n"}
    await screenshot(page, tmp_path, "page-run-outputs.png")

    # On a phone: one column, nothing wider than the screen.
    await page.send(
        "Emulation.setDeviceMetricsOverride",
        width=390,
        height=844,
        deviceScaleFactor=2,
        mobile=True,
    )
    columns = await evaluate(
        page, "getComputedStyle(document.querySelector('main')).gridTemplateColumns"
    )
    assert len(columns.split()) == 1, columns
    assert await evaluate(page, "document.documentElement.scrollWidth") <= 390
    await screenshot(page, tmp_path, "page-run-phone.png")


async def test_a_person_follows_up_in_the_page_then_ends_the_conversation(
    stack: Stack, tmp_path: Path
) -> None:
    more = tmp_path / "more.txt"
    more.write_text("and more\n")
    page = await stack.browser.new_page()
    await open_page(page, f"{stack.api.url}/")
    await use_token(page, TOKENS["alice"])
    await type_into(page, "#prompt", "Write made.txt.")
    await click(page, "#follow-ups")
    await click(page, "#start-button")
    first = await wait_for(page, "document.querySelector('.answer .answer-text')?.textContent")
    assert first.startswith("prompt 1: "), first
    # Answered, the conversation waits: the page offers a follow-up.
    await wait_for(page, "!document.querySelector('#follow-form').hidden")
    await type_into(page, "#follow-prompt", "Read made.txt.")
    await attach(page, "#follow-files", more)
    await click(page, "#follow-button")
    second = await wait_for(
        page, "document.querySelectorAll('.answer')[1]?.querySelector('.answer-text').textContent"
    )
    # The same workspace, and the file the follow-up brought.
    assert second == "prompt 2: made\nand more\n"
    assert await evaluate(
        page, "[...document.querySelectorAll('.answer h3')].map(h => h.textContent)"
    ) == ["Answer to prompt 1", "Answer to prompt 2"]
    await wait_for(page, "!document.querySelector('#follow-form').hidden")
    await screenshot(page, tmp_path, "page-conversation.png")
    await click(page, "#end-button")
    await wait_for(page, "document.querySelector('#run-state').textContent.includes('ended')")
    assert await evaluate(page, "document.querySelector('#follow-form').hidden")
    assert await text_of(page, "#alert") == ""
