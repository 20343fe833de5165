"""The starter's exit statuses, at the bottom of the starter: what each one
means (``exit_statuses()``, which ``--help`` lists), ``Refused`` for what a run
refused or cannot do now (with the status for it), and the starter's own
command as the lines it prints name it."""

from sandbox_agent_runtime.exits import EXIT_BROKEN_PIPE as EXIT_BROKEN_PIPE
from sandbox_agent_runtime.exits import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from sandbox_agent_runtime.service import current

EXIT_COMPLETED = 0
EXIT_NOT_COMPLETED = 1
EXIT_UNREACHABLE = 2
EXIT_USAGE = 3
EXIT_REFUSED = 4
EXIT_UNDECRYPTABLE = 5
EXIT_FILES_NOT_WRITTEN = 6
EXIT_GUARDRAIL = 7


def exit_statuses() -> dict[int, str]:
    """What each exit status means, for scripts (--help lists them): the
    service's own, with approvals and with several sandbox providers."""
    with_approvals = current().approvals
    several = len(current().providers) > 1
    return {
        EXIT_COMPLETED: "the run (or the follow-up) answered and its answer was printed (with "
        "--no-wait: the run was started; with --end: the conversation ended, its sandbox removed)",
        EXIT_NOT_COMPLETED: "the run ended without an answer: it failed, timed out, was "
        "terminated or cancelled; or the prompt stopped at its budget (tokens or cost), "
        "saying so (a conversation then waits for a follow-up, its workspace kept)",
        EXIT_UNREACHABLE: "the Temporal service could not be reached, is misconfigured "
        "(TEMPORAL_*), has no such namespace, or stopped answering (the run itself may go on); "
        "or the object store (OBJECT_STORE_URL) does not answer or refuses it"
        + ("; or no worker answered for the run within 10 s" if with_approvals else ""),
        EXIT_USAGE: "bad usage: an unknown option"
        + (" or provider" if several else "")
        + ", a prompt that is empty, unreadable or too long, "
        "an --input, --repo or --output it cannot use (docs/inputs-and-outputs.md), "
        "a setting it cannot use (TEMPORAL_UI_URL, OBJECT_STORE_URL, PAYLOAD_ENCRYPTION_KEYS"
        + (", APPROVER_KEY_FILE" if with_approvals else "")
        + "), or no workflow with the id given to --attach, --continue or --end"
        + (" (or to --pending, --approve, --reject)" if with_approvals else "")
        + ", or one that is not this service's (neither its workflow type nor its task queue)"
        + "; a --cron or --every it does not take, or an --unschedule id of no schedule of "
        "this service's"
        + (
            "; a decision on a call that does not wait, in a run that has ended, or without the "
            "approver's key"
            if with_approvals
            else ""
        ),
        EXIT_REFUSED: "refused: a follow-up (--continue) to a run that is still working on a "
        "prompt, was started without follow-ups or has ended; or --end of a run that has ended "
        "or was started without follow-ups; or a schedule past SCHEDULES_PER_CALLER",
        EXIT_UNDECRYPTABLE: "the run's payloads do not decrypt: encrypted with a key that "
        "PAYLOAD_ENCRYPTION_KEYS here does not hold, or another key under the same id",
        EXIT_FILES_NOT_WRITTEN: "the run answered and its answer was printed, but not every file "
        "it made reached --output DIR: some (or all) were refused there, each named on stderr, "
        "the rest written; DIR could not be written; or the files did not travel (over the limit)",
        EXIT_GUARDRAIL: "a guardrail of the agent (agent.py) tripped and stopped the prompt: "
        "stderr names it and what it found (a conversation then waits for a follow-up, its "
        "workspace kept)",
        EXIT_INTERRUPTED: "interrupted (Ctrl+C) while following; the run itself goes on",
        EXIT_BROKEN_PIPE: "its output went to a pipe that closed early (| head)",
    }


def starter_command() -> str:
    """The starter's own command, as the user runs it ("<service>-starter"),
    in the lines it prints."""
    return current().command("starter")


def hint_command() -> str:
    """The starter's command as the lines that suggest a next step print it:
    through ``uv run``, which finds the project's environment from its
    directory (the command alone works only in an activated one)."""
    return f"uv run {starter_command()}"


class Refused(Exception):
    """What the starter asked of a run was refused, or cannot be done now;
    the message says why and what to do, in one line, and ``status`` is the
    starter's exit status for it."""

    def __init__(self, message: str, status: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.status = status
