"""Callers with OpenID Connect access tokens: the API (a process, with
API_OIDC_ISSUER and API_OIDC_AUDIENCE and no API_TOKENS) takes a token the
issuer signed for its audience, and the run belongs to the token's subject;
it refuses, with 401, a token that is expired, for another audience or from
another issuer, signed by a key the issuer does not publish, unsigned, or
signed with the issuer's public key as a shared secret; an issuer that does
not answer is a 503. The issuer is a stand-in on loopback, publishing its
discovery document and keys as a real one does."""

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from temporalio.client import Client

from sandbox_agent_runtime.testing.api_client import ApiProcess
from sandbox_agent_runtime.testing.processes import API, service, service_environment
from sandbox_agent_runtime.testing.support import closed_address, free_address

pytestmark = pytest.mark.process

AUDIENCE = "agents-api"


class StandInIssuer:
    """An OIDC issuer on loopback: /.well-known/openid-configuration and its keys."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "key-1"
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def token(self, key: Any = None, kid: str | None = None, **claims: Any) -> str:
        now = int(time.time())
        body = {
            "iss": self.url,
            "aud": AUDIENCE,
            "sub": "user-1",
            "iat": now,
            "exp": now + 300,
            **claims,
        }
        body = {name: value for name, value in body.items() if value is not None}
        return jwt.encode(
            body, key or self.key, algorithm="RS256", headers={"kid": kid or self.kid}
        )

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    body: dict[str, Any] = {"issuer": issuer.url, "jwks_uri": f"{issuer.url}/keys"}
                elif self.path == "/keys":
                    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(issuer.key.public_key()))
                    body = {"keys": [{**jwk, "kid": issuer.kid, "use": "sig", "alg": "RS256"}]}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def hmac_token(claims: dict[str, Any], secret: bytes, kid: str) -> str:
    """A token signed with HS256 and ``secret``, made by hand (PyJWT refuses
    a public key as an HMAC secret, as a verifier must)."""

    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = part(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
    body = part(json.dumps(claims).encode())
    signature = hmac.new(secret, f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{part(signature)}"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@contextmanager
def stand_in_issuer() -> Iterator[StandInIssuer]:
    issuer = StandInIssuer()
    thread = threading.Thread(target=issuer.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield issuer
    finally:
        issuer.server.shutdown()
        issuer.server.server_close()


async def test_oidc_access_tokens_are_callers_and_nothing_else_is(temporal_client: Client) -> None:
    address = free_address()
    with stand_in_issuer() as issuer:
        environment = {
            **service_environment(
                temporal_client.service_client.config.target_host, "http://127.0.0.1:9"
            ),
            "API_BIND_ADDRESS": address,
            "API_OIDC_ISSUER": issuer.url,
            "API_OIDC_AUDIENCE": AUDIENCE,
        }
        environment.pop("API_TOKENS", None)
        async with service(API, environment) as process:
            await process.wait_for("Application startup complete")
            api = ApiProcess(process, f"http://{address}")
            async with api.client(None) as client:
                started = await client.post(
                    "/v1/runs", json={"prompt": "x"}, headers=bearer(issuer.token())
                )
                workflow_id = started.json()["id"]
                own = await client.get(f"/v1/runs/{workflow_id}", headers=bearer(issuer.token()))
                other = await client.get(
                    f"/v1/runs/{workflow_id}", headers=bearer(issuer.token(sub="user-2"))
                )
                now = int(time.time())
                stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
                public_pem = issuer.key.public_key().public_bytes(
                    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
                )
                refused = {
                    "expired": issuer.token(exp=now - 120, iat=now - 600),
                    "another audience": issuer.token(aud="another-api"),
                    "another issuer": issuer.token(iss="https://elsewhere.example.com"),
                    "no subject": issuer.token(sub=None),
                    "a key it does not publish": issuer.token(key=stranger),
                    "an unknown key id": issuer.token(key=stranger, kid="key-2"),
                    "unsigned": jwt.encode(
                        {"iss": issuer.url, "aud": AUDIENCE, "sub": "user-1", "exp": now + 300},
                        None,  # type: ignore[arg-type]
                        algorithm="none",
                    ),
                    "the public key as a secret": hmac_token(
                        {"iss": issuer.url, "aud": AUDIENCE, "sub": "user-1", "exp": now + 300},
                        public_pem,
                        issuer.kid,
                    ),
                }
                answers = {
                    why: await client.get(f"/v1/runs/{workflow_id}", headers=bearer(token))
                    for why, token in refused.items()
                }
                await temporal_client.get_workflow_handle(workflow_id).terminate("the test is done")
        # An issuer that does not answer: the API cannot check a token, and says so.
        gone = {
            **environment,
            "API_BIND_ADDRESS": free_address(),
            "API_OIDC_ISSUER": f"http://{closed_address()}",
        }
        async with service(API, gone) as process:
            await process.wait_for("Application startup complete")
            async with ApiProcess(process, f"http://{gone['API_BIND_ADDRESS']}").client(
                None
            ) as client:
                unchecked = await client.get(
                    f"/v1/runs/{workflow_id}", headers=bearer(issuer.token())
                )

    assert started.status_code == 201, started.text
    assert own.status_code == 200 and own.json()["id"] == workflow_id
    # Another subject of the same issuer: the run is not theirs.
    assert other.status_code == 404
    for why, answer in answers.items():
        assert answer.status_code == 401, (why, answer.text)
        assert answer.headers["content-type"] == "application/problem+json"
    assert unchecked.status_code == 503
    assert unchecked.json()["detail"] == "the OIDC issuer did not answer: ask again shortly."
