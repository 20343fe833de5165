"""The phases of a run, each a module of one concern, which the workflow
(workflow.py) takes in order.

A job: the run begins (``begin``: its request read and checked, the host of
its sandbox chosen, its sandbox client); the workspace is prepared before the
agent's first model turn (workspace/steps.py: inputs placed, a snapshot
restored); the prompt is answered (``prompting``, each call that waits for a
person decided by ``deciding``); the outputs are collected (workspace/steps.py);
the sandbox is removed.

A conversation: the same, then the workspace is snapshotted and the run waits
(``between``: an idle sandbox released, a follow-up taken up, in a fresh
sandbox restored from the snapshot when released), and answers the next
prompt, until it is ended.

A phase is interrupted in two ways (``interruptions``): the run's history is
full, and the prompt (or the wait) goes on in the next run of the chain; the
host of the sandbox is gone, and a conversation's prompt is redone in a fresh
sandbox from its latest snapshot. A run that fails ends as ``ending`` says.

What the run shows of itself while it goes (its conversation's state, its
usage) is ``progress``; what the service gives it, read once, is ``given``.
Each module imports only from those below it (pyproject.toml's
``[tool.importlinter]``), and none of them from the workflow.
"""
