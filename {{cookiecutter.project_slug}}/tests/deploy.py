"""The Kubernetes manifests in deploy/, read as the tests need them."""

from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
BASE = DEPLOY / "k8s"
{%- if cookiecutter | host_bound_backends %}
# The worker: a StatefulSet, each pod the host of its runs' sandboxes.
WORKER = BASE / "statefulset.yaml"
{%- else %}
# The worker: a Deployment.
WORKER = BASE / "deployment.yaml"
WORKER_CONTROLLER = DEPLOY / "worker-controller"
{%- endif %}


def documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def the(kind: str, path: Path) -> dict[str, Any]:
    """The one object of ``kind`` in the file at ``path``."""
    [found] = [document for document in documents(path) if document["kind"] == kind]
    return found


def settings() -> dict[str, str]:
    """The worker's settings: the base's ConfigMap."""
    data: dict[str, str] = the("ConfigMap", BASE / "configmap.yaml")["data"]
    return data


def secret_keys() -> list[str]:
    """The keys of the Secret the base generates (secret.example.env)."""
    lines = (BASE / "secret.example.env").read_text().splitlines()
    return [line.partition("=")[0] for line in lines if line and not line.startswith("#")]


def pod(path: Path = WORKER) -> dict[str, Any]:
    """The worker's pod template, in {{ "the StatefulSet" if cookiecutter | host_bound_backends else "the Deployment or the WorkerDeployment" }}."""
    template: dict[str, Any] = documents(path)[0]["spec"]["template"]
    return template


def worker_container(path: Path = WORKER) -> dict[str, Any]:
    containers: list[dict[str, Any]] = pod(path)["spec"]["containers"]
    [container] = containers
    return container


def container_port(container: dict[str, Any], port: int | str) -> int:
    """The number of a probe's port, given by number or by name."""
    if isinstance(port, int):
        return port
    [number] = [p["containerPort"] for p in container["ports"] if p["name"] == port]
    return int(number)


def probe_paths() -> tuple[str, str]:
    """The paths of the readiness and the liveness probe."""
    container = worker_container()
    return (
        container["readinessProbe"]["httpGet"]["path"],
        container["livenessProbe"]["httpGet"]["path"],
    )
