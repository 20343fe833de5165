"""Whose a run is: the one rule the API and the starter both apply before
they read or drive a run they are given the id of.

Services rendered from the template may share a Temporal namespace and a
workflow type, so every run a service starts records its service in its memo
(``SERVICE_MEMO``: the task queue only its workers poll), carried from run to
run of a chain; a run recorded before that is this service's when it is on
this service's task queue. Another service's run is answered exactly as an
id that names no run, so a service learns nothing of another's runs.
"""

from collections.abc import Mapping
from typing import Any

from temporalio.client import WorkflowExecution

from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.shared import SERVICE_MEMO

__all__ = ["SERVICE_MEMO", "of_this_service", "service_memo"]


def service_memo() -> dict[str, Any]:
    """What every run this service starts records of its service, in its memo."""
    return {SERVICE_MEMO: current().task_queue}


def of_this_service(run: WorkflowExecution, memo: Mapping[str, Any]) -> bool:
    """Whether ``run`` (described or listed; its memo: ``memo``) is this
    service's: its memo names this service's task queue or, recorded before
    runs named their service, it is on that queue. Its workflow type is not
    asked: it is the same in every render."""
    recorded = memo.get(SERVICE_MEMO)
    if recorded is None:
        return run.task_queue == current().task_queue
    return bool(recorded == current().task_queue)
