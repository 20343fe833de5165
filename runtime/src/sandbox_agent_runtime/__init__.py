"""The service's machinery: what makes every run durable, bounded and
observable (the workflow, the worker, the starter, the sandbox backends,
chains, {{ "host affinity, " if cookiecutter | host_bound_backends }}limits, metrics, health, versioning{{ ", approvals" if cookiecutter.approval != "none" }}).

Rarely edited. Each module's first line says what it guarantees, and the
project's tests prove it; the team's own modules are agent.py, tools.py
and runs.py, one level up.
"""
