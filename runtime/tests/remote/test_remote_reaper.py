"""The reaper (sandboxes.py) on each remote backend that can list its
sandboxes (backends/<name>.py: ``sandboxes()`` and ``remove()``): the orphan
of a closed run past the grace period is deleted, one within it is kept, and
an open run's, another service's and another namespace's are never touched.
The runs are real, on a real Temporal engine; the tests cannot reach the
providers: each one's list and delete calls are scripted by a stand-in that
holds sandboxes as the provider does, and lists them as its API does (by
label where it can)."""

import dataclasses
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import daytona
import e2b
import modal
import pytest
import runloop_api_client
from blaxel.core.client.models.metadata_labels import MetadataLabels
from blaxel.core.sandbox import SandboxAPIError, SandboxInstance, SyncSandboxInstance
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from sandbox_agent_runtime import backends, sandboxes
from sandbox_agent_runtime.backends import (
    blaxel,
    namespace_key,
    provider_key,
    task_queue_key,
    whose,
    workflow_key,
)
from sandbox_agent_runtime.backends import modal as modal_backend
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.testing.support import CREDENTIALS, SETTINGS

HOUR = timedelta(hours=1)
LONG_AGO = datetime.now(UTC) - 2 * HOUR


@dataclass
class Held:
    """A sandbox the provider holds."""

    id: str
    labels: dict[str, str]
    created: datetime
    # Runloop's and Blaxel's word for a sandbox still there.
    status: str = "running"


@dataclass
class Provider:
    """A stand-in for a provider: the sandboxes it holds, what the backend
    asked it to list them by, and which it was asked to delete."""

    held: dict[str, Held] = field(default_factory=dict)
    asked: list[dict[str, str] | None] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    def listed(self, wanted: Mapping[str, str] | None) -> list[Held]:
        """As the API lists: those carrying every label of ``wanted``."""
        self.asked.append(dict(wanted) if wanted is not None else None)
        return [h for h in self.held.values() if (wanted or {}).items() <= h.labels.items()]

    def delete(self, sandbox_id: str) -> bool:
        """As the API deletes: False for one it does not hold."""
        self.deleted.append(sandbox_id)
        return self.held.pop(sandbox_id, None) is not None


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def script_daytona(provider: Provider, monkeypatch: pytest.MonkeyPatch) -> None:
    class Daytona:
        def list(self, query: daytona.ListSandboxesQuery) -> Iterator[Any]:
            for h in provider.listed(query.labels):
                yield SimpleNamespace(id=h.id, labels=h.labels, created_at=iso(h.created))

        def get(self, sandbox_id: str) -> Any:
            if sandbox_id not in provider.held:
                raise daytona.DaytonaNotFoundError(f"Sandbox {sandbox_id} not found")
            return SimpleNamespace(id=sandbox_id)

        def delete(self, sandbox: Any) -> None:
            provider.delete(sandbox.id)

    monkeypatch.setattr(daytona, "Daytona", Daytona)


