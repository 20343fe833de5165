"""Budgets and cost: a prompt that reaches its budget (tokens, or USD at its
model's price) stops, its answer saying why, its workspace kept, and the
conversation goes on with a follow-up that has a budget of its own; what a
run used is shown with its cost, in the usage line, the run's memo and the
worker's metrics; a bad budget is refused in one line.

The service's and the starter's processes are real (``process``): the
starter exits 1 at a budget and prints why. The money budget needs a model
with a price: the default stand-in's model has none (as a default render's),
so it runs on a worker here, with an agent of a priced model."""

import asyncio
import dataclasses
import re
import subprocess
import sys
import urllib.request
from typing import Any

import pytest
from agents import ModelResponse, Usage
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from prometheus_client.parser import text_string_to_metric_families
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory

from sandbox_agent_runtime.backends import variable
from sandbox_agent_runtime.capacity import PooledOpenAIProvider
from sandbox_agent_runtime.model_api import MOST_TOKENS, within_bounds
from sandbox_agent_runtime.observability import (
    ACTIONS_COST,
    BUDGETS_REACHED,
    MODEL_COST,
    SANDBOX_COST,
    SANDBOX_SECONDS,
    TEMPORAL_ACTIONS,
    TOKENS_ONLY,
)
from sandbox_agent_runtime.run_request import RunRequest
from sandbox_agent_runtime.service import Budget, Service, budgets_given, cost_of, usd
from sandbox_agent_runtime.shared import USAGE_MEMO
from sandbox_agent_runtime.starter import EXIT_USAGE, start, usage_line
from sandbox_agent_runtime.testing import project, project_service
from sandbox_agent_runtime.testing.long_workflow import LongSandboxAgentWorkflow, start_long
from sandbox_agent_runtime.testing.processes import STARTER, WORKER, service, service_environment
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import (
    Metrics,
    metered_client,
    running_worker,
    runs_of_chain,
    settings_with,
)
from sandbox_agent_runtime.testing.workspace_agents import PRICED_MODEL, PricedAgentWorkflow

# About 60 kB of output a step: a run's history passes the budget in a dozen.
BIG_STEP = "head -c 60000 /dev/zero | tr '\\0' x"
USAGE_LINE = re.compile(
    r"Usage: [\d,]+ model calls?, [\d,]+ input tokens( \([\d,]+ cached\))?, [\d,]+ output "
    r"tokens, (\$\d+\.\d+|cost n/a); sandbox [\d,.]+ s, \$\d+\.\d+; [\d,]+ Temporal actions?, "
    r"\$\d+\.\d+; total (\$\d+\.\d+|n/a)"
)


async def served(metrics: Metrics, sample: str) -> float:
    """The sum of the samples named ``sample`` the worker's /metrics serves
    (a histogram's ``_sum``, say)."""
    text = await asyncio.to_thread(lambda: urllib.request.urlopen(metrics.url).read().decode())
    return sum(
        each.value
        for family in text_string_to_metric_families(text)
        for each in family.samples
        if each.name == sample
    )


def started_id(output: list[str]) -> str:
    [line] = [line for line in output if line.startswith("Started workflow ")]
    return line.removeprefix("Started workflow ")


@pytest.mark.process
async def test_a_token_budget_stops_the_prompt_its_workspace_kept_for_a_follow_up_with_its_own(
    temporal_client: Client,
) -> None:
    # The first prompt writes a file and would go on; its budget lets it make
    # one model call. The follow-up, with a budget of its own, reads the file.
    first = ["echo kept-at-the-budget > note.txt", "echo never-run"]
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server([], prompts=[first, ["cat note.txt"]]) as model:
        environment = service_environment(address, model.url)
        async with service(WORKER, environment) as worker:
            await worker.wait_for("Worker polling")
            asking = [*STARTER, "--token-budget", "1", "Write a note, then more."]
            async with service(asking, environment) as stopped:
                stopped_status = await stopped.exit_status()
            workflow_id = started_id(stopped.output)
            going_on = [*STARTER, "--continue", workflow_id, "--token-budget", "100000", "Read it."]
            async with service(going_on, environment) as followed:
                followed_status = await followed.exit_status()

    # The first call was allowed (nothing used yet); the second was not.
    assert stopped_status == 1, stopped.output
    first_call = sum(model.reported[0])
    [why] = [line for line in stopped.output if line.startswith("Stopped: ")]
    assert why == (
        f"Stopped: token budget reached: {first_call:,} of 1 tokens (the prompt's own token budget)"
    )
    assert "echo never-run" not in "\n".join(stopped.output)
    # The usage line follows, with no price for this model.
    assert USAGE_LINE.fullmatch(stopped.output[-1]) and stopped.output[-1].endswith("total n/a")
    assert "output tokens, cost n/a; " in stopped.output[-1]
    # The follow-up goes on in the same workspace, with its own budget.
    assert followed_status == 0, followed.output
    assert "prompt 2: kept-at-the-budget" in "\n".join(followed.output)
    assert not [line for line in followed.output if line.startswith("Stopped: ")]


