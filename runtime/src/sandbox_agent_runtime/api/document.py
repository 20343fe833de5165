"""The OpenAPI document's entries the routes declare beyond what FastAPI
makes of them: each body from its model (JSON, or a form with files), the
problems a route answers with, a started run's links, and the service's
own bounds, added once the document is made."""

from typing import Any

from sandbox_agent_runtime.api.models import SPACE, Fields
from sandbox_agent_runtime.api.problems import PROBLEM_JSON, PROBLEM_SCHEMA, TITLES
from sandbox_agent_runtime.schedules import LONGEST_INTERVAL
from sandbox_agent_runtime.service import current

# A Last-Event-ID as events.event_id_parts() takes it (or empty: from the
# first event), as a JSON Schema pattern: RUN_ID.EVENT_ID[.N] between white space.
LAST_EVENT_ID = f"^(?:[{SPACE}]*[^.{SPACE}][^.]*\\.[0-9]{{1,19}}(?:\\.[0-9]{{1,19}})?[{SPACE}]*)?$"


# What GET /v1/runs/{id}/events sends, and its ids (events.py, deltas.py).
EVENTS = (
    "Server-Sent Events, from the run's first step, then live, to its end: each step as "
    "the starter shows it (`sandbox`, `model`, `tool`, `mcp`, `run`, `session`, `prompt`, "
    "`version`, `step`; `failure`), `approval`, `delta`, `answer` (one per prompt of a "
    "conversation), `end`; `unavailable` (no id) when Temporal stopped answering.\n\n"
    "`delta`: the model's text as it is written, between the steps: `text`, `at` (where "
    "`text` goes in the turn's text: the length of what came before it, 0 after a model "
    "call redone on another worker), `turn` (the id of the turn's `model` event), `agent`. "
    "A turn's deltas concatenate to its text, the last turn's to the `answer`'s. A client "
    "gets only the text it has not had: resuming in the middle of a turn, the later deltas "
    "(or the rest of an ended turn in one); after a turn ended, its text in one. A run "
    "that does not stream (the worker's STREAM_MODEL_TURNS) has none.\n\n"
    "Ids: `RUN_ID.EVENT_ID` for a step or a delta (the history event it comes from, in the "
    "chain's run RUN_ID: a delta's is its batch's signal, or the end of its turn's model "
    "call), `RUN_ID.EVENT_ID.N` for what the API asked the run after that event (an "
    "approval, an answer, the end). Every replica gives the same ids; `Last-Event-ID` (or "
    "`last_event_id`) resumes after one, across the runs of a chain: nothing missed, "
    "nothing twice."
)


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI document's entry for the problems a route answers with."""
    return {
        status: {
            "description": TITLES[status],
            "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }


def plain(field: dict[str, Any]) -> dict[str, Any]:
    """A field's schema as pydantic writes it, without its title, a
    nullable one as one type that may be null."""
    field = {key: value for key, value in field.items() if key != "title"}
    choices = field.pop("anyOf", None)
    if choices:
        [kind] = [each for each in choices if each.get("type") != "null"]
        field = {**kind, **field, "type": [kind["type"], "null"]}
    return field


def form_field(field: dict[str, Any]) -> dict[str, Any]:
    """A JSON field as a form's: never null (a form leaves it out instead),
    and a yes or no as text (boolean() reads it)."""
    kind = field.get("type")
    if kind == "boolean":
        text = ["true", "false", "1", "0", "yes", "no", "on", "off"]
        return {"type": "string", "enum": text, "default": str(field.get("default")).lower()}
    if isinstance(kind, list):
        field = {key: value for key, value in field.items() if key != "default"}
        return {**field, "type": next(each for each in kind if each != "null")}
    return field


def request_body(model: type[Fields], files: bool = False) -> dict[str, Any]:
    """The OpenAPI document's entry for a route's body: a JSON object of
    ``model``'s fields and nothing else, or (``files``) a form of them with
    files, each file its own name."""
    declared = model.model_json_schema()
    fields = {name: plain(field) for name, field in declared["properties"].items()}

    def schema(properties: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "description": declared.get("description", ""),
            "properties": properties,
            "required": declared.get("required", []),
            "additionalProperties": False,
        }

    content = {"application/json": {"schema": schema(fields)}}
    if files:
        binary = {
            "type": "array",
            "items": {"type": "string", "format": "binary"},
            "description": (
                "Files for the workspace's top, each its own plain name, or under a "
                "directory there by a path of plain names (skills/notes/SKILL.md)."
            ),
        }
        in_form = {name: form_field(field) for name, field in fields.items()}
        content["multipart/form-data"] = {"schema": schema({**in_form, "files": binary})}
    return {"requestBody": {"required": True, "content": content}}


def finished(document: dict[str, Any], min_interval: int = 60) -> dict[str, Any]:
    """The OpenAPI ``document`` with this service's bounds (the providers a
    run may name, a prompt's budgets at most the service's, a schedule's
    interval from ``min_interval``, SCHEDULE_MIN_INTERVAL) and the
    problem's schema, and without FastAPI's own validation errors: every
    error is a problem."""
    budget = current().budget()
    most = {"token_budget": budget.tokens, "cost_budget_usd": budget.cost_usd}
    for path in document.get("paths", {}).values():
        for operation in path.values():
            content = operation.get("requestBody", {}).get("content", {})
            for each in content.values():
                properties = each["schema"].get("properties", {})
                for name, bound in most.items():
                    if name in properties and bound is not None:
                        properties[name]["maximum"] = bound
                if "interval_seconds" in properties:
                    properties["interval_seconds"]["minimum"] = min_interval
                    properties["interval_seconds"]["maximum"] = LONGEST_INTERVAL
                if "provider" in properties:
                    properties["provider"]["enum"] = ["", *current().providers]
            if "HTTPValidationError" in str(operation["responses"].get("422")):
                del operation["responses"]["422"]
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for fastapis in ("HTTPValidationError", "ValidationError"):
        schemas.pop(fastapis, None)
    schemas["Problem"] = PROBLEM_SCHEMA
    return document


# The links from a run just started to its routes (each an operation's id).
RUN_LINKS = {
    name: {"operationId": operation, "parameters": {"run": "$response.body#/id"}}
    for name, operation in {
        "self": "run_state",
        "events": "run_events",
        "messages": "follow_up",
        "end": "end_run",
        "outputs": "run_outputs",
        "approvals": "run_approvals",
    }.items()
}
