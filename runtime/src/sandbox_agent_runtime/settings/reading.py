"""How the settings' common kinds are read: a refusal is one ``BadSetting``
line naming the variable, the value and what is allowed."""

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from sandbox_agent_runtime import callbacks, encryption
from sandbox_agent_runtime import object_store as stores
from sandbox_agent_runtime import repos as repositories
from sandbox_agent_runtime.display import without_credentials
from sandbox_agent_runtime.settings.declared import DECLARED

# The most of a bad value a message shows.
_SHOWN = 80


class BadSetting(ValueError):
    """A setting the service cannot use; its message is one line naming the
    variable, the value and what is allowed."""


def shown(value: str) -> str:
    """``value`` as a message shows it: quoted, escaped, and cut when long."""
    if len(value) > _SHOWN:
        return f"{value[:_SHOWN]!r}... ({len(value):,} characters)"
    return repr(value)


def refused(name: str, value: str, allowed: str, why: str = "") -> BadSetting:
    """The line refusing ``name=value``: what is allowed, and (``why``) what
    is wrong with the value when the allowed forms alone do not say."""
    because = f" ({why})" if why else ""
    return BadSetting(f"{name}={shown(value)} is not allowed: use {allowed}{because}.")


def whole_number(
    environ: Mapping[str, str], name: str, default: int, low: int, high: int, unit: str
) -> int:
    """``name`` as a whole number from ``low`` to ``high`` (ASCII digits, ``_``
    between them allowed: 10_000), or ``default`` when it is unset."""
    value = environ.get(name)
    if value is None:
        return default
    text = value.strip()
    if not re.fullmatch(r"[0-9]{1,15}(_[0-9]{3}){0,4}", text) or not low <= int(text) <= high:
        raise refused(
            name,
            value,
            f"a whole number of {unit} from {low} to {high}, or leave it unset for {default}",
        )
    return int(text)


def number(environ: Mapping[str, str], name: str) -> int:
    """The declared number setting ``name``, with its declared default and bounds."""
    setting = DECLARED[name]
    assert isinstance(setting.default, int), name
    return whole_number(environ, name, setting.default, setting.low, setting.most(), setting.unit)


def address(
    environ: Mapping[str, str], name: str, example: str = "", unset: str = ""
) -> tuple[str, int] | None:
    """``name`` as (host, port), or None when it is unset (the example and
    what unset means: the declaration's, unless given)."""
    value = environ.get(name)
    if value is None:
        return None
    setting = DECLARED.get(name)
    example = example or (setting.example if setting else "")
    unset = unset or (setting.unset or str(setting.default) if setting else "")
    host, _, port = value.strip().rpartition(":")
    if (
        not host
        or not host.isprintable()
        or any(c.isspace() for c in host)
        or not re.fullmatch(r"[0-9]{1,5}", port)
        or not 1 <= int(port) <= 65535
    ):
        raise refused(
            name,
            value,
            f"host:port with a port from 1 to 65535, such as {example}, or leave it unset for {unset}",
        )
    return host, int(port)


def web_address(
    environ: Mapping[str, str], name: str, example: str, unset: str | None
) -> str | None:
    """``name`` as an http(s) URL with a host, or None when it is unset
    (``unset`` says what that means; None: it is required, and
    missing_credentials() has said so before)."""
    value = environ.get(name)
    if value is None:
        return None
    try:
        parts = urlsplit(value.strip())
        parts.port  # noqa: B018 (raises ValueError for a port that is not one)
    except ValueError:
        parts = urlsplit("")
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or not value.strip().isprintable()
    ):
        allowed = f"an http:// or https:// URL, such as {example}"
        if unset:
            allowed += f", or leave it unset for {unset}"
        raise refused(name, without_credentials(value), allowed)
    return value.strip()


def url(environ: Mapping[str, str], name: str) -> str | None:
    """The declared URL setting ``name``, or None when it is unset."""
    setting = DECLARED[name]
    return web_address(environ, name, setting.example, setting.unset)


# The repositories a run may be given: read by the worker, which
# checks before it clones, and by the starter and the API (and so the
# evaluations), which refuse before a run starts; set them alike.
REPO_VARIABLES = ("REPO_ALLOWED_SCHEMES", "REPO_ALLOWED_HOSTS", "REPO_ALLOWED_NETWORKS")


