"""What test_api_schema.py's schemathesis does before each request
(SCHEMATHESIS_HOOKS): the two things a client must do that no JSON Schema
can say, done as a client does them."""

from typing import Any

import schemathesis
from schemathesis.core.file_samples import file_extension
from schemathesis.transport.serialization import Binary

# The one repository the API of the test allows (REPO_ALLOWED_HOSTS, on
# loopback): a repository's host is looked up before a run is given it, and
# the test reaches nothing beyond loopback.
ALLOWED_REPO = "https://127.0.0.1/org/repo.git@v1"


def file_name(item: object) -> str:
    """The name schemathesis gives a file of the ``files`` array: the
    field's, with the extension of what the bytes look like."""
    data = item.data if isinstance(item, Binary) else item
    extension = file_extension(data) if isinstance(data, bytes) else None
    return f"files.{extension}" if extension else "files"


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    """``case`` as a client would send it. (Changed as it is made, before
    schemathesis records whether it fits the schema: a body with files is
    one it cannot check again.)"""
    body = case.body
    if not isinstance(body, dict):
        return case
    # Each file its own name (schemathesis names two of a kind alike).
    files = body.get("files")
    if isinstance(files, list):
        named = {file_name(each): each for each in reversed(files)}
        body["files"] = list(reversed(named.values()))
    # A repository the operator allows, whose host needs no lookup.
    meta = case.meta
    positive = meta is not None and meta.generation.mode.is_positive
    if positive and isinstance(body.get("repo"), str) and body["repo"]:
        body["repo"] = ALLOWED_REPO
    return case
