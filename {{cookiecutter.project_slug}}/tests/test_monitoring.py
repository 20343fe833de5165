{%- set bound = cookiecutter | host_bound_backends -%}
{%- set approvals = cookiecutter.approval != "none" -%}
"""The dashboard and the alerts of deploy/monitoring/ hold what the worker
serves, and the alerts fire when they should (``uv run pytest -m monitoring``).

- ``promtool check rules`` and ``promtool test rules`` (series in, alerts
  out, every alert firing and not) on alerts.yaml; the PrometheusRule of
  deploy/k8s/monitoring holds the same rules.
- Every metric the dashboard and the rules name, with every label they
  group or filter by, is one a real worker serves after real runs: one
  completed, one failed, a model call failing once, a workflow task failing,
  a conversation, a tool call, a priced model's prompt stopped at its budget
{%- if bound and approvals %}; a host gone and approvals, too slow to
  cause here, by the names the code declares.
{%- elif bound %}; a host gone, too slow to cause here, by the
  names the code declares.
{%- elif approvals %}; approvals, too slow to cause here, by the
  names the code declares.
{%- else %}.
{%- endif %}
- A real Prometheus (Debian's ``prometheus``) scrapes a real worker process on
  loopback while a run fails: AgentRunsFailing becomes pending, read from
  Prometheus's own API; every panel's query runs there without error.

``promtool`` and ``prometheus`` come from Debian's ``prometheus`` package
(the generated CI installs it); without them those tests skip, saying so.
"""

import asyncio
import json
import re
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.client import Client, WorkflowFailureError

from sandbox_agent_runtime import END, RunRequest, start
from sandbox_agent_runtime.testing import (
{%- if approvals %}
    APPROVAL_WAIT,
    APPROVALS,
{%- endif %}
{%- if bound %}
    HOSTS_GONE,
{%- endif %}
    SANDBOXES_REAPED,
    STARTER,
    WORKER,
    BudgetedSandboxAgentWorkflow,
    BuggyWorkflow,
    Call,
    PricedAgentWorkflow,
    ScriptedModel,
    answered,
    conversation,
    free_address,
    metered_client,
    running_worker,
    scripted_openai_server,
    service,
    service_environment,
)

from {{ cookiecutter.package_name }}.service import TASK_QUEUE

pytestmark = pytest.mark.monitoring

PROJECT = Path(__file__).resolve().parents[1]
MONITORING = PROJECT / "deploy" / "monitoring"
RULES = MONITORING / "alerts.yaml"
DASHBOARD = MONITORING / "dashboard.json"
PROMETHEUS_RULE = PROJECT / "deploy" / "k8s" / "monitoring" / "prometheusrule.yaml"

NO_PROMETHEUS = "no promtool and prometheus here: apt-get install prometheus (Debian's package)"

# The labels the SDK gives every metric a workflow counts.
WORKFLOW_LABELS = {"namespace", "task_queue", "workflow_type", "service_name"}
# The service's metrics a test cannot cheaply cause, by the labels the code
# gives them (observability.py): the reaper's, an activity's (test_reaper.py
# in the runtime's tests proves it served).
DECLARED: dict[str, set[str]] = {
    SANDBOXES_REAPED: {"provider", "namespace", "task_queue", "activity_type", "service_name"},
{%- if bound %}
    HOSTS_GONE: {"host", "outcome", *WORKFLOW_LABELS},
{%- endif %}
{%- if approvals %}
    APPROVALS: {"decision", *WORKFLOW_LABELS},
    f"{APPROVAL_WAIT}_bucket": {"decision", "le", *WORKFLOW_LABELS},
{%- endif %}
}
# Labels every metric gets from Prometheus's scrape (the target's).
SCRAPE_LABELS = {"job", "instance"}


def rules_groups(path: Path) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = yaml.safe_load(path.read_text())["groups"]
    return groups


def queries() -> list[str]:
    """Every PromQL expression of the rules and the dashboard's panels."""
    expressions = [rule["expr"] for group in rules_groups(RULES) for rule in group["rules"]]
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        expressions += [target["expr"] for target in panel.get("targets", [])]
    return expressions


# A metric name with its selector, and the labels grouped by.
SELECTOR = re.compile(r"\b([a-z_][a-z0-9_]*)\s*(\{[^}]*\})?")
BY = re.compile(r"\bby\s*\(([^)]*)\)")
MATCHER = re.compile(r"([a-z_][a-z0-9_]*)\s*(=~|!~|!=|=)")
FUNCTIONS = {
    "sum",
    "by",
    "rate",
    "increase",
    "histogram_quantile",
    "or",
    "unless",
    "offset",
    "vector",
    "up",
    "and",
    "on",
    "le",
    "inf",
}