def repo_policy(environ: Mapping[str, str]) -> repositories.RepoPolicy:
    """The REPO_ALLOWED_* settings; each unset keeps its default."""
    default = repositories.DEFAULT_POLICY
    # Each setting: how it is read, and what it may be.
    readers: dict[str, tuple[Callable[[str], tuple[Any, ...]], str]] = {
        "REPO_ALLOWED_SCHEMES": (
            repositories.parse_schemes,
            f"some of {', '.join(repositories.SCHEMES)}, separated by commas, or leave it unset "
            f"for {','.join(default.schemes)}",
        ),
        "REPO_ALLOWED_HOSTS": (
            repositories.parse_hosts,
            "server names (github.com, or *.example.com for every name under it), separated by "
            "commas, or leave it unset for any server",
        ),
        "REPO_ALLOWED_NETWORKS": (
            repositories.parse_networks,
            "networks (10.20.0.0/16, 127.0.0.1/32, fd00::/8), separated by commas, or leave it "
            "unset for public addresses only",
        ),
    }
    read: dict[str, tuple[Any, ...]] = {}
    for name, (parse, allowed) in readers.items():
        value = environ.get(name)
        if value is None:
            continue
        try:
            read[name] = parse(value)
        except ValueError as e:
            raise refused(name, value, allowed, str(e)) from None
    return repositories.RepoPolicy(
        schemes=read.get("REPO_ALLOWED_SCHEMES") or default.schemes,
        hosts=read.get("REPO_ALLOWED_HOSTS") or default.hosts,
        networks=read.get("REPO_ALLOWED_NETWORKS") or default.networks,
    )


def callback_policy(environ: Mapping[str, str]) -> callbacks.CallbackPolicy:
    """CALLBACK_HOSTS: the servers a run's callback may call (none unless set)."""
    value = environ.get("CALLBACK_HOSTS")
    if value is None:
        return callbacks.NO_CALLBACKS
    try:
        return callbacks.parse_hosts(value)
    except ValueError as e:
        raise refused(
            "CALLBACK_HOSTS",
            value,
            "server names (hooks.example.com, or *.example.com for every name under it), "
            "addresses or networks (10.20.0.5, 10.20.0.0/16), separated by commas, or leave it "
            "unset for none",
            str(e),
        ) from None


def callback_key(environ: Mapping[str, str]) -> bytes | None:
    """CALLBACK_SECRET's key, or None when it is unset; a refusal never shows it."""
    value = environ.get("CALLBACK_SECRET")
    if value is None:
        return None
    try:
        return callbacks.key_of(value.strip())
    except ValueError as e:
        raise BadSetting(
            f"CALLBACK_SECRET is not allowed ({e}; its value is not shown): use whsec_ and the "
            f"base64 of {callbacks.KEY_BYTES[0]} to {callbacks.KEY_BYTES[1]} random bytes, or "
            "leave it unset for no callbacks."
        ) from None


def object_store(environ: Mapping[str, str]) -> stores.ObjectStore | None:
    """The object store ``OBJECT_STORE_URL`` names, or None when it is unset.
    An S3 store's region is ``AWS_REGION``, else ``AWS_DEFAULT_REGION`` (the
    only one of the two the AWS SDK for Python reads itself)."""
    value = environ.get("OBJECT_STORE_URL")
    if value is None:
        return None
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or None
    try:
        store = stores.parse(value, region)
    except stores.NotAStore as e:
        raise refused(
            "OBJECT_STORE_URL", without_credentials(value), stores.ALLOWED, str(e)
        ) from None
    # What the AWS SDK reads itself, for the store's messages to mask.
    endpoints = (environ.get("AWS_ENDPOINT_URL"), environ.get("AWS_ENDPOINT_URL_S3"))
    return replace(store, endpoints=tuple(filter(None, endpoints)))


def encryption_keys(environ: Mapping[str, str]) -> encryption.Keys | None:
    """The keys ``PAYLOAD_ENCRYPTION_KEYS`` holds.

    Args:
        environ: the environment to read.

    Returns:
        The keys, or None when it is unset; ``BadSetting`` naming the entry
        that is wrong, never a key.
    """
    try:
        return encryption.keys_from(environ)
    except encryption.BadKeys as e:
        raise BadSetting(str(e)) from None
