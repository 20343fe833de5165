"""The API's bodies, declared once as pydantic models: what each route takes
and answers, as the OpenAPI document shows them. A request's fields are
read and checked by bodies.py, against these declarations; an answer is
served through its model."""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sandbox_agent_runtime.callbacks import LONGEST_URL as LONGEST_CALLBACK_URL
from sandbox_agent_runtime.shared import LONGEST_PROMPT

# White space as Python's str.isspace() and str.strip() take it, the
# characters of a JSON Schema pattern's class: the checks read text with
# them (ECMA's \s differs at the edges, "\x1c" and "\ufeff" among them).
SPACE = (
    "\\u0009-\\u000d\\u001c-\\u0020\\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029"
    "\\u202f\\u205f\\u3000"
)

Prompt = Annotated[
    str,
    Field(
        min_length=1,
        pattern=f"[^{SPACE}]",
        description=f"What the agent should do: not blank, at most {LONGEST_PROMPT:,} bytes "
        "in UTF-8 (LONGEST_PROMPT; more is a 413).",
    ),
]
# A prompt's own budgets: null, or left out, is the service's; over the
# service's is refused (create_app adds the service's as each maximum).
TokenBudget = Annotated[int | None, Field(ge=1, description="Tokens this prompt may use.")]
CostBudget = Annotated[float | None, Field(gt=0, description="USD this prompt may cost.")]


class Fields(BaseModel):
    """A request's body: these fields and no others."""

    model_config = ConfigDict(extra="forbid")


class RunBody(Fields):
    """A run to start (JSON, or a form with ``files`` parts)."""

    prompt: Prompt
    follow_ups: bool = Field(
        False, description="A conversation: it waits for follow-ups until it is ended."
    )
    provider: str = Field("", description="The sandbox backend; empty: the service's.")
    repo: str = Field(
        "",
        pattern=f"^[^{SPACE}]*$",
        description="URL[@REF] of a git repository the operator allows (REPO_ALLOWED_*); "
        "empty: none.",
    )
    token_budget: TokenBudget = None
    cost_budget_usd: CostBudget = None
    callback_url: str = Field(
        "",
        pattern=f"^[^{SPACE}]*$",
        max_length=LONGEST_CALLBACK_URL,
        description="An http(s) URL of a server the operator allows (CALLBACK_HOSTS) that gets "
        "a POST when the run ends, signed as Standard Webhooks says; empty: none.",
    )


class FollowUpBody(Fields):
    """A follow-up to a conversation that has answered (JSON, or a form with files)."""

    prompt: Prompt
    token_budget: TokenBudget = None
    cost_budget_usd: CostBudget = None


class DecisionBody(Fields):
    """A person's decision on a call that waits in the run ``run_id``."""

    run_id: str
    approve: bool
    reason: str = ""
    always: bool = False
    approver: str = ""
    signature: str = ""


class Links(BaseModel):
    """A run's routes."""

    self_: str = Field(alias="self")
    events: str
    messages: str
    end: str
    outputs: str
    approvals: str


class Started(BaseModel):
    id: str
    links: Links


class OutputFile(BaseModel):
    path: str
    size: int
    sha256: str


class Answer(BaseModel):
    """A run's answer: its text (a structured answer as JSON text, and as ``value``)."""

    text: str
    structured: bool
    value: Any = None
    outputs: list[OutputFile]
    patch: bool
    withheld: str
    # Why the prompt stopped before the agent's own answer (its budget, or a
    # guardrail that tripped), or "".
    stopped: str
    # The name of the guardrail that tripped (agent.py), or "".
    guardrail: str


class RunState(BaseModel):
    """Where a run stands, with its answer, usage and outputs."""

    id: str
    state: Literal["working", "waiting", "released", "ended", "failed"]
    follow_ups: bool
    prompts: int
    answered: int
    since: str
    usage: dict[str, Any] | None
    answer: Answer | None
    links: Links
    # Why a failed run did not answer.
    reason: str | None = None


class FollowedUp(BaseModel):
    id: str
    # The follow-up's number among the conversation's prompts.
    prompt: int
    links: Links


class Ending(BaseModel):
    id: str
    state: Literal["ending"]
    links: Links


class Approval(BaseModel):
    """A call that waits for a person, as the run shows it."""

    run_id: str
    call_id: str
    tool: str
    detail: str
    asked_at: str


class Approvals(BaseModel):
    run_id: str
    approvals: list[Approval]


class Decided(BaseModel):
    call_id: str
    decision: str


class ScheduleBody(Fields):
    """A schedule: a job's fields (JSON, or a form with ``files`` parts) and
    when it runs, one of ``cron`` and ``interval_seconds``."""

    prompt: Prompt
    provider: str = Field("", description="The sandbox backend; empty: the service's.")
    repo: str = Field(
        "",
        pattern=f"^[^{SPACE}]*$",
        description="URL[@REF] of a git repository the operator allows (REPO_ALLOWED_*); "
        "empty: none.",
    )
    token_budget: TokenBudget = None
    cost_budget_usd: CostBudget = None
    callback_url: str = Field(
        "",
        pattern=f"^[^{SPACE}]*$",
        max_length=LONGEST_CALLBACK_URL,
        description="As a run's: each run posts its end there; empty: none.",
    )
    cron: str = Field(
        "",
        max_length=200,
        description="When, in UTC: five cron fields (minute hour day-of-month month "
        "day-of-week) or @hourly, @daily, ...; empty: interval_seconds says.",
    )
    interval_seconds: int | None = Field(
        None,
        ge=1,
        description="Every N seconds, at least SCHEDULE_MIN_INTERVAL; null: cron says.",
    )
    overlap: Literal[
        "skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"
    ] = Field("skip", description="What a run due while the last still runs does.")


class ScheduleLinks(BaseModel):
    self_: str = Field(alias="self")
    pause: str
    unpause: str


class ScheduledRun(BaseModel):
    """A run the schedule started: its id (GET /v1/runs/{id}), when it was due."""

    id: str
    scheduled_at: str
    started_at: str


class ScheduleState(BaseModel):
    """A schedule: when it runs, its overlap policy, whether it is paused,
    its next times and its latest runs (at most ten, newest first)."""

    id: str
    cron: str | None
    interval_seconds: int | None
    overlap: str
    paused: bool
    next_runs: list[str]
    runs_started: int
    runs: list[ScheduledRun]
    links: ScheduleLinks


class Schedules(BaseModel):
    schedules: list[ScheduleState]
