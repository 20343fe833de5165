"""What a service decides and the runtime is given: its names, its sandbox
backends, its approvals and the limits of its runs.

A project describes itself once, as a ``Service``, and hands it over with
``configure()`` when its package is imported, as a Django project hands over
its settings; every part of the runtime, the workflow in its sandbox included,
reads that one configuration with ``current()``. Nothing here is read from the
environment. ``cost_of()`` is the one place tokens become money. A process
runs one service: configuring another is refused.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from sandbox_agent_runtime import catalog

# Who approves what the agent runs: nobody; each shell command (and input to a
# running one); each command and each file edit.
Approval = Literal["none", "commands", "commands_and_writes"]
APPROVALS: tuple[Approval, ...] = ("none", "commands", "commands_and_writes")

# Every sandbox backend the runtime has (backends/), by the name a service
# gives it, and those whose sandbox can live on the host of the worker that
# created it (a local workspace; a container on the host's own Docker
# engine): a service with one of them keeps every sandbox operation of such a
# run on that host. Both as the catalog declares them.
BACKENDS = catalog.BACKENDS
HOST_BOUND = tuple(name for name, declared in catalog.CATALOG.items() if declared.host_bound)


@dataclass(frozen=True)
class Service:
    """A service, as its project describes it."""

    # The project's distribution name: the prefix of its commands
    # ("<name>-worker", "<name>-starter", ...), of the labels its sandboxes
    # carry, and the version its unversioned workers report.
    name: str
    # The queue the worker polls and the starter sends runs to.
    task_queue: str
    # Every sandbox provider the worker registers, by name, with its backend
    # (one of BACKENDS); the first is the one a run uses unless it names
    # another. The name prefixes each of its sandbox activities
    # ("<provider>-sandbox_session_start").
    providers: Mapping[str, str]
    # Whether a person approves what the agent runs, and how long a request
    # waits for one before it is rejected.
    approval: Approval = "none"
    approval_timeout: timedelta = timedelta(hours=1)
    # The worker's environment variables the agent's sandbox sees (only
    # their names travel with a run).
    sandbox_secrets: tuple[str, ...] = ()
    # The most model turns one prompt may take, across its chain.
    max_turns: int = 20
    # The longest a run without follow-ups may take.
    workflow_execution_timeout: timedelta = timedelta(hours=1)
    # The start-to-close timeout of each sandbox operation.
    sandbox_activity_timeout: timedelta = timedelta(minutes=5)
    # The most tokens (input and output) and the most USD (at ``prices``)
    # one prompt may use, across its chain; None: no limit. A request or a
    # follow-up may carry its own.
    token_budget: int | None = None
    cost_budget_usd: float | None = None
    # What each model's tokens cost (runs.PRICES), by model name.
    prices: Mapping[str, Price] = field(default_factory=dict)
    # Whether the agent's Memory capability (agent.py) keeps its memory
    # across the conversations of one caller, in the object store
    # (workspace/memories.py); else it lives in one conversation's workspace.
    memory_across_conversations: bool = False

    def __post_init__(self) -> None:
        if not self.providers:
            raise ValueError("a Service needs at least one sandbox provider")
        for provider, backend in self.providers.items():
            if backend not in BACKENDS:
                raise ValueError(
                    f"provider {provider!r}: backend {backend!r} is not one of {', '.join(BACKENDS)}"
                )
        if self.approval not in APPROVALS:
            raise ValueError(f"approval {self.approval!r} is not one of {', '.join(APPROVALS)}")
        for refusal in (
            bad_token_budget("TOKEN_BUDGET (runs.py)", self.token_budget),
            bad_cost_budget("COST_BUDGET_USD (runs.py)", self.cost_budget_usd),
        ):
            if refusal is not None:
                raise ValueError(refusal)

    def unpriced(self, model: str) -> str | None:
        """Why this service cannot run an agent of ``model`` (its money
        budget needs the model's price), in one line; None when it can."""
        if self.cost_budget_usd is None or model in self.prices:
            return None
        if not model:
            return (
                "COST_BUDGET_USD is set (runs.py), but the agent names no model to price: "
                "name it (agent.py's MODEL) and give its prices in PRICES, or set "
                "COST_BUDGET_USD = None"
            )
        return (
            f"COST_BUDGET_USD is set (runs.py), but PRICES has no price for the agent's model "
            f"{model!r}: add the model's prices to PRICES, or set COST_BUDGET_USD = None"
        )

    def budget(self) -> Budget:
        """The budget of a prompt that carries none of its own."""
        return Budget(self.token_budget, self.cost_budget_usd)

    @property
    def sandbox_provider(self) -> str:
        """The provider a run uses unless it names another."""
        return next(iter(self.providers))

    @property
    def backends(self) -> list[str]:
        """Every backend the worker registers, each once, in provider order."""
        return list(dict.fromkeys(self.providers.values()))

    @property
    def approvals(self) -> bool:
        """Whether anything the agent runs waits for a person."""
        return self.approval != "none"

    @property
    def host_bound(self) -> bool:
        """Whether a run's sandbox may live on one worker's host."""
        return any(backend in HOST_BOUND for backend in self.providers.values())

    def command(self, role: str) -> str:
        """The name of one of the project's commands: "<name>-starter"."""
        return f"{self.name}-{role}"


def priced_as(model: object) -> str:
    """The name PRICES knows an agent's ``model`` by (its ``model``: a name,
    or a Model object with its name): "" when the agent leaves it to the
    SDK's default, which a workflow cannot read, so it is never priced."""
    if isinstance(model, str):
        return model
    # A Model object names its model as ``model``; the plugin's stand-in
    # for it in a workflow, as ``model_name``.
    return str(getattr(model, "model", "") or getattr(model, "model_name", "") or "")


@dataclass(frozen=True)
class Price:
    """A model's prices, in USD per million tokens."""

    input: float
    cached_input: float
    output: float


def cost_of(
    model: str,
    input_tokens: int,
    cached_tokens: int,
    output_tokens: int,
    prices: Mapping[str, Price],
) -> float | None:
    """What a run's tokens cost in USD at ``prices[model]``, None when the
    table has no price for it. Cached tokens are among the input tokens (as
    the OpenAI usage counts them): they are charged at the cached price,
    the rest of the input at the input price."""
    price = prices.get(model)
    if price is None:
        return None
    cached = min(max(cached_tokens, 0), input_tokens)
    return (
        (input_tokens - cached) * price.input
        + cached * price.cached_input
        + output_tokens * price.output
    ) / 1_000_000


# Where a budget came from, as a prompt stopped by it says.
SERVICE_TOKENS = "TOKEN_BUDGET in runs.py"
SERVICE_COST = "COST_BUDGET_USD in runs.py"
OWN_TOKENS = "the prompt's own token budget"
OWN_COST = "the prompt's own cost budget"


@dataclass(frozen=True)
class Budget:
    """How far one prompt may go: in tokens (input and output), and in USD
    at its model's price (None: no limit), and where each was set. It is
    checked before each model call, so the call that reaches it may pass it
    by its own tokens."""

    tokens: int | None = None
    cost_usd: float | None = None
    tokens_set_by: str = SERVICE_TOKENS
    cost_set_by: str = SERVICE_COST

    def reached(self, tokens: int, cost_usd: float | None) -> tuple[str, str] | None:
        """Whether a prompt that used ``tokens`` costing ``cost_usd`` (None:
        unknown) has reached it: the kind ("tokens" or "cost") and why it
        stopped, in a line; None while it may go on."""
        if self.tokens is not None and tokens >= self.tokens:
            return "tokens", (
                f"stopped: token budget reached: {tokens:,} of {self.tokens:,} tokens "
                f"({self.tokens_set_by})"
            )
        if self.cost_usd is not None and cost_usd is not None and cost_usd >= self.cost_usd:
            return "cost", (
                f"stopped: cost budget reached: {usd(cost_usd)} of {usd(self.cost_usd)} "
                f"({self.cost_set_by})"
            )
        return None


def prompt_budget(service: Budget, tokens: int | None, cost_usd: float | None) -> Budget:
    """The budget of a prompt that carries its own ``tokens`` and
    ``cost_usd`` (each None: the service's)."""
    if tokens is not None:
        service = Budget(tokens, service.cost_usd, OWN_TOKENS, service.cost_set_by)
    if cost_usd is not None:
        service = Budget(service.tokens, cost_usd, service.tokens_set_by, OWN_COST)
    return service


def usd(amount: float) -> str:
    """An amount in USD as people read it: $0.0213, $1.50."""
    return f"${amount:.2f}" if amount >= 1 else f"${amount:.4f}"


def bad_token_budget(name: str, value: object) -> str | None:
    """Why ``value`` is no token budget, in one line naming it (``name``:
    where it was given); None when it is one (None: no budget)."""
    if value is None or (type(value) is int and value >= 1):
        return None
    return f"{name} {value!r} is not allowed: use a whole number of tokens, 1 or more"


def bad_cost_budget(name: str, value: object) -> str | None:
    """Why ``value`` is no budget in USD, in one line naming it; None when
    it is one (None: no budget)."""
    refusal = f"{name} {value!r} is not allowed: use an amount in USD over 0 (0.5 for 50 cents)"
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return refusal
    return None if math.isfinite(value) and value > 0 else refusal


def beyond(
    service: Budget, tokens: int | None, cost_usd: float | None, names: tuple[str, str]
) -> str | None:
    """Why a prompt's own budget of ``tokens`` and ``cost_usd`` cannot be
    kept: it is over the service's (``service``), which bounds every prompt:
    whoever may start a run (an API caller among them) may give one a lower
    budget, never a higher. In one line naming it (``names``: where each was
    given); None when it can."""
    if tokens is not None and service.tokens is not None and tokens > service.tokens:
        return (
            f"{names[0]} {tokens:,} is over the service's {service.tokens:,} "
            f"({SERVICE_TOKENS}): a prompt's own budget may only be lower"
        )
    if cost_usd is not None and service.cost_usd is not None and cost_usd > service.cost_usd:
        return (
            f"{names[1]} {usd(cost_usd)} is over the service's {usd(service.cost_usd)} "
            f"({SERVICE_COST}): a prompt's own budget may only be lower"
        )
    return None


def budgets_given(
    tokens: object, cost_usd: object, names: tuple[str, str], service: Budget
) -> tuple[int | None, float | None]:
    """A prompt's own budget as a client gave it (text from a command line
    or a form, or JSON numbers; None: none), ``names`` naming each where it
    was given; ValueError, in one line naming the bad one, for a bad one or
    one over the ``service``'s (beyond())."""
    if isinstance(tokens, str):
        tokens = int(tokens) if tokens.strip().isdigit() else tokens
    if isinstance(cost_usd, str):
        with contextlib.suppress(ValueError):
            cost_usd = float(cost_usd)
    refusal = bad_token_budget(names[0], tokens) or bad_cost_budget(names[1], cost_usd)
    if refusal is not None:
        raise ValueError(refusal)
    # Checked above: a whole number and a finite amount, or None.
    own_tokens = tokens if isinstance(tokens, int) else None
    own_cost = float(cost_usd) if isinstance(cost_usd, int | float) else None
    refusal = beyond(service, own_tokens, own_cost, names)
    if refusal is not None:
        raise ValueError(refusal)
    return own_tokens, own_cost


_configured: Service | None = None


def configure(service: Service) -> None:
    """Make ``service`` the one this process runs (once; again with an equal
    one changes nothing).

    Args:
        service: the service, as its service.py describes it.
    """
    global _configured
    if _configured is not None and _configured != service:
        raise RuntimeError(
            f"this process already runs the service {_configured.name!r}: "
            "the runtime serves one service per process"
        )
    _configured = service


def current() -> Service:
    """The service this process runs.

    Returns:
        The service ``configure`` was given; a ``RuntimeError`` before that.
    """
    if _configured is None:
        raise RuntimeError(
            "no service is configured: import your project's package (its service.py "
            "calls sandbox_agent_runtime.configure()) before using the runtime"
        )
    return _configured
