"""What a client hands a run, and what a run hands back: the workflow's one
input (``RunRequest``) and its result (``RunAnswer``).

Plain dataclasses with no import of the Agents SDK, so the starter and any
other client build and read them cheaply. Files travel as gzipped tar archives in
base64 text (``archive``): small ones inline in history, anything over
Temporal's external-storage threshold through the object store
(object_store.py, ``OBJECT_STORE_URL``) as a reference in history.

A run's input and result are part of its recorded history: change them as
``chain.Carried`` is changed (add a field only with a default; never rename,
remove or retype one), or ship the change as a versioned deploy
(docs/versioning.md). tests/histories/ replays runs of the current fields.
"""

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Input:
    """A file or a directory from the client's machine, placed at the top of
    the workspace under ``name`` before the agent's first turn."""

    # Its name at the top of the workspace (the path's last part).
    name: str
    # "file" or "directory".
    kind: str
    # The bytes of its files, and how many files it holds.
    size: int
    files: int
    # A gzipped tar archive of it (members under ``name``), in base64.
    archive: str
    # The SHA-256 of the archive's bytes, checked where it is placed.
    sha256: str


@dataclass(frozen=True)
class Repo:
    """A git repository, cloned by the worker at ``ref`` and placed at the
    top of the workspace under ``name`` (workspace/)."""

    url: str
    # A branch, a tag or a commit; None for the repository's default branch.
    ref: str | None = None
    # Its directory at the top of the workspace.
    name: str = ""


@dataclass(frozen=True)
class Check:
    """A check on what a run left in its workspace, made by the run itself
    in its own sandbox after the answer and before the workspace goes (a
    step the model does not take): evaluations (evals/) ask for them, so
    nothing the agent wrote runs anywhere but in its sandbox."""

    # "file_exists", "file_contains", "file_sha256" or "command".
    kind: str
    # The file's path, relative to the workspace (file_*).
    path: str = ""
    # The text the file must hold (file_contains), its SHA-256 (file_sha256),
    # or the shell command that must exit 0 (command).
    text: str = ""
    sha256: str = ""
    command: str = ""
    # How long the command may run, in seconds.
    timeout: float = 300.0


@dataclass(frozen=True)
class CheckResult:
    """What a check found: whether it passed, and in a line why not."""

    kind: str
    passed: bool
    # What was checked ("data/report.txt", "pytest -q"), and what was found
    # when it failed (the command's last lines of output, bounded).
    subject: str = ""
    detail: str = ""


@dataclass(frozen=True)
class RunRequest:
    """One run of the agent: the workflow's only input from a client."""

    # What to ask the agent.
    prompt: str
    # The sandbox provider the run uses (one the worker registers); "" for
    # the service's primary provider (``Service.sandbox_provider``).
    provider: str = ""
    # Files and directories the workspace starts with, beside the agent's own
    # default_manifest (agent.py).
    inputs: list[Input] = field(default_factory=list)
    # A git repository the workspace starts with.
    repo: Repo | None = None
    # Whether the run is a conversation: after its answer it waits for
    # follow-ups (FollowUp) in the same workspace, until it is ended or
    # SESSION_LIFETIME passes with none; its result is then its last answer.
    # Without, the run ends with its answer (its result), as a job does.
    follow_ups: bool = False
    # Checks the run makes on its workspace after its answer (a job's
    # only): their results are in its answer (RunAnswer.checks).
    checks: list[Check] = field(default_factory=list)
    # The prompt's own budget: the most tokens (input and output) and USD
    # it may use (None: the service's TOKEN_BUDGET, COST_BUDGET_USD). A
    # follow-up has its own (FollowUp).
    token_budget: int | None = None
    cost_budget_usd: float | None = None
    # Where the run posts its end (its id, state, answer and usage), signed
    # with the worker's CALLBACK_SECRET, to a server CALLBACK_HOSTS lists
    # (callbacks.py); "" for none. A conversation's chain posts once, when
    # the conversation ends.
    callback_url: str = ""


@dataclass(frozen=True)
class OutputFile:
    """A file the run created or changed in the workspace."""

    # Its path, relative to the workspace.
    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Outputs:
    """Every file the run created or changed, and what was left out."""

    files: list[OutputFile] = field(default_factory=list)
    # A gzipped tar archive of those files (members under their workspace paths), in
    # base64; empty when ``withheld`` says why.
    archive: str = ""
    # With a repository input: the run's changes as a patch `git apply`
    # takes on the ref it was cloned at, in base64 (empty when nothing changed).
    patch: str = ""
    # The commit the repository was cloned at.
    commit: str = ""
    # Workspace entries not taken, each "path: why" (a link, a device, ...).
    skipped: list[str] = field(default_factory=list)
    # Why the files themselves did not travel (too large without a store).
    withheld: str = ""

    @property
    def size(self) -> int:
        return sum(file.size for file in self.files)


@dataclass(frozen=True)
class RunAnswer:
    """What a run hands back: the agent's answer and the workspace's outputs."""

    # The final output: text, or (an agent with an output_type) its JSON value.
    answer: Any
    # Whether ``answer`` is a structured output (JSON) rather than text.
    structured: bool = False
    outputs: Outputs = field(default_factory=Outputs)
    # What the request's checks found, in their order.
    checks: list[CheckResult] = field(default_factory=list)
    # Why the prompt stopped before the agent's own answer, in a line (then
    # also ``answer``): its budget was reached, or a guardrail tripped. ""
    # when the agent answered.
    stopped: str = ""
    # The name of the guardrail that tripped and stopped the prompt ("" for none).
    guardrail: str = ""


def answer_json(answer: RunAnswer) -> dict[str, Any]:
    """``answer`` as the API's run resource and a run's callback show it."""
    outputs = answer.outputs
    return {
        "text": json.dumps(answer.answer, ensure_ascii=False)
        if answer.structured
        else str(answer.answer),
        "structured": answer.structured,
        "value": answer.answer if answer.structured else None,
        "outputs": [
            {"path": each.path, "size": each.size, "sha256": each.sha256} for each in outputs.files
        ],
        "patch": bool(outputs.patch),
        "withheld": outputs.withheld,
        # Why the prompt stopped before the agent's own answer (its budget,
        # or a guardrail that tripped), or "".
        "stopped": answer.stopped,
        # The guardrail that tripped, or "".
        "guardrail": answer.guardrail,
    }


@dataclass(frozen=True)
class FollowUp:
    """A follow-up to a conversation that has answered (the FOLLOW_UP
    update): the next prompt, in the same workspace, with more inputs."""

    prompt: str
    inputs: list[Input] = field(default_factory=list)
    # Its own budget, as a RunRequest's (None: the service's); each
    # follow-up starts with a fresh one.
    token_budget: int | None = None
    cost_budget_usd: float | None = None


# Where a conversation stands: a prompt is being worked on; it has answered
# and holds its sandbox; it has answered and released its sandbox (its
# workspace is in a snapshot); it has ended.
WORKING, WAITING, RELEASED, ENDED = "working", "waiting", "released", "ended"


@dataclass(frozen=True)
class Conversation:
    """A conversation's state (the CONVERSATION query, and the SESSION_MEMO)."""

    # WORKING, WAITING, RELEASED or ENDED.
    state: str
    # The prompts it was given (the first is 1), and the prompts it answered.
    prompts: int = 1
    answered: int = 0
    # When the state began (ISO 8601, UTC).
    since: str = ""
    # The latest answer (None before the first).
    answer: RunAnswer | None = None
    # What the latest restore of the workspace said ("" when none was needed).
    restored: str = ""
