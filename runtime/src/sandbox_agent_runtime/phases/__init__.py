"""The phases of a run, each a module of one concern, which the workflow
takes in order.

A job begins (``begin``), has its workspace prepared, answers its prompt
(``prompting``, with ``deciding`` for a call that waits for a person), has its
outputs collected and its sandbox removed. A conversation then snapshots its
workspace and waits for a follow-up (``between``). A full history or a host
gone interrupts a phase (``interruptions``); a failed run ends as ``ending``
says; ``progress`` is what the run shows of itself, ``given`` what the service
gives it. None of them imports the workflow.
"""
