"""The API's settings: the starter's, and its own ``API_*``."""

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.settings.declared import DECLARED, SETTINGS
from sandbox_agent_runtime.settings.reading import (
    BadSetting,
    address,
    number,
    refused,
    shown,
    url,
)
from sandbox_agent_runtime.settings.starter import StarterSettings, starter_settings

# Where the API listens unless API_BIND_ADDRESS says.
API_ADDRESS = ("127.0.0.1", 8000)
# Every variable the API reads itself, beside the starter's (it is a client
# of the same Temporal service, keys and object store).
API_VARIABLES = tuple(
    setting.name
    for setting in SETTINGS
    if "API" in setting.readers and "starter" not in setting.readers
)
# A caller's name: what a run records as its owner, and the logs show.
_CALLER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")


@dataclass(frozen=True)
class ApiSettings:
    """Everything the API takes from its environment, parsed."""

    # The Temporal service, the payloads' keys and the object store, as the
    # starter has them.
    starter: StarterSettings
    # API_BIND_ADDRESS: where it listens.
    address: tuple[str, int]
    # API_TOKENS: the callers' tokens, each by the SHA-256 of its text (hex)
    # -> the caller's name.
    tokens: dict[str, str]
    # API_OIDC_ISSUER and API_OIDC_AUDIENCE: an OpenID Connect issuer whose
    # access tokens for this audience are callers too; None: none.
    oidc_issuer: str | None = None
    oidc_audience: str | None = None
    # API_APPROVER_KEY_FILE: an approver's key the API signs decisions with
    # when a caller sends one unsigned (the operator's choice: whoever may
    # call the API as that caller then decides as that approver); None:
    # every decision is signed by the person's own key.
    approver_key_file: Path | None = None
    # API_STREAMS_PER_CALLER: the event streams one caller may hold open at
    # once on one API process.
    streams_per_caller: int = 20
    # API_RUNS_IN_FLIGHT_PER_CALLER: the runs of one caller still going
    # (conversations waiting for a follow-up among them) past which it may
    # start no other, counted across the service.
    runs_per_caller: int = 50
    # API_DOWNLOADS_PER_CALLER and API_DOWNLOADS_AT_ONCE: the outputs one
    # caller, and all callers, may be downloading at once from one API
    # process (each takes memory while its archive is made).
    downloads_per_caller: int = 2
    downloads_at_once: int = 4


# Each of the API's bounds on a caller (API_*: ApiSettings): its variable,
# default and the most it takes (settings/declared.py). Past these, a bound
# is no bound.
API_BOUNDS: dict[str, tuple[str, int, int, str]] = {
    field: (name, int(DECLARED[name].default or 0), DECLARED[name].most(), DECLARED[name].unit)
    for field, name in (
        ("streams_per_caller", "API_STREAMS_PER_CALLER"),
        ("runs_per_caller", "API_RUNS_IN_FLIGHT_PER_CALLER"),
        ("downloads_per_caller", "API_DOWNLOADS_PER_CALLER"),
        ("downloads_at_once", "API_DOWNLOADS_AT_ONCE"),
    )
}


def caller_name(name: str) -> bool:
    """Whether ``name`` may name a caller (API_TOKENS, --new-token)."""
    return _CALLER_NAME.fullmatch(name) is not None


CALLER_NAMES = "a name of letters, digits and . _ @ - (at most 64, starting with a letter or digit)"


def api_tokens(environ: Mapping[str, str]) -> dict[str, str]:
    """The callers ``API_TOKENS`` names.

    Args:
        environ: the environment to read.

    Returns:
        Each caller's name by the SHA-256 (hex) of its token; {} when unset.
        ``BadSetting`` for an entry that is not ``NAME:SHA256_HEX_OF_TOKEN``.
    """
    value = environ.get("API_TOKENS")
    if value is None or not value.strip():
        return {}
    allowed = (
        "NAME:SHA256_HEX_OF_TOKEN entries separated by commas, each printed by "
        f"{current().command('api')} --new-token NAME"
    )
    tokens: dict[str, str] = {}
    for entry in (part.strip() for part in value.split(",") if part.strip()):
        name, colon, digest = entry.partition(":")
        digest = digest.strip().lower()
        if not colon or not caller_name(name.strip()):
            raise refused("API_TOKENS", value, allowed, f"{shown(entry[:40])}: {CALLER_NAMES}")
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise refused(
                "API_TOKENS",
                value,
                allowed,
                f"{name.strip()!r}'s digest is not 64 hexadecimal digits (the token itself "
                "never goes in the setting)",
            )
        if digest in tokens or name.strip() in tokens.values():
            raise refused("API_TOKENS", value, allowed, f"{name.strip()!r} is there twice")
        tokens[digest] = name.strip()
    return tokens


def api_settings(environ: Mapping[str, str] = os.environ) -> ApiSettings:
    """The API's settings, read from the environment.

    Args:
        environ: the environment to read (the process's by default).

    Returns:
        The settings, parsed; ``BadSetting`` (one line) for the first one it
        cannot use.
    """
    tokens = api_tokens(environ)
    issuer = url(environ, "API_OIDC_ISSUER")
    audience = environ.get("API_OIDC_AUDIENCE")
    if issuer is not None and (
        audience is None or not audience.strip() or not audience.isprintable()
    ):
        raise BadSetting(
            f"API_OIDC_AUDIENCE={shown(audience or '')} is not allowed with API_OIDC_ISSUER set: use "
            "the audience the issuer puts in this API's access tokens (their 'aud')."
        )
    if issuer is None and audience is not None:
        raise BadSetting(
            "API_OIDC_AUDIENCE is set but API_OIDC_ISSUER is not: set the issuer too, or unset both."
        )
    if not tokens and issuer is None:
        raise BadSetting(
            "API_TOKENS is unset: every route under /v1/ needs a caller; make a token with "
            f"{current().command('api')} --new-token NAME and set API_TOKENS to the entry it prints "
            "(or set API_OIDC_ISSUER and API_OIDC_AUDIENCE)."
        )
    bind = address(environ, "API_BIND_ADDRESS")
    key_file = environ.get("API_APPROVER_KEY_FILE")
    if key_file is not None and (not key_file.strip() or not key_file.isprintable()):
        raise refused(
            "API_APPROVER_KEY_FILE",
            key_file,
            "the path of an approver's key file, or leave it unset",
        )
    if key_file is not None and not current().approvals:
        raise BadSetting(
            "API_APPROVER_KEY_FILE is set, but this service asks no one for approval: unset it."
        )
    bounds = {field: number(environ, name) for field, (name, *_) in API_BOUNDS.items()}
    return ApiSettings(
        starter=starter_settings(environ),
        address=bind or API_ADDRESS,
        tokens=tokens,
        oidc_issuer=issuer.rstrip("/") if issuer else None,
        oidc_audience=audience.strip() if audience else None,
        approver_key_file=Path(key_file).expanduser() if key_file else None,
        streams_per_caller=bounds["streams_per_caller"],
        runs_per_caller=bounds["runs_per_caller"],
        downloads_per_caller=bounds["downloads_per_caller"],
        downloads_at_once=bounds["downloads_at_once"],
    )