@pytest.mark.process
async def test_a_money_budget_for_a_model_without_a_price_is_refused_in_one_line(
    temporal_client: Client,
) -> None:
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server([], prompts=[["echo one"], ["echo two"]]) as model:
        environment = service_environment(address, model.url)
        async with service(WORKER, environment) as worker:
            await worker.wait_for("Worker polling")
            async with service([*STARTER, "Say one."], environment) as asking:
                assert await asking.exit_status() == 0, asking.output
            workflow_id = started_id(asking.output)
            priced = [*STARTER, "--continue", workflow_id, "--cost-budget", "0.5", "Say two."]
            async with service(priced, environment) as refused:
                refused_status = await refused.exit_status()

    model_name = project().model
    assert refused_status == 4, refused.output
    [line] = [line for line in refused.output if line.startswith("ERROR: ")]
    assert (
        f"cost_budget_usd 0.5 cannot be kept: the service has no price for its model "
        f"{model_name!r} (PRICES in runs.py); give a token_budget instead" in line
    ), line


@pytest.mark.process
@pytest.mark.parametrize(
    ("arguments", "refusal"),
    [
        (
            ["--token-budget", "0"],
            "--token-budget 0 is not allowed: use a whole number of tokens, 1 or more",
        ),
        (
            ["--token-budget", "1.5"],
            "--token-budget '1.5' is not allowed: use a whole number of tokens, 1 or more",
        ),
        (
            ["--cost-budget", "free"],
            "--cost-budget 'free' is not allowed: use an amount in USD over 0 (0.5 for 50 cents)",
        ),
        (
            ["--cost-budget", "-1"],
            "--cost-budget -1.0 is not allowed: use an amount in USD over 0 (0.5 for 50 cents)",
        ),
        (
            ["--cost-budget", "nan"],
            "--cost-budget nan is not allowed: use an amount in USD over 0 (0.5 for 50 cents)",
        ),
        (
            ["--attach", "some-run", "--token-budget", "10"],
            "--token-budget and --cost-budget go with a prompt: a new run or --continue",
        ),
    ],
)
def test_a_bad_budget_on_the_starters_command_line_is_refused_in_one_line(
    arguments: list[str], refusal: str
) -> None:
    done = subprocess.run([*STARTER, *arguments], capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_USAGE, done.stderr
    assert done.stderr.splitlines()[-1].endswith(f"error: {refusal}"), done.stderr


def test_a_bad_budget_of_the_service_and_a_money_budget_without_a_price_are_one_line() -> None:
    service = project_service()
    with pytest.raises(ValueError) as bad:
        Service(service.name, service.task_queue, service.providers, token_budget=0)
    assert str(bad.value) == (
        "TOKEN_BUDGET (runs.py) 0 is not allowed: use a whole number of tokens, 1 or more"
    )
    with pytest.raises(ValueError) as bad:
        Service(service.name, service.task_queue, service.providers, cost_budget_usd=0.0)
    assert str(bad.value) == (
        "COST_BUDGET_USD (runs.py) 0.0 is not allowed: use an amount in USD over 0 "
        "(0.5 for 50 cents)"
    )
    priced = Service(service.name, service.task_queue, service.providers, cost_budget_usd=1.0)
    assert priced.unpriced("gpt-x") == (
        "COST_BUDGET_USD is set (runs.py), but PRICES has no price for the agent's model "
        "'gpt-x': add the model's prices to PRICES, or set COST_BUDGET_USD = None"
    )
    assert service.unpriced("gpt-x") is None  # no money budget: no price needed


def test_a_prompts_own_budget_over_the_services_is_refused_in_one_line() -> None:
    # The service's budget bounds every prompt: a caller (the API's, the
    # starter's, or a run started straight on Temporal) may lower it, never
    # raise it.
    service = Budget(tokens=1_000, cost_usd=0.5)
    names = ("field 'token_budget'", "field 'cost_budget_usd'")
    with pytest.raises(ValueError) as over:
        budgets_given(1_001, None, names, service)
    assert str(over.value) == (
        "field 'token_budget' 1,001 is over the service's 1,000 (TOKEN_BUDGET in runs.py): "
        "a prompt's own budget may only be lower"
    )
    with pytest.raises(ValueError) as over:
        budgets_given(None, "0.75", ("--token-budget", "--cost-budget"), service)
    assert str(over.value) == (
        "--cost-budget $0.7500 is over the service's $0.5000 (COST_BUDGET_USD in runs.py): "
        "a prompt's own budget may only be lower"
    )
    assert budgets_given("999", 0.25, names, service) == (999, 0.25)
    # No budget of the service's: any.
    assert budgets_given(10**12, None, names, Budget()) == (10**12, None)
    # The workflow refuses it too (a request that did not come through either).
    # What the workflow is given, from an instance no run initialised.
    workflow: Any = object.__new__(project().workflow)
    given = dataclasses.replace(workflow._given(), budget=service)
    assert "is over the service's 1,000" in str(given.budget_refusal(5_000, None))
    assert given.budget_refusal(500, None) is None


# The worker of the stand-in, its runs.py given a money budget (as a team
# would set COST_BUDGET_USD) before its package reads it.
WORKER_WITH_A_MONEY_BUDGET = """
import importlib.util, sys
package, runs_py = sys.argv[1], sys.argv[2]
del sys.argv[1:]
spec = importlib.util.spec_from_file_location(package + ".runs", runs_py)
runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(runs)
runs.COST_BUDGET_USD = 1.0
sys.modules[package + ".runs"] = runs
importlib.import_module(package + ".worker").cli()
"""


@pytest.mark.process
def test_a_worker_with_a_money_budget_for_a_model_without_a_price_refuses_to_start() -> None:
    package = project().package
    runs_py = project().root / "src" / package / "runs.py"
    # Every setting and credential good: the price is what it refuses.
    environment = service_environment("127.0.0.1:1", "http://127.0.0.1:9")
    command = [sys.executable, "-c", WORKER_WITH_A_MONEY_BUDGET, package, str(runs_py)]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"COST_BUDGET_USD is set (runs.py), but PRICES has no price for the agent's model "
        f"{project().model!r}: add the model's prices to PRICES, or set COST_BUDGET_USD = None"
    ]