class Pages:
    """E2B's paginator: two sandboxes a page."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    @property
    def has_next(self) -> bool:
        return bool(self.items)

    def next_items(self) -> list[Any]:
        page, self.items = self.items[:2], self.items[2:]
        return page


def script_e2b(provider: Provider, monkeypatch: pytest.MonkeyPatch) -> None:
    def listing(query: e2b.SandboxQuery | None = None, **_: Any) -> Pages:
        held = provider.listed(query.metadata if query else None)
        return Pages(
            [
                SimpleNamespace(sandbox_id=h.id, metadata=h.labels, started_at=h.created)
                for h in held
            ]
        )

    def kill(sandbox_id: str, **_: Any) -> bool:
        return provider.delete(sandbox_id)

    monkeypatch.setattr(e2b.Sandbox, "list", staticmethod(listing))
    monkeypatch.setattr(e2b.Sandbox, "kill", staticmethod(kill))


def script_modal(provider: Provider, monkeypatch: pytest.MonkeyPatch) -> None:
    def tags_of(h: Held) -> dict[str, str]:
        return {**h.labels, modal_backend.created_tag(): h.created.isoformat(timespec="seconds")}

    def listing(*, tags: dict[str, str] | None = None, **_: Any) -> Iterator[Any]:
        for h in provider.listed(tags):
            yield SimpleNamespace(object_id=h.id, get_tags=lambda h=h: tags_of(h))

    def from_id(sandbox_id: str, **_: Any) -> Any:
        if sandbox_id not in provider.held:
            raise modal.exception.NotFoundError(f"Sandbox {sandbox_id} not found")
        return SimpleNamespace(terminate=lambda: provider.delete(sandbox_id))

    monkeypatch.setattr(modal.Sandbox, "list", staticmethod(listing))
    monkeypatch.setattr(modal.Sandbox, "from_id", staticmethod(from_id))


def script_runloop(provider: Provider, monkeypatch: pytest.MonkeyPatch) -> None:
    def devbox(h: Held) -> Any:
        created = int(h.created.timestamp() * 1000)
        return SimpleNamespace(id=h.id, metadata=h.labels, create_time_ms=created, status=h.status)

    class Devboxes:
        def list(self, **_: Any) -> Iterator[Any]:
            # Runloop lists devboxes by status only.
            return iter([devbox(h) for h in provider.listed(None)])

        def shutdown(self, devbox_id: str, **_: Any) -> Any:
            if not provider.delete(devbox_id):
                raise not_found(runloop_api_client.NotFoundError)
            return devbox_id

    class Runloop:
        devboxes = Devboxes()

    monkeypatch.setattr(runloop_api_client, "Runloop", Runloop)


def not_found(error: type[Exception]) -> Exception:
    import httpx

    request = httpx.Request("POST", "https://api.runloop.ai/v1/devboxes/x/shutdown")
    response = httpx.Response(404, request=request)
    return error("Not found", response=response, body=None)  # type: ignore[call-arg]


def script_blaxel(provider: Provider, monkeypatch: pytest.MonkeyPatch) -> None:
    def sandbox(h: Held) -> Any:
        labels = MetadataLabels.from_dict(h.labels)
        metadata = SimpleNamespace(name=h.id, labels=labels, created_at=iso(h.created))
        return SimpleNamespace(metadata=metadata, status=h.status.upper())

    def listing(limit: int = 50, cursor: str | None = None) -> Any:
        # Blaxel lists a workspace's sandboxes without filtering by label.
        every = [sandbox(h) for h in provider.listed(None)]
        return SimpleNamespace(auto_paging_iter=lambda: iter(every))

    def delete(name: str) -> Any:
        if not provider.delete(name):
            raise SandboxAPIError(f"Sandbox '{name}' not found", status_code=404)
        return name

    monkeypatch.setattr(SyncSandboxInstance, "list", staticmethod(listing))
    monkeypatch.setattr(SyncSandboxInstance, "delete", staticmethod(delete))


SCRIPTS: dict[str, Callable[[Provider, pytest.MonkeyPatch], None]] = {
    "daytona": script_daytona,
    "e2b": script_e2b,
    "modal": script_modal,
    "runloop": script_runloop,
    "blaxel": script_blaxel,
}
# The providers that list by label: the backend asks for this service's and
# this namespace's sandboxes only.
BY_LABEL = ("daytona", "e2b", "modal")


def labels(workflow_id: str, provider: str, namespace: str, queue: str) -> dict[str, str]:
    return {
        workflow_key(): workflow_id,
        provider_key(): provider,
        namespace_key(): namespace,
        task_queue_key(): queue,
    }


@pytest.fixture
def alone(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """The service with one provider only: the one a test scripts (the others
    would reach for their provider)."""

    def only(name: str) -> None:
        service = replace(current(), providers={name: name})
        monkeypatch.setattr(sandboxes, "current", lambda: service)
        for variable, value in CREDENTIALS.items():
            monkeypatch.setenv(variable, value)

    return only


async def open_run(client: Client) -> str:
    """A run that stays open: on a task queue no worker polls."""
    handle = await client.start_workflow(
        "NoWorkerRunsThis", id=f"run-{uuid.uuid4()}", task_queue=f"nobody-{uuid.uuid4()}"
    )
    return handle.id


@pytest.mark.parametrize("name", list(SCRIPTS))
async def test_an_orphan_past_the_grace_is_deleted_and_nothing_else_is_touched(
    temporal_client: Client,
    name: str,
    alone: Callable[[str], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alone(name)
    provider = Provider()
    SCRIPTS[name](provider, monkeypatch)
    queue = current().task_queue
    ns = temporal_client.namespace
    ended = await open_run(temporal_client)
    kept = await open_run(temporal_client)
    await temporal_client.get_workflow_handle(ended).terminate("an operator, in the middle")
    unknown = f"no-such-run-{uuid.uuid4()}"

    def hold(key: str, said: dict[str, str], created: datetime = LONG_AGO, **more: Any) -> None:
        provider.held[key] = Held(key, said, created, **more)

    hold("orphan", labels(ended, name, ns, queue))
    hold("young", labels(ended, name, ns, queue), datetime.now(UTC))
    hold("unknown", labels(unknown, name, ns, queue))
    hold("open", labels(kept, name, ns, queue))
    hold("theirs", labels(ended, name, ns, "another-service"))
    hold("elsewhere", labels(ended, name, "another-namespace", queue))
    hold("unlabelled", {})
    if name in ("runloop", "blaxel"):
        # Over already: nothing left to delete.
        hold(
            "over",
            labels(ended, name, ns, queue),
            status="shutdown" if name == "runloop" else "terminated",
        )
    every = set(provider.held)

    # The backend's list: this service's sandboxes in this namespace only.
    module: Any = backends.backend_module(name)
    ours = {each.sandbox_id for each in module.sandboxes(ns)}
    listed = {
        each.sandbox.sandbox_id: each.state for each in await sandboxes.survey(temporal_client)
    }
    removed = await sandboxes.reap(temporal_client, HOUR)
    left = set(provider.held)
    deleted = list(provider.deleted)
    removed_later = await sandboxes.reap(temporal_client, timedelta(0))

    assert ours == {"orphan", "young", "unknown", "open"}
    assert listed == {
        "orphan": "terminated",
        "young": "terminated",
        "unknown": "unknown",
        "open": "running",
    }
    assert sorted(each.sandbox.sandbox_id for each in removed) == ["orphan", "unknown"]
    assert sorted(deleted) == ["orphan", "unknown"]
    assert left == every - {"orphan", "unknown"}
    # Within the grace no longer: the young one goes, the rest stay.
    assert [each.sandbox.sandbox_id for each in removed_later] == ["young"]
    assert set(provider.held) == every - {"orphan", "unknown", "young"}
    # What the backend asked its provider to list by.
    expected = whose(ns) if name in BY_LABEL else None
    assert provider.asked and all(asked == expected for asked in provider.asked)


@pytest.mark.parametrize("name", list(SCRIPTS))
async def test_a_sandbox_gone_before_its_deletion_is_no_error(
    temporal_client: Client,
    name: str,
    alone: Callable[[str], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alone(name)
    provider = Provider()
    SCRIPTS[name](provider, monkeypatch)
    unknown = f"no-such-run-{uuid.uuid4()}"
    said = labels(unknown, name, temporal_client.namespace, current().task_queue)
    provider.held["gone"] = Held("gone", said, LONG_AGO)
    [listed] = await sandboxes.survey(temporal_client)
    # Deleted meanwhile: by its provider at its lifetime, or by another reap.
    del provider.held["gone"]

    backends.backend_module(name).remove(listed.sandbox)  # type: ignore[attr-defined]


async def test_each_blaxel_sandbox_carries_the_labels_of_its_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: dict[str, Any] = {}

    async def create_in_blaxel(config: dict[str, Any], **_: Any) -> Any:
        asked.update(config)
        raise RuntimeError("Blaxel is out of reach")

    monkeypatch.setattr(SandboxInstance, "create_if_not_exists", create_in_blaxel)
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(
        environment.info, workflow_id="run-1", activity_type="blaxel-sandbox_client_create"
    )
    with pytest.raises(RuntimeError, match="out of reach"):
        await environment.run(
            blaxel.sandbox_client(SETTINGS).create, options=blaxel.sandbox_options()
        )

    assert asked["labels"] == labels("run-1", "blaxel", "default", current().task_queue)


@pytest.mark.parametrize("name", ["vercel", "cloudflare"])
async def test_a_provider_that_cannot_list_by_label_is_passed_over(
    temporal_client: Client, name: str, alone: Callable[[str], None]
) -> None:
    alone(name)

    assert not hasattr(backends.backend_module(name), "sandboxes")
    assert await sandboxes.reap(temporal_client, timedelta(0)) == []


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_without_the_providers_credentials_the_command_says_which_in_one_line(
    temporal_client: Client,
    name: str,
    alone: Callable[[str], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alone(name)
    provider = Provider()
    SCRIPTS[name](provider, monkeypatch)
    module: Any = backends.backend_module(name)
    for names in module.REQUIRED_ENVIRONMENT:
        for variable in names:
            monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("TEMPORAL_ADDRESS", temporal_client.service_client.config.target_host)
    with pytest.raises(SystemExit) as stop:
        sandboxes.main(["list"])

    [first, *_] = module.REQUIRED_ENVIRONMENT
    assert isinstance(stop.value.code, str)
    assert stop.value.code.startswith(f"Cannot list the sandboxes of {name}: set {first[0]}")
    assert stop.value.code.endswith(f"({module.CREDENTIALS_URL})")
    assert len(stop.value.code.splitlines()) == 1
    # Its provider was never asked.
    assert provider.asked == []
