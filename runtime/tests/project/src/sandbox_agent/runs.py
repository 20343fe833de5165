"""What every run is given and how far it may go. Yours to change.

The workflow, the worker and the starter read these values; a change
reaches every run started after the workers restart. The worker's own
settings (capacity, limits, addresses) are environment variables instead
(the runtime's reference lists them: docs/configuration.md). PRICES,
last, is what a run's tokens cost: in the usage line, for the money budget
and in the evaluations' reports.
"""

from datetime import timedelta

# Environment variables of the worker that the agent's sandbox sees. Only
# their names travel with a run; the worker reads each value when the sandbox
# needs it, so no value is ever recorded in workflow history. Every worker
# must have them set.
SANDBOX_SECRETS: tuple[str, ...] = ()

# The most model turns one prompt may take (the first, and each follow-up
# of a conversation, has its own budget), across every run of its chain; a
# prompt that needs more fails the run.
MAX_TURNS = 20

# The most tokens (input and output) and the most USD (its tokens at PRICES,
# its sandbox's time, its Temporal actions: docs/configuration.md) one prompt
# may use across every run of its chain; None: no limit. Each prompt (the
# first, and each follow-up) has its own, checked before each model call, so
# the call that reaches it may pass it by that call's tokens. A prompt that
# reaches it stops, its answer saying so, its workspace kept: a follow-up
# goes on with a fresh budget (the starter's --token-budget and --cost-budget,
# and the API's fields, give one prompt a lower one). A money budget needs agent.MODEL in PRICES: the
# worker refuses to start without it.
TOKEN_BUDGET: int | None = None
COST_BUDGET_USD: float | None = None

# The longest a whole run without follow-ups may take before Temporal fails
# it as timed out (RunRequest.follow_ups false, as API callers start them).
# It is the backstop for whatever the turn budget and the retry policies do
# not catch, so no run waits for ever. It must leave room for MAX_TURNS model
# calls and commands, with their retries. A conversation (every run the
# starter starts) has no execution timeout: it waits for follow-ups and ends
# itself after the worker's SESSION_LIFETIME without one.
WORKFLOW_EXECUTION_TIMEOUT = timedelta(seconds=3600)

# Each sandbox operation is one activity with this start-to-close timeout:
# creating the session, starting a command, each poll of a running command
# (at most 30 s each), one file read or write, the teardown. A command
# longer than that is polled again, not cut: its own limit is the worker's
# SANDBOX_COMMAND_TIME_LIMIT_SECONDS (600 s unless set).
SANDBOX_ACTIVITY_TIMEOUT = timedelta(seconds=300)

# What a run's tokens cost (the starter's usage line, COST_BUDGET_USD, and the
# evaluations: sandbox-agent-eval, docs/evaluations.md), per model: USD
# per million input, cached input and output tokens,
# as the provider's price page lists them. These are OpenAI's standard prices
# as https://openai.com/api/pricing/ listed them in August 2025: prices
# change, so check them there, and add the model agent.py uses (MODEL) with
# its own. A model without an entry gets no cost ("cost n/a"; in the
# report "n/a", null in report.json), never a guessed one.
PRICES: dict[str, dict[str, float]] = {
    "gpt-5": {"input": 1.25, "cached_input": 0.125, "output": 10.00},
    "gpt-5-mini": {"input": 0.25, "cached_input": 0.025, "output": 2.00},
    "gpt-4.1": {"input": 2.00, "cached_input": 0.50, "output": 8.00},
}