class CachesHalf(ScriptedModel):
    """The scripted model, reporting half of each call's input as read from
    the model's cache (charged at the cached price)."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        response = await super().get_response(*args, **kwargs)
        cached = response.usage.input_tokens // 2
        details = InputTokensDetails(cached_tokens=cached, cache_write_tokens=0)
        response.usage.input_tokens_details = details
        return response


async def test_a_money_budget_stops_the_prompt_and_the_cost_shows_in_memo_line_and_metrics(
    temporal_client: Client,
) -> None:
    model = CachesHalf(["echo one", "echo two", "echo three"])
    price = project_service().prices[PRICED_MODEL]
    async with (
        metered_client(temporal_client) as (client, metrics),
        running_worker(client, model, workflows=[PricedAgentWorkflow]) as (plugged, _),
    ):
        # A budget the first call's tokens reach: it stops before the second.
        first_cost = 0.0001
        handle = await start(plugged, RunRequest("Count.", cost_budget_usd=first_cost))
        answer = await handle.result()
        description = await handle.describe()
        usage = (await description.memo())[USAGE_MEMO]
        line = await usage_line(plugged, handle.id)
        stopped = await metrics.total(BUDGETS_REACHED, kind="cost")
        cost_total = await served(metrics, f"{MODEL_COST}_sum")

    [call] = model.reported
    cached = call.input_tokens_details.cached_tokens
    prices = {PRICED_MODEL: price}
    cost = cost_of(PRICED_MODEL, call.input_tokens, cached, call.output_tokens, prices)
    assert cost is not None and cost >= first_cost and cached > 0
    assert (
        answer.stopped
        == answer.answer
        == (f"stopped: cost budget reached: ${cost:.4f} of $0.0001 (the prompt's own cost budget)")
    )
    tokens = {key: usage[key] for key in TOKENS_ONLY}
    assert tokens == {
        "model_calls": 1,
        "input_tokens": call.input_tokens,
        "output_tokens": call.output_tokens,
        "cached_input_tokens": cached,
        "cost_usd": pytest.approx(cost),
    }
    # A local sandbox and a self-hosted server cost nothing by default.
    assert usage["sandbox_usd"] == usage["actions_usd"] == 0.0
    assert usage["total_usd"] == pytest.approx(cost)
    assert line.startswith(
        f"Usage: 1 model call, {call.input_tokens:,} input tokens ({cached:,} cached), "
        f"{call.output_tokens:,} output tokens, ${cost:.4f}; sandbox "
    )
    assert line.endswith(f", $0.0000; total ${cost:.4f}")
    assert stopped == 1
    assert cost_total == pytest.approx(cost)


# The events of a run's history that Temporal Cloud bills as actions, and
# markers that are not (a patch's).
BILLED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
    EventType.EVENT_TYPE_TIMER_STARTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
    EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
    EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
}


def billed(history: WorkflowHistory) -> int:
    """The actions ``history`` holds: its billed events, and each local
    activity's marker."""
    return sum(
        event.event_type in BILLED
        or (
            event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
            and event.marker_recorded_event_attributes.marker_name == "core_local_activity"
        )
        for event in history.events
    )


