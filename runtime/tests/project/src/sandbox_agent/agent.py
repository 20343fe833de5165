"""The agent: its instructions, model, model settings and tools. Yours to change.

The workflow builds the agent from ``sandbox_agent()`` at the start of every
run, so whatever is here reaches every new run; runs already started keep
the agent they started with only on versioned workers (docs/versioning.md).
To give the agent a tool of its own, see tools.py and docs/tools.md; to guard
its input and output, docs/guardrails.md.
"""

from datetime import timedelta

from agents import ModelSettings, Tool
from agents.models.default_models import get_default_model_settings
from agents.sandbox import SandboxAgent
from agents.sandbox.capabilities import Compaction, Filesystem, Shell, StaticCompactionPolicy

from sandbox_agent_runtime import (
    COMPACTION_THRESHOLD,
    agent_tool,
    careful_filesystem,
    plain_shell,
)

from sandbox_agent import tools

NAME = "Sandbox Agent"

INSTRUCTIONS = (
    "You have a sandbox with a shell and a filesystem. Use it to do the work "
    "rather than answering from memory, then report what the commands returned."
)

# The model the agent talks to.
MODEL = "gpt-5.6-luna"

# The model's settings: the Agents SDK's defaults for MODEL (for a GPT-5
# model, its reasoning effort and verbosity). To set your own on top of
# them: get_default_model_settings(MODEL).resolve(ModelSettings(temperature=0.2)).
MODEL_SETTINGS: ModelSettings = get_default_model_settings(MODEL)

# The agent's own tools, beside the sandbox's shell and filesystem: each an
# activity of tools.py, with the longest one attempt may take.
TOOLS: list[Tool] = [
    agent_tool(tools.current_time, timeout=timedelta(seconds=10)),
]


def sandbox_agent() -> SandboxAgent[None]:
    """The agent of every run: a default SandboxAgent's capabilities
    (filesystem, shell, compaction; only the compaction threshold differs),
    and the tools above."""
    return SandboxAgent[None](
        name=NAME,
        instructions=INSTRUCTIONS,
        model=MODEL,
        model_settings=MODEL_SETTINGS,
        tools=TOOLS,
        capabilities=[
            # Commands in a plain shell, mistakes told to the model (sandbox_agent_runtime.plain_shell).
            Filesystem(configure_tools=careful_filesystem),
            Shell(configure_tools=plain_shell),
            Compaction(policy=StaticCompactionPolicy(threshold=COMPACTION_THRESHOLD)),
            # Skills and a memory go here too (docs/skills-and-memory.md).
        ],
    )
