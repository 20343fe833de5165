"""Who may call the API: a bearer token the operator issued (API_TOKENS holds
each token's SHA-256, never the token), or an OpenID Connect access token
(API_OIDC_ISSUER, API_OIDC_AUDIENCE) verified against the issuer's published
keys; and the owner a run records.

A run started through the API records its caller in its memo (CALLER_MEMO,
carried from run to run of its chain); the API answers a caller about its
own runs only, and about any other id as about one that does not exist.
Runs the command-line starter started record no caller: they belong to no
API caller."""

import asyncio
import hashlib
import hmac
import json
import logging
import secrets
import urllib.request
from dataclasses import dataclass
from typing import Any

import jwt

from sandbox_agent_runtime.settings import CALLER_NAMES, caller_name
from sandbox_agent_runtime.shared import CALLER_MEMO

__all__ = ["CALLER_MEMO", "Caller", "Issuer", "IssuerUnreachable", "Tokens", "new_token"]

log = logging.getLogger("api")

# The signatures an issuer's access tokens may carry: public-key ones only
# (never "none", never a shared secret an attacker could try the public key as).
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"]
# How long the issuer has to answer, and the clock skew allowed on exp and nbf.
ISSUER_TIMEOUT = 5.0
LEEWAY_SECONDS = 30


@dataclass(frozen=True)
class Caller:
    """Who calls: how they proved it ("token") and their name."""

    kind: str
    name: str

    @property
    def owner(self) -> str:
        """What a run they start records as its owner (CALLER_MEMO)."""
        return f"{self.kind}:{self.name}"


class Tokens:
    """The operator's tokens (their SHA-256, hex -> the caller's name)."""

    def __init__(self, digests: dict[str, str]) -> None:
        self.digests = dict(digests)

    def caller(self, token: str) -> Caller | None:
        """The caller ``token`` belongs to; None for no caller. Every digest
        is compared in constant time, so the time taken says nothing of how
        close a guess came."""
        digest = hashlib.sha256(token.encode()).hexdigest()
        found = None
        for known, name in self.digests.items():
            if hmac.compare_digest(known, digest):
                found = name
        return None if found is None else Caller("token", found)


def new_token(name: str) -> tuple[str, str]:
    """A new token for caller ``name``: (the token, its API_TOKENS entry).
    ``ValueError`` in one line for a name that cannot be one."""
    if not caller_name(name):
        raise ValueError(f"--new-token {name!r} is not allowed: use {CALLER_NAMES}.")
    token = secrets.token_urlsafe(32)
    return token, f"{name}:{hashlib.sha256(token.encode()).hexdigest()}"


class IssuerUnreachable(Exception):
    """The OIDC issuer's discovery document or keys could not be fetched."""


class Issuer:
    """An OpenID Connect issuer whose access tokens for ``audience`` are
    callers: each token's signature checked against the keys the issuer
    publishes (its discovery document's ``jwks_uri``, fetched once and again
    for a key id not seen yet), its issuer, audience, expiry and subject."""

    def __init__(self, issuer: str, audience: str) -> None:
        self.issuer = issuer
        self.audience = audience
        self._keys: jwt.PyJWKClient | None = None
        self._lock = asyncio.Lock()

    def _discover(self) -> jwt.PyJWKClient:
        url = f"{self.issuer}/.well-known/openid-configuration"
        try:
            with urllib.request.urlopen(url, timeout=ISSUER_TIMEOUT) as response:  # noqa: S310 (an http(s) URL)
                document: Any = json.load(response)
        except (OSError, ValueError) as e:
            raise IssuerUnreachable(f"{url}: {e}") from e
        jwks_uri = document.get("jwks_uri") if isinstance(document, dict) else None
        if document.get("issuer") != self.issuer or not isinstance(jwks_uri, str):
            raise IssuerUnreachable(f"{url} names another issuer, or no jwks_uri")
        if not jwks_uri.startswith(("https://", "http://")):
            raise IssuerUnreachable(f"{url}: its jwks_uri {jwks_uri!r} is not an http(s) URL")
        return jwt.PyJWKClient(
            jwks_uri, cache_keys=True, lifespan=3600, timeout=int(ISSUER_TIMEOUT)
        )

    async def caller(self, token: str) -> Caller | None:
        """The caller ``token`` proves, or None when it proves no one.
        ``IssuerUnreachable`` when the issuer's keys cannot be had."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return None
        if header.get("alg") not in ALGORITHMS:
            return None
        async with self._lock:
            if self._keys is None:
                self._keys = await asyncio.to_thread(self._discover)
        keys = self._keys
        try:
            key = await asyncio.to_thread(keys.get_signing_key_from_jwt, token)
        except jwt.PyJWKClientConnectionError as e:
            raise IssuerUnreachable(str(e)) from e
        except jwt.PyJWTError:
            return None
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=ALGORITHMS,
                audience=self.audience,
                issuer=self.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as e:
            log.info("an OIDC token was refused: %s", e)
            return None
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            return None
        return Caller("oidc", subject)
