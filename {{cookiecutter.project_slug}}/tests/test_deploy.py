{%- set bound = cookiecutter | host_bound_backends -%}
{%- set backends = cookiecutter | backends -%}
"""The manifests in deploy/ name what the worker and the API read.

Every name is read from both sides: the manifests (deploy.py) and the
worker's own constants; no name is written down a second time here."""

from datetime import timedelta

import httpx2 as httpx
{% if bound -%}
import pytest
{% endif -%}
from temporalio.client import Client
from temporalio.envconfig import ClientConfig

from sandbox_agent_runtime import LIVE_PATH, READY_PATH
from sandbox_agent_runtime.testing import (
    API_VARIABLES,
    DEPLOY_BASE,
    DEPLOY_WORKER,
{%- if not bound %}
    DEPLOY_WORKER_CONTROLLER,
{%- endif %}
    SHUTDOWN_GRACE,
    WorkerSettings,
    api_settings,
    configmap_settings,
    container_port,
    create_app,
    documents,
    manifest_object,
    model_task_queue,
    pod,
    required_credentials,
{%- if bound %}
    sandbox_backends,
{%- endif %}
    secret_keys,
    settings_with,
    worker_container,
    worker_variables,
)

from {{ cookiecutter.package_name }}.runs import SANDBOX_SECRETS
from {{ cookiecutter.package_name }}.service import TASK_QUEUE

# Measured (the template's docs/capacity.md): worker memory idle, and per
# run in flight, at 1,000 runs.
IDLE_MIB = 140
PER_RUN_MIB = 1.0
# The Temporal client's own settings, which the SDK reads (temporalio.envconfig).
API_KEY = "TEMPORAL_API_KEY"


def parsed(environ: dict[str, str] | None = None) -> WorkerSettings:
    """The worker's settings with the manifests' values, or ``environ``'s
    (and the tests' credentials: support.settings_with())."""
{%- if cookiecutter.approval != "none" %}
    given = configmap_settings() if environ is None else environ
    # The ConfigMap leaves APPROVERS empty for the operator to fill in (the
    # worker refuses to start until they do): the tests' approver stands in.
    return settings_with({name: value for name, value in given.items() if name != "APPROVERS"})
{%- else %}
    return settings_with(configmap_settings() if environ is None else environ)
{%- endif %}


def mebibytes(quantity: str) -> float:
    units = {"Mi": 1, "Gi": 1024}
    return float(quantity[:-2]) * units[quantity[-2:]]


def test_the_settings_are_ones_the_worker_reads() -> None:
    read = set(worker_variables())
    client_settings = {name for name in configmap_settings() if name.startswith("TEMPORAL_")}
    assert set(configmap_settings()) - client_settings <= read
    # What the Temporal client makes of the rest: the address and the
    # namespace the manifests give.
    config = ClientConfig.load_client_connect_config(
        disable_file=True, override_env_vars=configmap_settings()
    )
    assert config["target_host"] == configmap_settings()["TEMPORAL_ADDRESS"]
    assert config.get("namespace") == configmap_settings()["TEMPORAL_NAMESPACE"]
    # Each value is one the worker accepts.
    assert parsed().health_address is not None
    assert parsed().metrics_address is not None


def test_the_secret_holds_every_credential_the_worker_needs_and_nothing_else() -> None:
    keys = secret_keys()
    # Each required credential's first spelling (an API key, where a backend
    # also takes another).
    needed = [alternatives[0] for alternatives, _ in required_credentials()]
    assert sorted(keys) == sorted({*(n for names in needed for n in names), API_KEY})
    assert set(SANDBOX_SECRETS) <= set(keys)
    # The Temporal client reads the API key (and turns TLS on with it).
    config = ClientConfig.load_client_connect_config(
        disable_file=True, override_env_vars={**configmap_settings(), API_KEY: "k"}
    )
    assert config.get("api_key") == "k"


