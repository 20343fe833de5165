"""Approvals decided in the API's page, in a real browser (headless
Chromium), by a person with their own key: the page shows each pending
command exactly as the API lists it, signs the person's decision in the
browser (WebCrypto, Ed25519) over Python's canonical form, reasons with
non-ASCII text included, and the worker takes it; a key that is not one of
the worker's APPROVERS is refused, and the page says why. The API is a
process; the worker runs in the test, with a scripted model
(test_api_approvals.py). Screenshots as tests/test_api_page.py keeps them."""

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.client import Client

from sandbox_agent_runtime.testing import approver
from sandbox_agent_runtime.testing.api_client import TOKENS, api_process
from sandbox_agent_runtime.testing.browser import (
    chromium,
    evaluate,
    headless_chromium,
    wait_for,
)
from sandbox_agent_runtime.testing.processes import service_environment
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import running_worker

from ..test_api_page import attach, click, open_page, screenshot, text_of, type_into, use_token

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(
        chromium() is None,
        reason="no Chromium on this machine (apt-get install chromium, or set CHROMIUM)",
    ),
]

REASON = "pas ce fichier-là, désolé 中 😀"

# The cards of the requests still waiting for a decision.
OPEN_CARDS = "[...document.querySelectorAll('.approval:not(.settled)')]"


async def test_a_person_decides_the_pending_commands_in_the_page_with_their_key(
    temporal_client: Client, tmp_path: Path
) -> None:
    model = ScriptedModel(["touch rejected.txt", "printf 'it ran\\n'"])
    environment = service_environment(
        temporal_client.service_client.config.target_host, "http://127.0.0.1:9"
    )
    stranger = tmp_path / "stranger.pem"
    stranger.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    async with (
        running_worker(temporal_client, model, approve=False),
        api_process(environment) as api,
        api.client("alice") as alice,
        headless_chromium(str(chromium()), tmp_path / "profile") as browser,
    ):
        page = await browser.new_page()
        await open_page(page, f"{api.url}/")
        await use_token(page, TOKENS["alice"])
        await type_into(page, "#prompt", "Make a file, then print.")
        await click(page, "#start-button")
        try:
            await wait_for(page, f"{OPEN_CARDS}.length === 1", timeout=20)
        except TimeoutError:
            raise AssertionError("\n".join(api.process.output)) from None
        workflow_id = await text_of(page, "#run-id")
        [request] = (await alice.get(f"/v1/runs/{workflow_id}/approvals")).json()["approvals"]
        card = f"{OPEN_CARDS}[0]"

        # Shown exactly as the API lists it: the tool, and the detail whole.
        shown = await evaluate(page, f"{card}.querySelector('pre').textContent")
        assert shown == request["detail"]
        assert shown == "$ touch rejected.txt\nruns in: sh -c (not a login shell), in the workspace"
        assert (
            await evaluate(page, f"{card}.querySelector('h3 code').textContent") == "exec_command"
        )

        # Without a key, nothing is sent: the page asks for one.
        await click(page, ".approval:not(.settled) button.approve")
        outcome = await evaluate(page, f"{card}.querySelector('.outcome').textContent")
        assert outcome == "Load your approver key first (above), then decide."

        # A key the worker does not trust: the worker refuses the decision
        # (409), the page says why and the request still waits.
        await attach(page, "#key-file", stranger)
        await click(page, "#key-form button[type=submit]")
        await wait_for(
            page, "document.querySelector('#key-state').textContent.startsWith('Key loaded')"
        )
        await click(page, ".approval:not(.settled) button.approve")
        outcome = await wait_for(
            page,
            f"(t => t.startsWith('Not decided') && t)({card}.querySelector('.outcome').textContent)",
        )
        assert "not one of this worker's APPROVERS" in outcome, outcome

        # The person's own key, from their file: rejected, with a reason.
        await attach(page, "#key-file", Path(approver.ENVIRONMENT["APPROVER_KEY_FILE"]))
        await click(page, "#key-form button[type=submit]")
        await wait_for(
            page,
            "document.querySelector('#key-state').textContent"
            f" === 'Key loaded (public key {approver.PUBLIC}).'",
        )
        await type_into(page, ".approval:not(.settled) input[type=text]", REASON)
        await click(page, ".approval:not(.settled) button.reject")
        await wait_for(
            page, "document.querySelector('.approval.settled')?.dataset.decision === 'rejected'"
        )

        # The next command: approved.
        await wait_for(page, f"{OPEN_CARDS}.length === 1", timeout=20)
        [second] = (await alice.get(f"/v1/runs/{workflow_id}/approvals")).json()["approvals"]
        assert await evaluate(page, f"{card}.querySelector('pre').textContent") == second["detail"]
        assert second["detail"].startswith("$ printf 'it ran\\n'")
        await evaluate(page, f"{card}.scrollIntoView({{block: 'center'}})")
        await screenshot(page, tmp_path, "page-approval.png")
        await click(page, ".approval:not(.settled) button.approve")
        answer = await wait_for(
            page, "document.querySelector('.answer .answer-text')?.textContent", timeout=20
        )
        await wait_for(page, "document.querySelector('#run-state').textContent.includes('ended')")
        decisions = await evaluate(
            page, "[...document.querySelectorAll('.approval')].map(a => a.dataset.decision)"
        )
        commands = await evaluate(
            page,
            "[...document.querySelectorAll('#steps .step-text')].map(s => s.textContent)"
            ".filter(t => t.startsWith('$ '))",
        )
        await screenshot(page, tmp_path, "page-approval-answered.png")

    assert decisions == ["rejected", "approved"]
    assert answer.endswith("it ran\n"), answer
    # The rejected command never ran; the approved one did.
    assert commands == ["$ printf 'it ran\\n'"]
