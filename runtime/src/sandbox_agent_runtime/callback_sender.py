"""The worker's side of a run's callback (callbacks.py): the
``CALLBACK_ACTIVITY``, which checks the URL again, signs the message with the
worker's key and posts it to the address it checked. Apart from callbacks.py,
which the workflow imports: nothing of HTTP reaches workflow code."""

import asyncio
import http.client
import socket
import ssl
import time
from datetime import timedelta
from urllib.parse import urlsplit

from temporalio import activity
from temporalio.exceptions import ApplicationError

from sandbox_agent_runtime.callbacks import (
    ATTEMPT_TIMEOUT,
    CALLBACK_ACTIVITY,
    BadCallback,
    Callback,
    CallbackPolicy,
    checked,
    signature,
)
from sandbox_agent_runtime.repos import Address, Target

# How much of the receiver's answer is read.
_ANSWER_READ = 64 * 1024


class _PinnedHTTP(http.client.HTTPConnection):
    """An HTTP connection to the address checked, not to whatever the name
    resolves to by the time it connects."""

    def __init__(self, host: str, port: int, address: Address, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((str(self.address), self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """As ``_PinnedHTTP``, its certificate checked for the URL's host."""

    def __init__(self, host: str, port: int, address: Address, timeout: float) -> None:
        self.tls = ssl.create_default_context()
        super().__init__(host, port, timeout=timeout, context=self.tls)
        self.address = address

    def connect(self) -> None:
        plain = socket.create_connection((str(self.address), self.port), self.timeout)
        self.sock = self.tls.wrap_socket(plain, server_hostname=self.host)


def post(target: Target, callback: Callback, key: bytes, timeout: float) -> tuple[int, str]:
    """Post ``callback`` once to ``target``'s addresses (the first that
    takes the connection), signed now; the status and Retry-After. Blocking."""
    parts = urlsplit(callback.url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    body = callback.body.encode()
    timestamp = int(time.time())
    headers = {
        "content-type": "application/json",
        "webhook-id": callback.message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(key, callback.message_id, timestamp, body),
    }
    https = target.scheme == "https"
    port = target.port or (443 if https else 80)
    kind = _PinnedHTTPS if https else _PinnedHTTP
    failure: OSError | None = None
    for address in target.addresses:
        connection = kind(target.host, port, address, timeout)
        try:
            connection.connect()
        except OSError as e:
            failure = e
            connection.close()
            continue
        try:
            connection.request("POST", path, body=body, headers=headers)
            answer = connection.getresponse()
            answer.read(_ANSWER_READ)
            return answer.status, answer.getheader("retry-after") or ""
        finally:
            connection.close()
    assert failure is not None
    raise failure


class CallbackSender:
    """The worker's callback activity, with its key and the servers it may call."""

    def __init__(self, key: bytes | None, policy: CallbackPolicy) -> None:
        self._key = key
        self._policy = policy

    @activity.defn(name=CALLBACK_ACTIVITY)
    async def post_run_callback(self, callback: Callback) -> int:
        """Post ``callback``; the receiver's 2xx status. Refused at once (a
        non-retryable failure, before any connection) when the worker has
        no key or the URL is not allowed; any other failure is retried."""
        if self._key is None:
            raise ApplicationError(
                "The run's callback was not sent: this worker has no CALLBACK_SECRET to sign "
                "it with; set it (docs/callbacks.md).",
                type="CallbackRefused",
                non_retryable=True,
            )
        try:
            target = await asyncio.to_thread(checked, callback.url, self._policy)
        except BadCallback as e:
            raise ApplicationError(
                f"Callback URL {e}.", type="CallbackRefused", non_retryable=True
            ) from None
        try:
            status, retry_after = await asyncio.to_thread(
                post, target, callback, self._key, ATTEMPT_TIMEOUT.total_seconds()
            )
        except (OSError, http.client.HTTPException) as e:
            raise ApplicationError(
                f"The callback to {target.host} failed: {type(e).__name__}: {e}",
                type="CallbackFailed",
            ) from None
        if 200 <= status < 300:
            return status
        if status == 410:
            raise ApplicationError(
                f"The callback's receiver {target.host} answered 410 Gone: it takes no more.",
                type="CallbackGone",
                non_retryable=True,
            )
        delay = int(retry_after) if retry_after.isdigit() else None
        raise ApplicationError(
            f"The callback's receiver {target.host} answered {status}"
            + (" (a redirect is not followed)" if 300 <= status < 400 else ""),
            type="CallbackFailed",
            next_retry_delay=timedelta(seconds=min(delay, 3600)) if delay is not None else None,
        )