# The sandbox at $36,000 an hour ($10 a second), an action at a millionth of
# a dollar: a money budget of a cent is passed by the sandbox's time alone.
EXPENSIVE = {
    variable(project_service().providers[project_service().sandbox_provider], "usd_per_hour"): (
        "36000"
    ),
    "TEMPORAL_USD_PER_MILLION_ACTIONS": "1",
}


async def test_a_money_budget_counts_the_sandboxs_time_and_the_actions_and_shows_each_part(
    temporal_client: Client,
) -> None:
    model = ScriptedModel(["echo one", "echo never-run"])
    async with (
        metered_client(temporal_client) as (client, metrics),
        running_worker(
            client, model, workflows=[PricedAgentWorkflow], settings=settings_with(EXPENSIVE)
        ) as (plugged, _),
    ):
        handle = await start(plugged, RunRequest("Count.", cost_budget_usd=0.01))
        answer = await handle.result()
        usage = (await (await handle.describe()).memo())[USAGE_MEMO]
        history = await handle.fetch_history()
        line = await usage_line(plugged, handle.id)
        served_parts = [
            await served(metrics, f"{SANDBOX_SECONDS}_sum"),
            await served(metrics, f"{SANDBOX_COST}_sum"),
            await metrics.total(TEMPORAL_ACTIONS),
            await served(metrics, f"{ACTIONS_COST}_sum"),
        ]
        stopped = await metrics.total(BUDGETS_REACHED, kind="cost")

    # The workspace is prepared before the first model call: by then the
    # sandbox's time alone has passed the budget, and no call is made.
    assert model.reported == [] and usage["model_calls"] == 0 and usage["cost_usd"] is None
    assert usage["sandbox_usd"] >= 0.01
    assert usage["sandbox_usd"] == pytest.approx(usage["sandbox_seconds"] * 10)
    # Its actions are what its history holds that Temporal Cloud bills: its
    # start, each activity and local activity (the sandbox's operations).
    assert usage["actions"] == billed(history) >= 3
    assert usage["actions_usd"] == pytest.approx(usage["actions"] / 1_000_000)
    total = usage["sandbox_usd"] + usage["actions_usd"]
    assert usage["total_usd"] == pytest.approx(total)
    reason = re.fullmatch(
        r"stopped: cost budget reached: \$([\d.]+) of \$0\.0100 \(the prompt's own cost budget\)",
        str(answer.stopped),
    )
    assert reason is not None, answer.stopped
    assert 0.01 <= float(reason[1]) <= total + 0.005
    assert stopped == 1
    # Each part in the usage line, and in the worker's metrics.
    assert line == (
        "Usage: 0 model calls, 0 input tokens, 0 output tokens, cost n/a; "
        f"sandbox {usage['sandbox_seconds']:,.1f} s, {usd(usage['sandbox_usd'])}; "
        f"{usage['actions']:,} Temporal actions, {usd(usage['actions_usd'])}; total {usd(total)}"
    )
    assert served_parts == [
        pytest.approx(usage["sandbox_seconds"]),
        pytest.approx(usage["sandbox_usd"]),
        usage["actions"],
        pytest.approx(usage["actions_usd"]),
    ]


