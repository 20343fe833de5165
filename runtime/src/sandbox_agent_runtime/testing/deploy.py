"""The Kubernetes manifests in the project's deploy/, read as the tests need
them. ``DEPLOY``, ``BASE``, ``WORKER`` and ``WORKER_CONTROLLER`` are the
registered project's (``Project.root``), computed at their first use."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from sandbox_agent_runtime.testing.registration import project, project_service


def _deploy() -> Path:
    return project().root / "deploy"


def _base() -> Path:
    return _deploy() / "k8s"


def _worker() -> Path:
    """The worker's manifest: a StatefulSet, each pod the host of its runs'
    sandboxes, for a service whose sandboxes may live on a worker's host
    (``Service.host_bound``); a Deployment otherwise."""
    return _base() / ("statefulset.yaml" if project_service().host_bound else "deployment.yaml")


def _worker_controller() -> Path:
    """The worker controller's manifests (a service whose sandboxes are not
    bound to a host: its project alone has them)."""
    return _deploy() / "worker-controller"


_LAZY: dict[str, Callable[[], Path]] = {
    "DEPLOY": _deploy,
    "BASE": _base,
    "WORKER": _worker,
    "WORKER_CONTROLLER": _worker_controller,
}

if TYPE_CHECKING:
    DEPLOY: Path
    BASE: Path
    WORKER: Path
    WORKER_CONTROLLER: Path


def __getattr__(name: str) -> Path:
    if name in _LAZY:
        # The project made first, if one is registered: making it imports
        # its package, which configures the service.
        project_service()
        return _LAZY[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def documents(path: Path) -> list[dict[str, Any]]:
    """The YAML documents of a manifest file.

    Args:
        path: a file in the project's ``deploy/``.

    Returns:
        Each document in it, parsed, the empty ones left out.
    """
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def the(kind: str, path: Path) -> dict[str, Any]:
    """The one object of a kind in a manifest file.

    Args:
        kind: its ``kind`` ("Service", "ConfigMap", ...).
        path: the file.

    Returns:
        The object, parsed.
    """
    [found] = [document for document in documents(path) if document["kind"] == kind]
    return found


def settings() -> dict[str, str]:
    """The worker's settings in the manifests.

    Returns:
        The base's ConfigMap's data.
    """
    data: dict[str, str] = the("ConfigMap", _base() / "configmap.yaml")["data"]
    return data


def secret_keys() -> list[str]:
    """The keys of the Secret the base generates.

    Returns:
        Its keys, from ``secret.example.env``.
    """
    lines = (_base() / "secret.example.env").read_text().splitlines()
    return [line.partition("=")[0] for line in lines if line and not line.startswith("#")]


def pod(path: Path | None = None) -> dict[str, Any]:
    """The worker's pod template: in the StatefulSet, or the Deployment or the
    WorkerDeployment.

    Args:
        path: the manifest; None for ``DEPLOY_WORKER``.

    Returns:
        The template, parsed.
    """
    template: dict[str, Any] = documents(path or _worker())[0]["spec"]["template"]
    return template


def worker_container(path: Path | None = None) -> dict[str, Any]:
    """The worker's container in a manifest.

    Args:
        path: the manifest; None for ``DEPLOY_WORKER``.

    Returns:
        The pod spec's one container, as parsed.
    """
    containers: list[dict[str, Any]] = pod(path)["spec"]["containers"]
    [container] = containers
    return container


def container_port(container: dict[str, Any], port: int | str) -> int:
    """The number of a container's port.

    Args:
        container: the container, parsed.
        port: a number, or the name of one of its ports.

    Returns:
        The port's number.
    """
    if isinstance(port, int):
        return port
    [number] = [p["containerPort"] for p in container["ports"] if p["name"] == port]
    return int(number)


def probe_paths() -> tuple[str, str]:
    """The paths the worker's probes ask.

    Returns:
        The readiness probe's path and the liveness probe's.
    """
    container = worker_container()
    return (
        container["readinessProbe"]["httpGet"]["path"],
        container["livenessProbe"]["httpGet"]["path"],
    )
