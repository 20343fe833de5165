"""The codec server's settings."""

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from sandbox_agent_runtime import encryption
from sandbox_agent_runtime import object_store as stores
from sandbox_agent_runtime.display import without_credentials
from sandbox_agent_runtime.settings.declared import SETTINGS
from sandbox_agent_runtime.settings.reading import (
    BadSetting,
    address,
    encryption_keys,
    object_store,
    refused,
    shown,
)

# Where the codec server listens unless CODEC_SERVER_BIND_ADDRESS says.
CODEC_SERVER_ADDRESS = ("127.0.0.1", 8081)
# The Web UI origins a browser may call it from: the dev server's UI.
CODEC_SERVER_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")
# Every variable the codec server reads itself: the declared ones, and the
# namespace of Temporal's own settings, whose payloads alone
# it decodes.
CODEC_SERVER_VARIABLES = (
    *(setting.name for setting in SETTINGS if "codec server" in setting.readers),
    "TEMPORAL_NAMESPACE",
)
_SHORTEST_TOKEN = 16


@dataclass(frozen=True)
class CodecServerSettings:
    """Everything the codec server takes from its environment, parsed."""

    # PAYLOAD_ENCRYPTION_KEYS: the workers' keys; required.
    keys: encryption.Keys
    # OBJECT_STORE_URL: where the payloads history refers to are kept.
    object_store: stores.ObjectStore | None
    # CODEC_SERVER_BIND_ADDRESS: where it listens.
    address: tuple[str, int]
    # CODEC_SERVER_TOKEN: the bearer token every request must carry; None:
    # none (only on a loopback address).
    token: str | None
    # CODEC_SERVER_ALLOWED_ORIGINS: the origins a browser may call it from.
    allowed_origins: tuple[str, ...]
    # TEMPORAL_NAMESPACE: the one namespace it decodes for.
    namespace: str


def codec_server_settings(environ: Mapping[str, str] = os.environ) -> CodecServerSettings:
    """The codec server's settings; ``BadSetting`` for the first one it cannot use."""
    keys = encryption_keys(environ)
    if keys is None:
        raise BadSetting(
            f"{encryption.KEYS_VARIABLE} is unset: the codec server decrypts with the workers' "
            f"keys; set it as the workers have it ({encryption.ALLOWED})."
        )
    bind = address(environ, "CODEC_SERVER_BIND_ADDRESS")
    bind = bind or CODEC_SERVER_ADDRESS
    token = environ.get("CODEC_SERVER_TOKEN")
    if token is not None and (
        len(token) < _SHORTEST_TOKEN
        or not token.isprintable()
        or not token.isascii()
        or " " in token
    ):
        raise BadSetting(
            f"CODEC_SERVER_TOKEN is not allowed: use at least {_SHORTEST_TOKEN} printable ASCII "
            'characters without spaces (make one with: python -c "import secrets; '
            'print(secrets.token_urlsafe(32))").'
        )
    if token is None and not loopback(bind[0]):
        raise BadSetting(
            f"CODEC_SERVER_BIND_ADDRESS={shown(environ['CODEC_SERVER_BIND_ADDRESS'])} is not a "
            "loopback address and CODEC_SERVER_TOKEN is unset: whoever reaches the port could "
            "decrypt every run; set a token, or bind 127.0.0.1."
        )
    return CodecServerSettings(
        keys=keys,
        object_store=object_store(environ),
        address=bind,
        token=token,
        allowed_origins=allowed_origins(environ),
        namespace=environ.get("TEMPORAL_NAMESPACE") or "default",
    )


def loopback(host: str) -> bool:
    """Whether ``host`` names this host's loopback interface only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_origins(environ: Mapping[str, str]) -> tuple[str, ...]:
    """``CODEC_SERVER_ALLOWED_ORIGINS``: origins (scheme://host[:port], no
    path, no ``*``), separated by commas; the dev server's UI when unset."""
    value = environ.get("CODEC_SERVER_ALLOWED_ORIGINS")
    if value is None:
        return CODEC_SERVER_ORIGINS
    origins = []
    for origin in (part.strip() for part in value.split(",")):
        parts = urlsplit(origin)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path
            or parts.query
            or parts.fragment
            or not origin.isprintable()
        ):
            raise refused(
                "CODEC_SERVER_ALLOWED_ORIGINS",
                without_credentials(value),
                "the Web UI's origins, such as https://cloud.temporal.io or "
                "http://localhost:8233, separated by commas (no path, no '*')",
                f"{without_credentials(origin)!r} is not one",
            )
        origins.append(origin)
    return tuple(origins)
