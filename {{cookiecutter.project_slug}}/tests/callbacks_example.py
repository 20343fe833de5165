"""A receiver of the service's callbacks, as docs/callbacks.md shows it
(the page includes it verbatim: tests/test_callbacks.py checks it)."""

# docs/callbacks.md: receiver.py
import base64
import hashlib
import hmac
import json
import os
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

# The worker's CALLBACK_SECRET: the receiver holds the same.
SECRET = os.environ.get("CALLBACK_SECRET", "")
# How far a message's time may be from ours (a replay is refused).
TOLERANCE_SECONDS = 5 * 60
# The webhook-ids already handled: a message sent again is acknowledged, not
# handled twice (keep them for as long as you keep the runs' results).
HANDLED: set[str] = set()


def verify(secret: str, webhook_id: str, timestamp: str, signatures: str, body: bytes) -> Any:
    """The message, once its signature is one the secret made; else ValueError."""
    if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > TOLERANCE_SECONDS:
        raise ValueError("its time is missing or too far from ours")
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    for signature in signatures.split():
        version, _, value = signature.partition(",")
        if version == "v1" and hmac.compare_digest(value, expected):
            return json.loads(body)
    raise ValueError("no signature matches")


class Receiver(BaseHTTPRequestHandler):
    """POST /: a run's end, handled once per webhook-id; 204 when taken."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        webhook_id = self.headers.get("webhook-id", "")
        try:
            message = verify(
                SECRET,
                webhook_id,
                self.headers.get("webhook-timestamp", ""),
                self.headers.get("webhook-signature", ""),
                body,
            )
        except ValueError:
            self.send_response(401)
            self.end_headers()
            return
        if webhook_id not in HANDLED:
            run = message["data"]
            print(f"run {run['id']} {run['state']}: {run['answer'] and run['answer']['text']}")
            HANDLED.add(webhook_id)
        self.send_response(204)
        self.end_headers()


# docs/callbacks.md: end
