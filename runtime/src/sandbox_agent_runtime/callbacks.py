"""A run's callback (``RunRequest.callback_url``): one POST to the caller's
URL when the run ends, signed as the Standard Webhooks specification says.

The run builds the message when it ends (``callback_of()``: the run's id,
state, answer and usage, and a ``webhook-id`` of its chain's, the same on
every attempt) and hands it to the ``CALLBACK_ACTIVITY`` (callback_sender.py), which Temporal
retries with back-off until the receiver answers 2xx, answers 410 (it wants
no more), or ``CALLBACK_DEADLINE`` passes. The activity signs each attempt
with the worker's key (CALLBACK_SECRET), so the key never reaches history,
and returns as soon as the receiver answers 2xx: a receiver that saw a
message whose acknowledgement the worker could not report (it died in
between) gets it again, with the same ``webhook-id``, which the receiver
drops as a duplicate (the specification's idempotency key).

Only the servers the operator lists (CALLBACK_HOSTS) are called, and a
loopback, private or link-local address only when listed too: checked by the
API and the starter before a run starts, and by the worker again, after it
looked the name up, before it connects to the address it checked (a caller
must not reach what the worker can). No redirect is followed.
"""

import base64
import binascii
import hashlib
import hmac
import ipaddress
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from temporalio.common import RetryPolicy

from sandbox_agent_runtime import repos
from sandbox_agent_runtime.repos import Address, Network, Target
from sandbox_agent_runtime.run_request import RunAnswer, answer_json

# The activity that posts a run's callback.
CALLBACK_ACTIVITY = "post_run_callback"
# The patch a run records before its first callback: a run that an older
# build began (it ignored a callback_url) replays without one.
CALLBACK_PATCH = "run-callback"
# The message's type (Standard Webhooks: full-stop delimited).
RUN_ENDED = "run.ended"
# How long one attempt waits for the receiver (the specification: 15 to 30 s).
ATTEMPT_TIMEOUT = timedelta(seconds=20)
# How long the run keeps trying before it closes without the callback: it
# stays open meanwhile (its answer is in the message).
CALLBACK_DEADLINE = timedelta(hours=1)
# Retried after 1 s, 2 s, 4 s, ... at most 5 minutes apart; never a refused
# URL, a missing key, or a receiver that answered 410 Gone.
CALLBACK_RETRY_POLICY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=5),
    non_retryable_error_types=["CallbackRefused", "CallbackGone"],
)
# The longest callback URL a run takes.
LONGEST_URL = 2048
# A key's length in bytes (the specification: 24 to 64).
KEY_BYTES = (24, 64)
_PREFIX = "whsec_"


@dataclass(frozen=True)
class CallbackPolicy:
    """The servers a callback may call (CALLBACK_HOSTS): by name (exactly,
    or ``*.example.com`` for any name under it), and the addresses and
    networks listed, which a URL may name and a name may resolve into
    beside public addresses. Empty: none."""

    names: tuple[str, ...] = ()
    networks: tuple[Network, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.names or self.networks)


NO_CALLBACKS = CallbackPolicy()


class BadCallback(ValueError):
    """A callback URL a run may not be given; its message is one line naming
    the value, what is wrong and what is allowed, which each caller names
    ("--callback", "field 'callback_url'")."""


@dataclass(frozen=True)
class Callback:
    """What the callback activity posts: the URL, the message's id (the
    same on every attempt) and its body, the JSON text signed as it is."""

    url: str
    message_id: str
    body: str


def parse_hosts(value: str) -> CallbackPolicy:
    """CALLBACK_HOSTS as a policy; ValueError naming the first bad entry."""
    names: list[str] = []
    networks: list[Network] = []
    for entry in (part.strip().lower() for part in value.split(",")):
        address = repos.ip_of(entry)
        if address is not None:
            networks.append(ipaddress.ip_network(address))
            continue
        if "/" in entry:
            try:
                networks.append(ipaddress.ip_network(entry))
            except ValueError:
                raise ValueError(f"{entry!r} is not a network") from None
            continue
        name = entry.removeprefix("*.")
        if not repos.is_host_name(name) or "*" in name:
            raise ValueError(f"{entry!r} is not a server name, an address or a network")
        names.append(entry)
    return CallbackPolicy(tuple(dict.fromkeys(names)), tuple(dict.fromkeys(networks)))


