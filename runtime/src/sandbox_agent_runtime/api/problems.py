"""The API's errors: each an ``application/problem+json`` body (RFC 9457)
whose ``detail`` is one sentence naming the value, what was wrong and what
is allowed, with its HTTP status. Nothing else reaches a caller: an
unexpected error is a 500 whose detail says only that, and the log has the
rest."""

from typing import Any

from pydantic import BaseModel, ConfigDict

PROBLEM_JSON = "application/problem+json"

# Each status the API answers with, and what it means here (the OpenAPI
# document lists them).
TITLES = {
    400: "Bad request",
    401: "No caller",
    404: "Not found",
    405: "Method not allowed",
    409: "Not now",
    411: "Length required",
    413: "Too large",
    415: "Unsupported media type",
    422: "Unprocessable request",
    429: "Too many",
    500: "Internal error",
    502: "The worker refused",
    503: "Unavailable",
    504: "No worker answered",
}


class Problem(Exception):
    """An error the API answers with: ``status`` and one sentence."""

    def __init__(
        self, status: int, detail: str, *, retry_after: int | None = None, **extra: Any
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        # Seconds, for a 429 or a 503: the Retry-After header.
        self.retry_after = retry_after
        self.extra = extra

    def body(self, instance: str) -> dict[str, Any]:
        return {
            "type": "about:blank",
            "title": TITLES.get(self.status, "Error"),
            "status": self.status,
            "detail": self.detail,
            "instance": instance,
            **self.extra,
        }


def not_found(workflow_id: str) -> Problem:
    """The one answer for a run that does not exist and for another
    caller's: the two must not be told apart."""
    return Problem(404, f"run {workflow_id!r}: no such run of yours.")


class ProblemBody(BaseModel):
    """A problem as the API answers it (RFC 9457): its status, what it
    means here, and one sentence; a few carry more fields."""

    model_config = ConfigDict(extra="allow")

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    # The path asked for.
    instance: str


# The schema of a problem in the OpenAPI document.
PROBLEM_SCHEMA = ProblemBody.model_json_schema()