def named(expression: str) -> dict[str, set[str]]:
    """The metrics ``expression`` names (but ``up``), each with the labels it
    filters them by; and under "" the labels it groups by."""
    found: dict[str, set[str]] = {"": set()}
    text = re.sub(r'"[^"]*"', '""', expression)
    for group in BY.findall(text):
        found[""].update(label.strip() for label in group.split(",") if label.strip())
    for name, selector in SELECTOR.findall(text):
        if name in FUNCTIONS or not name.startswith(("agent_", "temporal_")):
            continue
        found.setdefault(name, set()).update(label for label, _ in MATCHER.findall(selector or ""))
    return found


def test_the_dashboard_is_grafana_json_with_a_data_source_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert {"job", "namespace"} <= set(variables)
    panels = [panel for panel in dashboard["panels"] if panel["type"] != "row"]
    assert panels and all(
        target["datasource"]["uid"] == "${datasource}"
        for panel in panels
        for target in panel["targets"]
    )
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels:
        for target in panel["targets"]:
            assert 'job=~"$job"' in target["expr"] and 'namespace=~"$namespace"' in target["expr"]


def test_the_prometheus_rule_holds_the_rules_of_alerts_yaml() -> None:
    rule = yaml.safe_load(PROMETHEUS_RULE.read_text())
    assert rule["kind"] == "PrometheusRule"
    assert rule["spec"]["groups"] == rules_groups(RULES)


def test_every_alert_has_a_runbook_section_in_the_operations_guide() -> None:
    guide = (PROJECT / "docs" / "operations.md").read_text()
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", guide, re.MULTILINE)
    }
    for group in rules_groups(RULES):
        for rule in group["rules"]:
            runbook = rule["annotations"]["runbook"]
            assert runbook.startswith("docs/operations.md#"), rule["alert"]
            assert runbook.partition("#")[2] in anchors, (rule["alert"], runbook)