def key_of(value: str) -> bytes:
    """CALLBACK_SECRET's key: ``whsec_`` and the base64 of 24 to 64 bytes;
    ValueError saying what is wrong, never the value."""
    if not value.startswith(_PREFIX):
        raise ValueError("it does not start with whsec_")
    try:
        key = base64.b64decode(value[len(_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("what follows whsec_ is not base64") from None
    low, high = KEY_BYTES
    if not low <= len(key) <= high:
        raise ValueError(f"its key is {len(key)} bytes, not {low} to {high}")
    return key


def signature(key: bytes, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header: ``v1,`` and the base64 of the
    HMAC-SHA256 of ``{id}.{timestamp}.{body}`` under ``key``."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def target_of(url: str, policy: CallbackPolicy) -> Target:
    """``url``'s scheme, host and port, once it is an http(s) URL of a
    server ``policy`` lists (no address looked up); else ``BadCallback``."""
    allowed = (
        "an http:// or https:// URL of a server CALLBACK_HOSTS lists ("
        + ", ".join([*policy.names, *(str(each) for each in policy.networks)])
        + ")"
        if policy
        else "no callback: this service allows none (CALLBACK_HOSTS is unset)"
    )

    def refuse(why: str) -> BadCallback:
        return BadCallback(f"{repos.shown(url)} is not allowed: {why}; use {allowed}")

    if not repos.text(url) or any(c.isspace() for c in url):
        raise refuse("it holds a space, a control character or a character that is not text")
    if len(url) > LONGEST_URL:
        raise refuse(f"it is over {LONGEST_URL:,} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise refuse("its server or port is not one") from None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").strip("[]").lower()
    if scheme not in ("http", "https") or "://" not in url:
        raise refuse("it is not an http:// or https:// URL")
    if parts.username is not None or parts.password is not None:
        raise refuse("it carries a user name or a password")
    literal = repos.ip_of(host)
    if not host or not (repos.is_host_name(host) or literal):
        raise refuse("it names no server, or one that is not a name or an address")
    if literal is not None:
        listed = any(literal in network for network in policy.networks)
    else:
        listed = any(repos.host_matches(host, name) for name in policy.names)
    if not listed:
        raise refuse(f"its server {host} is not one this service allows (CALLBACK_HOSTS)")
    return Target(scheme, host, port)


def checked(url: str, policy: CallbackPolicy, unresolved_ok: bool = False) -> Target:
    """``url``'s target, as the worker checks it before it connects: every
    address its host resolves to looked up, each public or listed; else
    ``BadCallback``. A client (``unresolved_ok``) leaves a host that does
    not resolve on its network to the worker. Blocking."""
    target = target_of(url, policy)
    literal = repos.ip_of(target.host)
    if literal is not None:
        addresses: tuple[Address, ...] = (literal,)
    else:
        try:
            addresses = repos.addresses_of(target.host, target.port)
        except (OSError, UnicodeError):
            if unresolved_ok:
                return target
            raise BadCallback(
                f"{repos.shown(url)} is not allowed: its server {target.host} does not resolve "
                "to an address; use a callback URL of a server with a DNS name"
            ) from None
    address = repos.not_allowed(addresses, policy.networks)
    if address is not None:
        raise BadCallback(
            f"{repos.shown(url)} is not allowed: its server {target.host} resolves to "
            f"{address}, a loopback, private or link-local address CALLBACK_HOSTS does not "
            "list; use a callback URL of a public server, or list the address"
        )
    return Target(target.scheme, target.host, target.port, addresses)


def callback_of(
    url: str,
    message_id: str,
    run_id: str,
    state: str,
    answer: RunAnswer | None,
    usage: dict[str, Any],
    reason: str,
    when: datetime,
) -> Callback:
    """The message a run posts when it ends: its ``type``, ``timestamp``
    (when it ended) and ``data``, the run's id, state ("completed",
    "stopped": its budget or a guardrail stopped it, "failed" or
    "cancelled"), answer (as the API shows one), usage and, when it did not
    complete, why."""
    data = {
        "id": run_id,
        "state": state,
        "answer": answer_json(answer) if answer is not None else None,
        "usage": usage,
        "reason": reason or None,
    }
    body = {"type": RUN_ENDED, "timestamp": when.isoformat(), "data": data}
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=str)
    return Callback(url, message_id, text)