def test_the_autoscaler_watches_this_workers_queues_namespace_and_key() -> None:
    scaled = manifest_object("ScaledObject", DEPLOY_BASE / "scaledobject.yaml")
    trigger, models = scaled["spec"]["triggers"]
    # The service's queue, and the model calls' own (model_queue.py).
    assert trigger["metadata"]["taskQueue"] == TASK_QUEUE
    assert models["metadata"]["taskQueue"] == model_task_queue()
    assert models["metadata"]["queueTypes"] == "activity"
    for each in (trigger, models):
        assert each["type"] == "temporal"
        metadata = each["metadata"]
        assert metadata["endpoint"] == configmap_settings()["TEMPORAL_ADDRESS"]
        assert metadata["namespace"] == configmap_settings()["TEMPORAL_NAMESPACE"]
        # One more worker for each half a worker's worth of steps waiting.
        assert metadata["targetQueueSize"] == str(parsed().runs_in_flight // 2)
        assert all(isinstance(value, str) for value in metadata.values())
        assert each["authenticationRef"] == trigger["authenticationRef"]
    # The worker's object, by kind (KEDA's default is a Deployment) and name.
    target = scaled["spec"]["scaleTargetRef"]
    worker = documents(DEPLOY_WORKER)[0]
    assert target.get("kind", "Deployment") == worker["kind"]
    assert target["name"] == worker["metadata"]["name"]
    auth = manifest_object("TriggerAuthentication", DEPLOY_BASE / "scaledobject.yaml")
    assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
    [ref] = auth["spec"]["secretTargetRef"]
    assert (ref["parameter"], ref["key"]) == ("apiKey", API_KEY)
    [secret] = [s for s in worker_container()["envFrom"] if "secretRef" in s]
    assert ref["name"] == secret["secretRef"]["name"]


def test_the_probes_and_the_metrics_port_are_the_ones_the_worker_serves() -> None:
    container = worker_container()
    address = parsed().health_address
    metrics = parsed().metrics_address
    assert address is not None and metrics is not None
    for probe, path in (("readinessProbe", READY_PATH), ("livenessProbe", LIVE_PATH)):
        get = container[probe]["httpGet"]
        assert get["path"] == path
        assert container_port(container, get["port"]) == address[1]
    assert container_port(container, "metrics") == metrics[1]
    annotations = pod()["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(metrics[1])


def test_a_pod_outlasts_the_workers_shutdown_grace_and_fits_its_runs() -> None:
    spec = pod()["spec"]
    assert timedelta(seconds=spec["terminationGracePeriodSeconds"]) > SHUTDOWN_GRACE
    runs = parsed().runs_in_flight
    resources = worker_container()["resources"]
    assert mebibytes(resources["requests"]["memory"]) >= IDLE_MIB + runs * PER_RUN_MIB
    assert mebibytes(resources["limits"]["memory"]) > mebibytes(resources["requests"]["memory"])
{%- if bound %}


def test_each_pod_is_a_host_that_keeps_its_name{{ "_and_its_workspaces" if "local" in backends }}(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # With the manifests' settings, a sandbox lives on the pod that made it...
    assert any(backend.host_bound(parsed()) for backend in sandbox_backends().values())
    # ...so each pod is a host, a StatefulSet's: a pod keeps its name when it
    # restarts or is replaced.
    statefulset = documents(DEPLOY_WORKER)[0]
    assert statefulset["kind"] == "StatefulSet"
    spec = statefulset["spec"]
    assert spec["podManagementPolicy"] == "Parallel"
    env = {e["name"]: e for e in worker_container()["env"]}
    # The host is the pod's name, from the downward API...
    field = env["WORKER_HOST_ID"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert field == "metadata.name"
    # ...<name>-0 to <name>-N, which the worker takes as host ids.
    scaled = manifest_object("ScaledObject", DEPLOY_BASE / "scaledobject.yaml")
    most = scaled["spec"]["maxReplicaCount"]
    for ordinal in (0, most - 1):
        pod_name = f"{statefulset['metadata']['name']}-{ordinal}"
        assert parsed({**configmap_settings(), "WORKER_HOST_ID": pod_name}).host_id == pod_name
    # The governing Service, headless.
    service = manifest_object("Service", DEPLOY_WORKER)
    assert spec["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None"
{%- if "local" in backends %}
    # A local workspace is made in TMPDIR (the runtime's test_local.py): the pod's own
    # volume, which it gets back under its name, and keeps when it is scaled
    # away.
    tmpdir = env["TMPDIR"]["value"]
    [claim] = spec["volumeClaimTemplates"]
    [mount] = [m for m in worker_container()["volumeMounts"] if m["mountPath"] == tmpdir]
    assert mount["name"] == claim["metadata"]["name"]
    assert spec["persistentVolumeClaimRetentionPolicy"]["whenScaled"] == "Retain"
{%- endif %}
{%- else %}


def test_the_worker_controller_runs_the_same_pod_on_the_same_connection() -> None:
    deployment = pod()
    managed = pod(DEPLOY_WORKER_CONTROLLER / "workerdeployment.yaml")
    assert managed == deployment
    spec = documents(DEPLOY_WORKER_CONTROLLER / "workerdeployment.yaml")[0]["spec"]
    connection = manifest_object("Connection", DEPLOY_WORKER_CONTROLLER / "connection.yaml")
    assert spec["workerOptions"]["connectionRef"]["name"] == connection["metadata"]["name"]
    assert spec["workerOptions"]["temporalNamespace"] == configmap_settings()["TEMPORAL_NAMESPACE"]
    assert connection["spec"]["hostPort"] == configmap_settings()["TEMPORAL_ADDRESS"]
    assert connection["spec"]["apiKeySecretRef"]["key"] == API_KEY
    # The controller names the Worker Deployment "<Kubernetes namespace>/<name>"
    # and a build after its image: names the worker accepts.
    name = documents(DEPLOY_WORKER_CONTROLLER / "workerdeployment.yaml")[0]["metadata"]["name"]
    environ = {
        "TEMPORAL_DEPLOYMENT_NAME": f"agents/{name}",
        "TEMPORAL_WORKER_BUILD_ID": "worker-0-1-0-5d8f9c",
    }
    assert parsed(environ).version is not None
{%- endif %}


async def test_the_api_serves_its_probes_on_the_port_its_manifest_gives(
    temporal_client: Client,
) -> None:
    deployment = manifest_object("Deployment", DEPLOY_BASE / "api.yaml")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    # The worker's settings and credentials, and its own: where it listens
    # and who may call it.
    assert container["envFrom"] == worker_container()["envFrom"]
    env = {e["name"]: e for e in container["env"]}
    assert {"API_BIND_ADDRESS", "API_TOKENS"} <= set(env) <= set(API_VARIABLES)
    # Its callers come from the Secret of api-tokens.env, whose one key it reads.
    lines = (DEPLOY_BASE / "api-tokens.example.env").read_text().splitlines()
    keys = [line.partition("=")[0] for line in lines if line and not line.startswith("#")]
    assert keys == [env["API_TOKENS"]["valueFrom"]["secretKeyRef"]["key"]] == ["API_TOKENS"]
    # With the manifests' settings (and a caller), the address it serves on.
    given = {**configmap_settings(), "API_BIND_ADDRESS": env["API_BIND_ADDRESS"]["value"]}
    parsed_api = api_settings({**given, "API_TOKENS": "me:" + "0" * 64})
    port = parsed_api.address[1]
    app = create_app(parsed_api, temporal_client)
    # Each probe's path answers, ready (Temporal answers), on the port it serves.
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://api"
    ) as http:
        for probe in ("readinessProbe", "livenessProbe"):
            get = container[probe]["httpGet"]
            assert (await http.get(get["path"])).status_code == 200, get["path"]
            assert container_port(container, get["port"]) == port
    service = manifest_object("Service", DEPLOY_BASE / "api.yaml")
    [served] = service["spec"]["ports"]
    assert container_port(container, served["targetPort"]) == port
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