@pytest.mark.skipif(shutil.which("promtool") is None, reason=NO_PROMETHEUS)
def test_the_rules_pass_promtool_and_their_unit_tests() -> None:
    checked = subprocess.run(
        ["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        ["promtool", "test", "rules", "alerts.test.yaml"],
        cwd=MONITORING,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    # Every alert is tested.
    tests = yaml.safe_load((MONITORING / "alerts.test.yaml").read_text())["tests"]
    tested_alerts = {case["alertname"] for test in tests for case in test["alert_rule_test"]}
    alerts = {rule["alert"] for group in rules_groups(RULES) for rule in group["rules"]}
    assert tested_alerts == alerts


class FailsOnce(ScriptedModel):
    """A model whose first call fails (the activity retries it)."""

    failed = False

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        if not self.failed:
            self.failed = True
            raise RuntimeError("the model failed once")
        return await super().get_response(*args, **kwargs)


async def test_every_metric_and_label_the_dashboard_and_rules_name_is_served(
    temporal_client: Client,
) -> None:
    served: dict[str, set[str]] = {}
    async with metered_client(temporal_client) as (client, metrics):
        model = FailsOnce(["echo done", Call("current_time", '{"zone": "UTC"}')])
        async with running_worker(client, model) as (plugged, _):
            await (await start(plugged, RunRequest("Say done."))).result()
            chat = await conversation(plugged, "Say done.")
            await answered(chat, 1)
            await chat.execute_update(END)
            await chat.result()
        endless = ScriptedModel(["echo again"] * 100)
        async with running_worker(client, endless, workflows=[BudgetedSandboxAgentWorkflow]) as (
            plugged,
            _,
        ):
            failing = await plugged.start_workflow(
                BudgetedSandboxAgentWorkflow.run,
                RunRequest("Never stop."),
                id="monitoring-fails",
                task_queue=TASK_QUEUE,
            )
            with pytest.raises(WorkflowFailureError):
                await failing.result()
        async with running_worker(
            client, ScriptedModel(["echo a", "echo b"]), workflows=[BuggyWorkflow]
        ) as (
            plugged,
            _,
        ):
            buggy = await plugged.start_workflow(
                BuggyWorkflow.run,
                RunRequest("Two steps."),
                id="monitoring-bug",
                task_queue=TASK_QUEUE,
            )
            for _ in range(100):
                if (await metrics.total("temporal_workflow_task_execution_failed")) > 0:
                    break
                await asyncio.sleep(0.1)
            await buggy.terminate("seen")
        # A model with a price: a prompt that pays for its model calls, and
        # one its cost budget stops (on a backend with a rate, by its
        # sandbox's time before any model call).
        priced = ScriptedModel(["echo a", "echo b"])
        async with running_worker(client, priced, workflows=[PricedAgentWorkflow]) as (plugged, _):
            paid = await start(plugged, RunRequest("Two steps."))
            assert not (await paid.result()).stopped
            stopped = await start(plugged, RunRequest("Two steps.", cost_budget_usd=0.000001))
            assert (await stopped.result()).stopped
        for name, samples in (await metrics.scrape()).items():
            for sample_labels, _ in samples:
                served.setdefault(name, set()).update(sample_labels)
    # The parser names a counter's samples without _total, a histogram's family without
    # _bucket and _sum.
    served |= {f"{name}_sum": set(labels) for name, labels in served.items()}
    served |= {f"{name}_bucket": labels | {"le"} for name, labels in served.items()}
    served |= DECLARED
    for expression in queries():
        found = named(expression)
        grouped = found.pop("")
        for name, labels in found.items():
            assert name in served, f"{name} is not served: {expression}"
            assert labels - SCRAPE_LABELS <= served[name], (name, labels - served[name])
        assert grouped - SCRAPE_LABELS <= set().union(*(served[name] for name in found)), (
            expression,
            grouped,
        )


def prometheus_api(address: str, path: str, **params: str) -> Any:
    url = f"http://{address}/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as e:
        return json.loads(e.read())


@pytest.mark.skipif(shutil.which("prometheus") is None, reason=NO_PROMETHEUS)
async def test_a_real_prometheus_sees_runs_fail_and_answers_every_panel(
    temporal_client: Client, tmp_path: Path
) -> None:
    metrics, web = free_address(), free_address()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {
                "job_name": "{{ cookiecutter.project_slug }}",
                "static_configs": [{"targets": [metrics]}],
            },
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    prometheus = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address={web}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    address = temporal_client.service_client.config.target_host
    try:
        with scripted_openai_server(["echo done"]) as model:
            environment = {
                **service_environment(address, model.url),
                "PROMETHEUS_BIND_ADDRESS": metrics,
                "TEMPORAL_NAMESPACE": temporal_client.namespace,
            }
            async with service(WORKER, environment) as worker:
                await worker.wait_for("Worker polling")
                # Prometheus has the worker's runs at 0 before any ends.
                for _ in range(300):
                    found = prometheus_api(web, "query", query='agent_runs{outcome="failed"}')
                    if found.get("data", {}).get("result"):
                        break
                    await asyncio.sleep(0.1)
                assert found["data"]["result"], found
                # The model refuses the key: the run fails.
                model.error_status = 401
                async with service([*STARTER, "Say done."], environment) as starter:
                    assert await starter.exit_status() == 1, starter.output
                # The failure is counted in the series that was at 0, so its
                # increase is 1: a worker's first failure is seen.
                for _ in range(300):
                    found = prometheus_api(web, "query", query='agent_runs{outcome="failed"}')
                    if any(r["value"][1] != "0" for r in found["data"]["result"]):
                        break
                    await asyncio.sleep(0.1)
                assert [r["value"][1] for r in found["data"]["result"]] == ["1"], found
                # Rules are evaluated every second: the alert is pending at once.
                state = None
                for _ in range(25):
                    alerts = prometheus_api(web, "alerts")["data"]["alerts"]
                    states = {
                        a["state"] for a in alerts if a["labels"]["alertname"] == "AgentRunsFailing"
                    }
                    if states & {"pending", "firing"}:
                        state = states
                        break
                    await asyncio.sleep(0.2)
                assert state, prometheus_api(web, "rules")
                # Every panel's query runs (the dashboard's variables: all).
                dashboard = json.loads(DASHBOARD.read_text())
                for panel in dashboard["panels"]:
                    for target in panel.get("targets", []):
                        expression = (
                            target["expr"]
                            .replace("$__rate_interval", "1m")
                            .replace("$job", ".*")
                            .replace("$namespace", ".*")
                        )
                        answer = prometheus_api(web, "query", query=expression)
                        assert answer["status"] == "success", (panel["title"], answer)
    finally:
        prometheus.terminate()
        prometheus.wait(timeout=30)
