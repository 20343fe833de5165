{%- set providers = cookiecutter | providers -%}
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

from {{ cookiecutter.package_name }} import runs

# The queue the worker polls and the starter sends runs to.
TASK_QUEUE = {{ cookiecutter.task_queue | tojson }}

# The name the worker registers its sandbox provider under: the prefix of
# every sandbox activity ("{{ cookiecutter.sandbox_provider_name }}-sandbox_session_start"), which lets
# several backends share one worker. A run uses it unless it names another.
{%- for constant, backend in providers %}
{{ constant }} = {{ (cookiecutter.sandbox_provider_name if loop.first else backend) | tojson }}
{%- endfor %}

SERVICE = Service(
    name={{ cookiecutter.project_slug | tojson }},
    task_queue=TASK_QUEUE,
    providers={
{%- for constant, backend in providers %}
        {{ constant }}: {{ backend | tojson }},
{%- endfor %}
    },
{%- if cookiecutter.approval != "none" %}
    approval={{ cookiecutter.approval | tojson }},
    approval_timeout=runs.APPROVAL_TIMEOUT,
{%- endif %}
    sandbox_secrets=runs.SANDBOX_SECRETS,
    max_turns=runs.MAX_TURNS,
    workflow_execution_timeout=runs.WORKFLOW_EXECUTION_TIMEOUT,
    sandbox_activity_timeout=runs.SANDBOX_ACTIVITY_TIMEOUT,
    token_budget=runs.TOKEN_BUDGET,
    cost_budget_usd=runs.COST_BUDGET_USD,
    prices={model: Price(**price) for model, price in runs.PRICES.items()},
)

configure(SERVICE)
