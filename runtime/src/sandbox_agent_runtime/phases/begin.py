"""A run begins (``begin()``): its request read and checked, and its
sandbox's client.

Before anything reaches a sandbox, a run refuses a request that is not a
``RunRequest``, a provider the service does not register, and state it was
handed by anyone but the run it continues (``checked()``). Its sandbox's
operations are then activities against the provider the run names, routed to
the host that holds the sandbox (chain.sandbox_client())."""

import dataclasses
from typing import Any

from pydantic import TypeAdapter, ValidationError
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from sandbox_agent_runtime import affinity
from sandbox_agent_runtime.chain import Carried, LastingSandboxClient
from sandbox_agent_runtime.payloads import not_text
from sandbox_agent_runtime.phases.given import Given
from sandbox_agent_runtime.run_request import RunRequest

# Built once per worker (this module is passed through the workflow sandbox),
# not once per run.
_REQUEST = TypeAdapter(RunRequest)


def run_request(given: RunRequest | Any) -> RunRequest:
    """The run's request as a ``RunRequest``. Temporal converts a run's
    arguments by their types only when it has one for every parameter, so a
    client's start (the request alone, without the chain's ``carried``)
    arrives as JSON, read here; one that is not a request ends the run."""
    if isinstance(given, RunRequest):
        return given
    try:
        return _REQUEST.validate_python(given)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the request"
        raise ApplicationError(
            f"The run's request is not a RunRequest: {where}: {first['msg']} "
            "(give prompt, and optionally provider, inputs, repo: run_request.py).",
            type="BadRunRequest",
            non_retryable=True,
        ) from None


def checked(request: RunRequest, carried: Carried | None, given: Given) -> RunRequest:
    """The request with its provider (the service's primary one unless it
    names another), once the run may go on with it."""
    unsendable = not_text(dataclasses.asdict(request))
    if unsendable is not None:
        # Read by its type (a start with both arguments), it would fail
        # the run's next payload: its workflow task, for ever.
        raise ApplicationError(
            f"The run's request cannot be sent on: its {unsendable} holds a lone surrogate "
            "(a character UTF-8 cannot carry); send UTF-8 text.",
            type="BadRunRequest",
            non_retryable=True,
        )
    provider = request.provider or given.primary_provider
    request = dataclasses.replace(request, provider=provider)
    if carried is not None and workflow.info().continued_run_id is None:
        # Only a run that continued as new from an earlier run of its
        # chain (same workflow id: Temporal sets continued_run_id, no
        # client can) is handed state. A client's own would choose the
        # sandbox to resume and remove, and (with approvals) the tools
        # approved.
        raise ApplicationError(
            "This run was started with carried state (the second argument), which only "
            "the run it continues from may hand it: start a run with a RunRequest only.",
            type="ForgedCarriedState",
            non_retryable=True,
        )
    refusal = given.budget_refusal(request.token_budget, request.cost_budget_usd)
    if refusal is not None:
        raise ApplicationError(
            f"The run's request has a bad budget: {refusal}.",
            type="BadRunRequest",
            non_retryable=True,
        )
    if provider not in given.backends:
        raise ApplicationError(
            f"Unknown sandbox provider {provider!r}: "
            f"this service registers {', '.join(given.backends)}.",
            type="UnknownSandboxProvider",
            non_retryable=True,
        )
    return request


async def begin(
    given_request: RunRequest | Any, carried: Carried | None, given: Given
) -> tuple[RunRequest, LastingSandboxClient]:
    """The run's request, read and checked, and its sandbox's client. With
    a host-bound backend, the host the sandbox lives on is chosen once per
    chain, before the sandbox is created, then handed on with it."""
    request = checked(run_request(given_request), carried, given)
    host: affinity.SandboxHost | None = None
    if given.host_bound:
        host = carried.host if carried else await affinity.choose_host(request.provider)
    return request, given.sandbox(request.provider, host)
