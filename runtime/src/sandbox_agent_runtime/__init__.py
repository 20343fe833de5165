"""The runtime of a durable sandbox-agent service: the workflow, worker,
starter and codec server that run an OpenAI Agents SDK ``SandboxAgent`` on
Temporal, every sandbox operation an activity against the sandbox backend a
service chose (README.md).

A project describes itself as a ``Service`` and calls ``configure()``; its
workflow type subclasses ``workflow.AgentWorkflow``; its commands call
``worker.cli``, ``starter.cli``, ``codec_server.cli`` and ``histories.cli``.
Importing this package imports neither Temporal nor the Agents SDK.
"""

from sandbox_agent_runtime.service import Service, configure, current

__all__ = ["Service", "configure", "current"]
