"""The service as the runtime runs it: its names, its sandbox backends and the
limits of its runs (runs.py), handed to sandbox_agent_runtime once.

The names must agree across every process: a starter that uses another task
queue waits for a worker that never comes, and a run that names a sandbox
provider the worker did not register schedules activities no worker can run.
They live here, once. Changing one is a deploy of every worker and starter
together (docs/operations.md); the runtime's settings of a running worker
(addresses, capacity, keys, each sandbox backend's options) are environment
variables instead (docs/configuration.md).
"""

from sandbox_agent_runtime import Price, Service, configure

from remote_agent import runs

# The queue the worker polls and the starter sends runs to.
TASK_QUEUE = "remote-agent"

# The name the worker registers its sandbox provider under: the prefix of
# every sandbox activity ("daytona-sandbox_session_start"), which lets
# several backends share one worker. A run uses it unless it names another.
SANDBOX_PROVIDER = "daytona"
LOCAL_PROVIDER = "local"
E2B_PROVIDER = "e2b"
MODAL_PROVIDER = "modal"
RUNLOOP_PROVIDER = "runloop"
VERCEL_PROVIDER = "vercel"
BLAXEL_PROVIDER = "blaxel"
CLOUDFLARE_PROVIDER = "cloudflare"

SERVICE = Service(
    name="remote-agent",
    task_queue=TASK_QUEUE,
    providers={
        SANDBOX_PROVIDER: "daytona",
        LOCAL_PROVIDER: "local",
        E2B_PROVIDER: "e2b",
        MODAL_PROVIDER: "modal",
        RUNLOOP_PROVIDER: "runloop",
        VERCEL_PROVIDER: "vercel",
        BLAXEL_PROVIDER: "blaxel",
        CLOUDFLARE_PROVIDER: "cloudflare",
    },
    approval="commands_and_writes",
    approval_timeout=runs.APPROVAL_TIMEOUT,
    sandbox_secrets=runs.SANDBOX_SECRETS,
    max_turns=runs.MAX_TURNS,
    workflow_execution_timeout=runs.WORKFLOW_EXECUTION_TIMEOUT,
    sandbox_activity_timeout=runs.SANDBOX_ACTIVITY_TIMEOUT,
    token_budget=runs.TOKEN_BUDGET,
    cost_budget_usd=runs.COST_BUDGET_USD,
    prices={model: Price(**price) for model, price in runs.PRICES.items()},
)

configure(SERVICE)
