"""What test_api_schema.py's schemathesis leaves out (SCHEMATHESIS_HOOKS):
the requests a client would not send, for what no JSON Schema can say.
They are left out rather than changed: schemathesis cannot check a body
with files again once changed, and would take it for an invalid one."""

from typing import Any

import schemathesis
from schemathesis.core.file_samples import file_extension
from schemathesis.transport.serialization import Binary


def file_name(item: object) -> str:
    """The name schemathesis gives a file of the ``files`` array: the
    field's, with the extension of what the bytes look like."""
    data = item.data if isinstance(item, Binary) else item
    extension = file_extension(data) if isinstance(data, bytes) else None
    return f"files.{extension}" if extension else "files"


@schemathesis.hook
def filter_case(context: Any, case: Any) -> bool:
    body = case.body
    if not isinstance(body, dict):
        return True
    # Each file has its own name (schemathesis names two of a kind alike,
    # which the API refuses: 400).
    files = body.get("files")
    if isinstance(files, list) and len({file_name(each) for each in files}) < len(files):
        return False
    # Whether a repository (or a callback URL) is taken depends on the
    # operator's REPO_ALLOWED_* (CALLBACK_HOSTS) and on where its host's name
    # leads, looked up: a valid request names none (the test reaches nothing
    # beyond loopback; a negative one is refused before any lookup:
    # test_api_schema.py's API_SETTINGS).
    meta = case.meta
    positive = meta is not None and meta.generation.mode.is_positive
    if positive and (body.get("repo") or body.get("callback_url")):
        return False
    # A schedule runs on one of a cron and an interval (no JSON Schema of
    # these says "exactly one"), and whether a cron's values are a calendar
    # is the Temporal service's to say: a valid one has an interval.
    schedule = getattr(case.operation, "path", "") == "/v1/schedules"
    return not (
        positive and schedule and (body.get("cron") or body.get("interval_seconds") is None)
    )
