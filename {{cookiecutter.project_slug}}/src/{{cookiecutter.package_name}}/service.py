{%- set providers = cookiecutter | providers -%}
{%- set backends = cookiecutter | backends -%}
"""The service as the runtime runs it: its names, its sandbox backends and the
limits of its runs (runs.py), handed to sandbox_agent_runtime once.

The names must agree across every process: a starter that uses another task
queue waits for a worker that never comes, and a run that names a sandbox
provider the worker did not register schedules activities no worker can run.
They live here, once. Changing one is a deploy of every worker and starter
together (docs/operations.md); the runtime's settings of a running worker
(addresses, capacity, keys) are environment variables instead.
"""

from sandbox_agent_runtime import Service, configure

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
{%- if backends | reject("in", ["local", "cloudflare"]) | list %}
    # Each backend's options (the runtime's backends/<backend>.py lists them).
    backend_options={
{%- if "daytona" in backends %}
        "daytona": {
            "auto_stop_interval_minutes": {{ cookiecutter.daytona_auto_stop_interval_minutes | int }},
            "create_timeout_seconds": {{ cookiecutter.daytona_create_timeout_seconds | int }},
            "pause_on_exit": {{ "True" if cookiecutter.daytona_pause_on_exit else "False" }},
            "image": {{ cookiecutter.daytona_image | tojson if cookiecutter.daytona_image else "None" }},
            "snapshot": {{ cookiecutter.daytona_snapshot | tojson if cookiecutter.daytona_snapshot else "None" }},
        },
{%- endif %}
{%- if "e2b" in backends %}
        "e2b": {
            "sandbox_type": {{ cookiecutter.e2b_sandbox_type | tojson }},
            "template": {{ cookiecutter.e2b_template | tojson if cookiecutter.e2b_template else "None" }},
            "timeout_seconds": {{ cookiecutter.e2b_timeout_seconds | int }},
            "on_timeout": {{ cookiecutter.e2b_on_timeout | tojson }},
            "pause_on_exit": {{ "True" if cookiecutter.e2b_pause_on_exit else "False" }},
        },
{%- endif %}
{%- if "docker" in backends %}
        "docker": {
            "image": {{ cookiecutter.docker_image | tojson }},
            "network": {{ cookiecutter.docker_network | tojson }},
        },
{%- endif %}
{%- if "modal" in backends %}
        "modal": {
            "app_name": {{ cookiecutter.modal_app_name | tojson }},
            "image": {{ cookiecutter.modal_image | tojson if cookiecutter.modal_image else "None" }},
            "timeout_seconds": {{ cookiecutter.modal_timeout_seconds | int }},
        },
{%- endif %}
{%- if "runloop" in backends %}
        "runloop": {
            "blueprint": {{ cookiecutter.runloop_blueprint | tojson if cookiecutter.runloop_blueprint else "None" }},
            "keep_alive_seconds": {{ cookiecutter.runloop_keep_alive_seconds | int }},
        },
{%- endif %}
{%- if "vercel" in backends %}
        "vercel": {
            "runtime": {{ cookiecutter.vercel_runtime | tojson }},
            "timeout_seconds": {{ cookiecutter.vercel_timeout_seconds | int }},
        },
{%- endif %}
{%- if "blaxel" in backends %}
        "blaxel": {
            "image": {{ cookiecutter.blaxel_image | tojson if cookiecutter.blaxel_image else "None" }},
            "region": {{ cookiecutter.blaxel_region | tojson }},
            "ttl_seconds": {{ cookiecutter.blaxel_ttl_seconds | int }},
        },
{%- endif %}
    },
{%- endif %}
)

configure(SERVICE)
