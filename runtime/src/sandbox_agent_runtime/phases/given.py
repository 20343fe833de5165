"""What a run is given by its service and its workflow type, read once when
it begins and handed to the phases that need it."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from sandbox_agent_runtime.affinity import SandboxHost
from sandbox_agent_runtime.backends import Backend, sandbox_usd_per_hour
from sandbox_agent_runtime.chain import LastingSandboxClient, sandbox_client
from sandbox_agent_runtime.costs import RunMeter
from sandbox_agent_runtime.service import (
    Budget,
    Price,
    bad_cost_budget,
    bad_token_budget,
    beyond,
)


@dataclass(frozen=True)
class Given:
    # The most model turns a prompt may take, across its chain.
    max_turns: int
    # Whether calls wait for a person, and for how long.
    approvals: bool
    approval_wait: timedelta
    # Whether the service's sandboxes live on a worker's host,
    # and how long an operation waits for that host's workers.
    host_bound: bool
    host_wait: timedelta
    # How long one sandbox operation may take.
    activity_timeout: timedelta
    # The variables the worker forwards to the sandbox, by name.
    secrets: tuple[str, ...]
    # The service's sandbox provider, and every backend it registers, by
    # provider name (backends/).
    primary_provider: str
    backends: Mapping[str, Backend]
    # A prompt's budget unless it carries its own; the agent's model and
    # what each model's tokens cost (runs.PRICES).
    budget: Budget = Budget()
    model: str = ""
    prices: Mapping[str, Price] = field(default_factory=dict)
    # Whether the agent's memory is kept across one caller's conversations.
    memory_across_conversations: bool = False
    # The run's meter: the time it holds a sandbox, its actions (costs.py).
    meter: RunMeter | None = None

    def budget_refusal(self, tokens: int | None, cost_usd: float | None) -> str | None:
        """Why a prompt cannot have its own budget of ``tokens`` and
        ``cost_usd`` (a bad value, or money without the model's price), in
        one line; None when it can."""
        refusal = (
            bad_token_budget("token_budget", tokens)
            or bad_cost_budget("cost_budget_usd", cost_usd)
            or beyond(self.budget, tokens, cost_usd, ("token_budget", "cost_budget_usd"))
        )
        if refusal is None and cost_usd is not None and self.model not in self.prices:
            refusal = (
                f"cost_budget_usd {cost_usd!r} cannot be kept: the service has no price for "
                f"its model {self.model!r} (PRICES in runs.py); give a token_budget instead"
            )
        return refusal

    def sandbox(self, provider: str, host: SandboxHost | None) -> LastingSandboxClient:
        """A client of a sandbox of ``provider`` on ``host`` (None: any
        worker reaches it), its operations run by the service's settings
        and retried but for the errors a backend says no retry fixes."""
        non_retryable = [
            error for backend in self.backends.values() for error in backend.NON_RETRYABLE_ERRORS
        ]
        rate = sandbox_usd_per_hour(provider)
        return sandbox_client(
            provider, host, self.activity_timeout, self.host_wait, non_retryable, self.meter, rate
        )