async def test_negative_usage_from_the_endpoint_counts_as_none_and_the_budget_holds(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # The worker's own model client, against an HTTP endpoint that says
    # each call gave back a million input tokens: -$0.25 at the model's price.
    price = project_service().prices[PRICED_MODEL]
    with scripted_openai_server(["echo one", "echo never-run"]) as endpoint:
        endpoint.usage = (-1_000_000, 5_000)
        monkeypatch.setenv("OPENAI_BASE_URL", endpoint.url)
        monkeypatch.setenv("OPENAI_API_KEY", "dummy")
        model = PooledOpenAIProvider(1).get_model(PRICED_MODEL)
        async with running_worker(temporal_client, model, workflows=[PricedAgentWorkflow]) as (
            client,
            _,
        ):
            handle = await start(client, RunRequest("Count.", cost_budget_usd=0.005))
            answer = await handle.result()
            usage = (await (await handle.describe()).memo())[USAGE_MEMO]

    # Counted as no input: the output alone reaches the budget, and the
    # second call is never made.
    cost = cost_of(PRICED_MODEL, 0, 0, 5_000, {PRICED_MODEL: price})
    assert cost is not None and cost >= 0.005
    assert answer.stopped == (
        f"stopped: cost budget reached: ${cost:.4f} of $0.0050 (the prompt's own cost budget)"
    )
    assert endpoint.requests == 1
    assert {key: usage[key] for key in TOKENS_ONLY} == {
        "model_calls": 1,
        "input_tokens": 0,
        "output_tokens": 5_000,
        "cached_input_tokens": 0,
        "cost_usd": pytest.approx(cost),
    }
    said = [line for line in capfd.readouterr().err.splitlines() if "reported usage" in line]
    assert said == [
        f"The model endpoint reported usage no model call has for run {handle.id}: counted "
        "input_tokens -1000000 as 0 (each count from 0 to 10,000,000 tokens)."
    ]


def test_usage_out_of_bounds_is_counted_within_them() -> None:
    usage = Usage(
        requests=1,
        input_tokens=100,
        input_tokens_details=InputTokensDetails(cached_tokens=500, cache_write_tokens=0),
        output_tokens=10**15,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=-3),
        total_tokens=10**15 + 100,
    )
    assert within_bounds(usage) == [
        f"output_tokens {10**15!r} as {MOST_TOKENS:,}",
        "cached_tokens 500 as 100",
        "reasoning_tokens -3 as 0",
    ]
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (
        100,
        MOST_TOKENS,
        MOST_TOKENS + 100,
    )
    assert usage.input_tokens_details.cached_tokens == 100
    # Within bounds already: nothing changed, nothing said.
    assert within_bounds(usage) == []


@pytest.mark.long  # two chains of runs
async def test_a_prompts_budget_holds_across_the_runs_of_its_chain(temporal_client: Client) -> None:
    model = ScriptedModel([BIG_STEP] * 14 + ["echo chained"])
    async with running_worker(temporal_client, model, workflows=[LongSandboxAgentWorkflow]) as (
        client,
        _,
    ):
        # Without a budget the prompt takes 16 calls (15 commands and the
        # answer), over several runs.
        await (await start_long(client, "Work a while.")).result()
        unbounded = list(model.reported)
        # With a budget its first 13 calls reach, the 14th is never made,
        # though the chain continued as new before it.
        budget = sum(call.input_tokens + call.output_tokens for call in unbounded[:13])
        handle = await start_long(client, "Work a while.", token_budget=budget)
        answer = await handle.result()
        assert handle.first_execution_run_id is not None
        runs = await runs_of_chain(client, handle.id, handle.first_execution_run_id)

    assert len(unbounded) == 16
    assert len(runs) > 1
    assert len(model.reported) - len(unbounded) == 13
    assert answer.stopped == (
        f"stopped: token budget reached: {budget:,} of {budget:,} tokens "
        "(the prompt's own token budget)"
    )
