"""What the machinery takes from the team's modules: the agent (agent.py) and
its tool activities (tools.py).

The only module of machinery/ that imports them (runs.py's values aside), so
imports go one way: a team's module may use any machinery without a cycle.
tests/test_layout.py checks it.
"""

from {{ cookiecutter.package_name }}.agent import sandbox_agent
from {{ cookiecutter.package_name }}.tools import ACTIVITIES as TOOL_ACTIVITIES

__all__ = ["TOOL_ACTIVITIES", "sandbox_agent"]
