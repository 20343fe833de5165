"""A ``SandboxAgent`` whose every sandbox operation is a Temporal activity.

The agent gets a machine to work on: a shell to run commands in and a
filesystem to read and write. The plugin turns each of those operations
(creating the session, each command, each read and write, the teardown) into
an activity against the sandbox provider the worker registered under
``SANDBOX_PROVIDER``. Two consequences:

1. Each sandbox operation is retried on its own and shows up in the workflow's
   history, so a flaky command is a retried activity, not a lost run.
2. The sandbox session's state is recorded with the workflow, so a worker that
   restarts part-way through a run resumes against the same session.

Workflow code must be deterministic: everything that touches the outside world
(the model, the sandbox) happens in activities, never here.
"""

from datetime import timedelta

from agents import AgentsException, Runner
from agents.run import RunConfig
from agents.sandbox import SandboxAgent, SandboxRunConfig
from agents.sandbox.snapshot import NoopSnapshotSpec
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, RetryState
from temporalio.openai_agents import AgentsWorkflowError
from temporalio.openai_agents.workflow import temporal_sandbox_client

from {{ cookiecutter.package_name }}.backends.{{ cookiecutter.sandbox_backend }} import (
    sandbox_options,
)
from {{ cookiecutter.package_name }}.shared import (
    MAX_TURNS,
    MODEL,
    SANDBOX_ACTIVITY_TIMEOUT,
    SANDBOX_PROVIDER,
)

INSTRUCTIONS = (
    "You have a sandbox with a shell and a filesystem. Use it to do the work "
    "rather than answering from memory, then report what the commands returned."
)

# A sandbox operation that keeps failing (a bad credential, a missing image)
# ends the run after a few attempts instead of backing off for ever: about 15 s
# of retries in all. An error the sandbox marks as terminal is not retried.
SANDBOX_RETRY_POLICY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
)


@workflow.defn
class SandboxAgentWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        # A default SandboxAgent already carries the Filesystem, Shell and
        # Compaction capabilities, so there are no tools to declare here.
        agent = SandboxAgent[None](
            name={{ cookiecutter.project_name | tojson }},
            instructions=INSTRUCTIONS,
            model=MODEL,
        )
        run_config = RunConfig(
            sandbox=SandboxRunConfig(
                # Must match the name the worker registered its provider under.
                client=temporal_sandbox_client(
                    SANDBOX_PROVIDER,
                    workflow.ActivityConfig(
                        start_to_close_timeout=SANDBOX_ACTIVITY_TIMEOUT,
                        retry_policy=SANDBOX_RETRY_POLICY,
                    ),
                ),
                options=sandbox_options(),
                # No snapshot of the workspace is written when the session ends.
                snapshot=NoopSnapshotSpec(),
            ),
        )
        try:
            result = await Runner.run(agent, prompt, max_turns=MAX_TURNS, run_config=run_config)
        except AgentsException as e:
            # An exception escaping workflow code fails only the workflow
            # *task*, which Temporal retries for ever: the run would hang.
            # Turn the agent's own errors (too many turns, a malformed model
            # response, ...) into a failed run a person can read.
            raise ApplicationError(
                f"The agent could not finish: {e}",
                type=type(e).__name__,
                non_retryable=True,
            ) from e
        except (ActivityError, AgentsWorkflowError) as e:
            # A model call or a sandbox operation failed for good: say which,
            # and why, in the failure the starter and the Web UI show.
            failed = e if isinstance(e, ActivityError) else e.__cause__
            if not isinstance(failed, ActivityError) or failed.retry_state not in GAVE_UP:
                raise  # e.g. the run was cancelled: let it end as cancelled
            raise ApplicationError(
                f"The agent could not finish: {describe(failed)}",
                type="ActivityFailed",
                non_retryable=True,
            ) from e
        return result.final_output_as(str, raise_if_incorrect_type=True)


# How an activity that Temporal stopped retrying failed, in words.
GAVE_UP: dict[RetryState | None, str] = {
    RetryState.NON_RETRYABLE_FAILURE: "failed with an error that retrying cannot fix",
    RetryState.MAXIMUM_ATTEMPTS_REACHED: "kept failing until its retries ran out",
    RetryState.TIMEOUT: "timed out",
}


def describe(error: ActivityError) -> str:
    """One line a person can act on: which step failed, how, and the reason."""
    reason: BaseException = error
    while reason.__cause__ is not None:
        reason = reason.__cause__
    message = getattr(reason, "message", str(reason))
    name = error.activity_type
    if name.startswith(f"{SANDBOX_PROVIDER}-"):
        step = f"the sandbox operation {name}"
    else:
        step = "the model call"
    return f"{step} {GAVE_UP[error.retry_state]}: {message}"
