"""The repositories a run may be given (repos.py, issue 61): only the schemes
and hosts the service allows, never a path or a ``file://`` URL, never a
loopback, private or link-local address unless REPO_ALLOWED_NETWORKS says,
refused in one line before any connection, by the clients (the API, the
starter, a dataset) and by the worker again before it clones; the clone
with no transport but those allowed; its failures one line whatever closed
the door; git's limit inside the operation's own; and a request that
cannot be sent on fails its run at once."""

import asyncio
import dataclasses
import http.server
import ipaddress
import json
import re
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.common import RetryPolicy
from temporalio.converter import DataConverter
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from sandbox_agent_runtime import repos
from sandbox_agent_runtime.archives import BadInput, repo_of
from sandbox_agent_runtime.evals.dataset import load
from sandbox_agent_runtime.evals.runner import prepare
from sandbox_agent_runtime.payloads import AgentPayloadConverter, UndecodablePayload
from sandbox_agent_runtime.repos import BadRepo
from sandbox_agent_runtime.run_request import ENDED, FollowUp, Input, Repo, RunRequest
from sandbox_agent_runtime.settings import BadSetting, repo_policy
from sandbox_agent_runtime.shared import END, FOLLOW_UP, WORKFLOW_TYPE
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.api_client import api_process
from sandbox_agent_runtime.testing.conversing import answered
from sandbox_agent_runtime.testing.faults import silent_git_server
from sandbox_agent_runtime.testing.processes import service_environment
from sandbox_agent_runtime.testing.repositories import (
    LOOPBACK_REPOS,
    bare_copy,
    listening,
    serving,
)
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import SETTINGS, failure_of, running_worker
from sandbox_agent_runtime.workspace.git import NOT_CLONED, clone

ALLOWED = "use an https:// or ssh:// URL, or user@server:path"
NOT_PUBLIC = (
    "a loopback, private or link-local address this service does not allow "
    "(REPO_ALLOWED_NETWORKS); use a repository on a public server"
)


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


def git(*arguments: str, cwd: Path) -> str:
    done = subprocess.run(["git", *arguments], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def project_repo(tmp_path: Path) -> Path:
    """A repository of one commit, on this machine."""
    path = tmp_path / "project"
    path.mkdir()
    git("init", "--quiet", "--initial-branch=main", cwd=path)
    (path / "README.md").write_text("hello\n")
    git("add", "--all", cwd=path)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "one", cwd=path)
    return path


# ------------------------------------------------------------ the check


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("file:///etc", "a file:// URL reads the worker's own disk"),
        ("/srv/repos/secret", "a path names a directory on the worker's own disk"),
        ("../secret", "a path names a directory on the worker's own disk"),
        ("fd::3", "a git transport (name::address) is never allowed"),
        ("ext::sh", "a git transport (name::address) is never allowed"),
        (
            "http://github.com/org/repo",
            "its scheme http is not one this service allows (REPO_ALLOWED_SCHEMES); "
            "use https://, ssh:// or user@server:path",
        ),
        ("git://github.com/org/repo", "its scheme git is not one this service allows"),
        ("https://127.0.0.1/org/repo", f"its server is 127.0.0.1, {NOT_PUBLIC}"),
        ("https://10.1.2.3/org/repo", f"its server is 10.1.2.3, {NOT_PUBLIC}"),
        ("https://192.168.1.1/org/repo", f"its server is 192.168.1.1, {NOT_PUBLIC}"),
        ("https://169.254.169.254/latest", f"its server is 169.254.169.254, {NOT_PUBLIC}"),
        ("https://[::1]/org/repo", f"its server is ::1, {NOT_PUBLIC}"),
        ("https://[::ffff:10.0.0.1]/org/repo", f"its server is 10.0.0.1, {NOT_PUBLIC}"),
        ("git@10.0.0.1:org/repo", f"its server is 10.0.0.1, {NOT_PUBLIC}"),
        ("ssh://git@[fe80::1]/org/repo", f"its server is fe80::1, {NOT_PUBLIC}"),
        ("https://localhost/org/repo", f"its server localhost resolves to 127.0.0.1, {NOT_PUBLIC}"),
        ("https://2130706433/org/repo", f"resolves to 127.0.0.1, {NOT_PUBLIC}"),
        ("ssh://-oProxyCommand=x/repo", "it names no server, or one that is not a name"),
        ("https://github.com/\ud800", "a character that is not text"),
    ],
)
def test_a_repository_the_service_does_not_allow_is_refused_in_one_line(url: str, why: str) -> None:
    with pytest.raises(BadRepo) as refused:
        repos.checked(url)
    said = str(refused.value)
    assert said.startswith(f"{repos.shown(url)} is not allowed: ") and why in said, said
    assert "\n" not in said and said.endswith(("server", ALLOWED, "user@server:path"))


def test_allowed_repositories_pass_and_the_settings_widen_them() -> None:
    for url in ("https://github.com/org/repo", "git@github.com:org/repo.git"):
        assert repos.target_of(url).host == "github.com"
    policy = repo_policy(
        {
            "REPO_ALLOWED_SCHEMES": "https,http",
            "REPO_ALLOWED_HOSTS": "git.internal.example,*.corp.example",
            "REPO_ALLOWED_NETWORKS": "10.20.0.0/16",
        }
    )
    assert policy.schemes == ("https", "http")
    assert repos.target_of("http://a.corp.example/x", policy).host == "a.corp.example"
    networks = repo_policy({"REPO_ALLOWED_NETWORKS": "10.20.0.0/16"})
    assert repos.checked("https://10.20.3.4/x", networks).addresses == (
        ipaddress.ip_address("10.20.3.4"),
    )
    with pytest.raises(BadRepo, match=r"its server github.com is not one this service allows"):
        repos.target_of("https://github.com/org/repo", policy)
    with pytest.raises(BadRepo, match=r"its scheme ssh is not one"):
        repos.target_of("git@git.internal.example:org/repo", policy)


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("REPO_ALLOWED_SCHEMES", "https,file", "'file' is not one"),
        ("REPO_ALLOWED_SCHEMES", "", "'' is not one"),
        ("REPO_ALLOWED_HOSTS", "github.com,*", "'*' is not a server name"),
        ("REPO_ALLOWED_NETWORKS", "10.0.0.0/33", "'10.0.0.0/33' is not a network"),
    ],
)
def test_a_bad_repository_setting_is_one_line(variable: str, value: str, said: str) -> None:
    with pytest.raises(BadSetting) as refused:
        repo_policy({variable: value})
    assert str(refused.value).startswith(f"{variable}={value!r} is not allowed: use ")
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_the_clients_refuse_before_a_run_starts_and_connect_to_nothing(tmp_path: Path) -> None:
    """The starter's and the evaluations' check (archives.repo_of, with the
    service's settings): a host on loopback, named by address or by a name
    that resolves to it, is refused without a connection."""
    with listening() as listener:
        dataset = tmp_path / "cases.yaml"
        dataset.write_text(
            f"cases:\n- {{id: a, prompt: Go., repo: 'https://localhost:{listener.port}/r.git@v1', "
            "checks: [{file_exists: out.txt}]}\n"
        )
        # The dataset's form is fine; the service's settings refuse it
        # before any case runs.
        with pytest.raises(
            BadInput,
            match=re.escape(
                f"case 'a': repo 'https://localhost:{listener.port}/r.git' is not allowed: "
                f"its server localhost resolves to 127.0.0.1, {NOT_PUBLIC}"
            ),
        ):
            prepare(load(dataset), False, SETTINGS.repos)
        for url in (
            f"https://127.0.0.1:{listener.port}/org/repo.git",
            f"https://localhost:{listener.port}/org/repo.git@main",
            f"ssh://git@127.0.0.1:{listener.port}/org/repo.git",
            f"http://127.0.0.1:{listener.port}/org/repo.git",
        ):
            with pytest.raises(BadInput, match=r"^--repo '.*' is not allowed: "):
                repo_of(url, SETTINGS.repos)
        # Form only (a dataset, before the settings are read): a path, never.
        with pytest.raises(BadInput, match="a path names a directory on the worker's own disk"):
            repo_of("/srv/repos/secret@main")
    assert listener.accepted == []


# ------------------------------------------------------------ the worker


async def test_the_worker_refuses_a_repository_it_may_not_clone_before_any_connection(
    temporal_client: Client, tmp_path: Path, project_repo: Path
) -> None:
    """Runs started straight through Temporal (no client's check): the
    worker refuses each in one line, the model never called, nothing
    connected to on loopback, and its own repository never read."""
    model = ScriptedModel(["ls"])
    ipv6 = has_ipv6_loopback()
    with listening() as v4, listening("::1") if ipv6 else listening() as v6:
        urls = [
            str(project_repo),
            f"file://{project_repo}",
            f"http://127.0.0.1:{v4.port}/org/repo.git",
            f"https://127.0.0.1:{v4.port}/org/repo.git",
            f"https://localhost:{v4.port}/org/repo.git",
            f"ssh://git@127.0.0.1:{v4.port}/org/repo.git",
            f"https://[::1]:{v6.port}/org/repo.git",
            "https://10.1.2.3/org/repo.git",
            "https://169.254.169.254/latest/meta-data",
        ]
        async with running_worker(temporal_client, model) as (client, _):
            handles = [
                await start(client, RunRequest("Look.", repo=Repo(url=url, name="repo")))
                for url in urls
            ]
            reasons = [await failure_of(handle) for handle in handles]
    assert v4.accepted == [] and v6.accepted == []
    assert model.input_sizes == []
    for url, reason in zip(urls, reasons, strict=True):
        assert "\n" not in reason, reason
        assert f"Repository {repos.shown(url)} is not allowed: " in reason, reason
    assert "a path names a directory on the worker's own disk" in reasons[0]
    assert "a file:// URL reads the worker's own disk" in reasons[1]
    assert "its scheme http is not one this service allows" in reasons[2]
    assert reasons[4].endswith(f"its server localhost resolves to 127.0.0.1, {NOT_PUBLIC}")
    assert reasons[8].endswith(f"its server is 169.254.169.254, {NOT_PUBLIC}")


async def test_the_worker_clones_from_loopback_when_the_settings_allow_it(
    temporal_client: Client, tmp_path: Path, project_repo: Path
) -> None:
    """REPO_ALLOWED_SCHEMES=https,ssh,http and REPO_ALLOWED_NETWORKS=127.0.0.0/8:
    a real repository served over HTTP on loopback is cloned; the same one
    with the defaults is refused."""
    bare_copy(project_repo, tmp_path)
    model = ScriptedModel(["cat project/README.md"])
    with serving(tmp_path) as base:
        request = RunRequest("Look.", repo=repo_of(f"{base}/project.git", LOOPBACK_REPOS))
        async with running_worker(
            temporal_client, model, settings=dataclasses.replace(SETTINGS, repos=LOOPBACK_REPOS)
        ) as (client, _):
            answer = await (await start(client, request)).result()
        async with running_worker(temporal_client, ScriptedModel(["ls"])) as (client, _):
            refused = await failure_of(await start(client, request))
    assert "hello" in answer.answer
    assert "its scheme http is not one this service allows (REPO_ALLOWED_SCHEMES)" in refused


# ------------------------------------------------------------ git itself


async def test_the_clone_takes_no_transport_but_those_allowed(
    project_repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The worker's own git configuration sends an allowed URL to a path on
    its disk (``url.<path>.insteadOf``): the clone refuses the file
    transport, whatever the configuration says."""
    with listening() as listener:
        url = f"http://127.0.0.1:{listener.port}/project.git"
        for key, value in {
            "GIT_CONFIG_COUNT": "2",
            "GIT_CONFIG_KEY_0": f"url.{project_repo}.insteadOf",
            "GIT_CONFIG_VALUE_0": url,
            "GIT_CONFIG_KEY_1": "protocol.allow",
            "GIT_CONFIG_VALUE_1": "always",
        }.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file:http:ext")
        monkeypatch.setenv("TMPDIR", str(tmp_path))
        with pytest.raises(ApplicationError) as failed:
            await clone(Repo(url=url, name="project"), policy=LOOPBACK_REPOS)
    assert failed.value.message == f"Cannot clone {url}: {NOT_CLONED}"


class _Redirecting(http.server.BaseHTTPRequestHandler):
    target = ""

    def do_GET(self) -> None:
        self.send_response(301)
        self.send_header("Location", self.target + self.path)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def redirecting() -> Iterator[tuple[str, type[_Redirecting]]]:
    handler = type("Handler", (_Redirecting,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_the_clone_follows_no_redirect(
    project_repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    redirecting: tuple[str, type[_Redirecting]],
) -> None:
    """An allowed host that redirects elsewhere (a public host could to a
    private one) is not followed: the served repository is not cloned
    through it, though it is cloned straight."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    (tmp_path / "served").mkdir()
    bare_copy(project_repo, tmp_path / "served")
    base, handler = redirecting
    with serving(tmp_path / "served") as served:
        handler.target = served
        straight, _ = await clone(Repo(f"{served}/project.git", name="p"), policy=LOOPBACK_REPOS)
        with pytest.raises(ApplicationError) as failed:
            await clone(Repo(f"{base}/project.git", name="p"), policy=LOOPBACK_REPOS)
    assert (straight / "README.md").read_text() == "hello\n"
    assert failed.value.message == f"Cannot clone {base}/project.git: {NOT_CLONED}"


async def test_a_clone_fails_in_the_same_line_whatever_closed_the_door(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A closed port, a port that hangs up, and a web server without the
    repository: one line each, the same but for the URL (nothing tells the
    caller which port is open)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        closed_port = closed.getsockname()[1]
    (tmp_path / "empty").mkdir()
    with listening() as hangs_up, serving(tmp_path / "empty") as web:
        urls = [
            f"http://127.0.0.1:{closed_port}/r.git",
            f"http://127.0.0.1:{hangs_up.port}/r.git",
            f"{web}/r.git",
        ]
        said = []
        for url in urls:
            with pytest.raises(ApplicationError) as failed:
                await clone(Repo(url, name="r"), policy=LOOPBACK_REPOS)
            said.append(failed.value.message.replace(url, "URL"))
    assert said == [f"Cannot clone URL: {NOT_CLONED}"] * 3


# One sandbox operation as Temporal runs it, cloning: its start-to-close
# timeout is short, git's own limit (GIT_TIMEOUT_MINUTES) longer.
OPERATION_TIMEOUT = timedelta(seconds=12)


@activity.defn(name="clone_for_the_test")
async def clone_for_the_test(url: str) -> str:
    path, commit = await clone(Repo(url, name="r"), timedelta(minutes=1), LOOPBACK_REPOS)
    return commit


@workflow.defn(name="CloneForTheTest", sandboxed=False)
class CloneForTheTest:
    @workflow.run
    async def run(self, url: str) -> str:
        result: str = await workflow.execute_activity(
            clone_for_the_test,
            url,
            start_to_close_timeout=OPERATION_TIMEOUT,
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
        return result


async def test_git_stops_within_its_operation_so_its_line_wins(
    temporal_client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 61, finding 12: a server that answers for ever, git's limit
    (a minute) past the operation's timeout (12 s): git is stopped before
    the operation times out, and the run fails on its first attempt with
    git's line, not with an operation timed out and retried."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    queue = f"clone-{uuid.uuid4().hex[:8]}"
    async with (
        silent_git_server(trickle=True) as url,
        Worker(
            temporal_client,
            task_queue=queue,
            workflows=[CloneForTheTest],
            activities=[clone_for_the_test],
            workflow_runner=UnsandboxedWorkflowRunner(),
        ),
    ):
        handle = await temporal_client.start_workflow(
            CloneForTheTest.run, url, id=queue, task_queue=queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            async with asyncio.timeout(120):
                await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ActivityError) and isinstance(cause.cause, ApplicationError)
    assert cause.cause.message == (
        f"Cannot clone {url}: git did not finish within the time its sandbox operation leaves "
        "it (the operation's timeout is 12 seconds, under GIT_TIMEOUT_MINUTES) and was stopped"
    )
    history = await handle.fetch_history()
    started = [e for e in history.events if e.activity_task_started_event_attributes.attempt]
    assert [e.activity_task_started_event_attributes.attempt for e in started] == [1]


# ------------------------------------------------------------ undecodable requests


@pytest.mark.parametrize("follow_ups", [False, True])
async def test_a_request_that_cannot_be_sent_on_fails_its_run_at_once(
    temporal_client: Client, follow_ups: bool
) -> None:
    """Issue 61, finding 8: a lone surrogate in ``repo``, sent straight
    through Temporal by a client whose JSON escapes it (Temporal's default
    converter): the run fails at once in one line naming the field, instead
    of its workflow task failing for ever (with follow_ups, a run with no
    timeout that /end could not end)."""
    config = temporal_client.config()
    config["data_converter"] = DataConverter.default
    plain = Client(**config)
    request = RunRequest(
        "Look.", repo=Repo(url="https://github.com/org/\ud800", name="r"), follow_ups=follow_ups
    )
    model = ScriptedModel(["ls"])
    async with running_worker(temporal_client, model):
        handle = await plain.start_workflow(
            WORKFLOW_TYPE,
            request,
            id=f"surrogate-{uuid.uuid4().hex[:8]}",
            task_queue=project_service().task_queue,
        )
        async with asyncio.timeout(60):
            reason = await failure_of(handle)
    assert reason == (
        "A payload cannot be read: its repo.url holds a lone surrogate (a character UTF-8 "
        "cannot carry); send UTF-8 text."
    )
    assert model.input_sizes == []


async def test_a_request_read_by_its_type_that_cannot_be_sent_on_fails_at_once(
    temporal_client: Client,
) -> None:
    """A start with both arguments is read by its types, lone surrogate and
    all: the run refuses it before its next payload would fail its task for
    ever; so is a follow-up, refused by the update's validator (END still
    ends the conversation)."""
    config = temporal_client.config()
    config["data_converter"] = DataConverter.default
    plain = Client(**config)
    model = ScriptedModel(["echo hi", "echo again"])
    async with running_worker(temporal_client, model) as (client, _):
        typed = await plain.start_workflow(
            WORKFLOW_TYPE,
            args=[RunRequest("Look.", repo=Repo(url="https://github.com/\ud800", name="r")), None],
            id=f"surrogate-{uuid.uuid4().hex[:8]}",
            task_queue=project_service().task_queue,
        )
        async with asyncio.timeout(60):
            reason = await failure_of(typed)
        talking = await start(client, RunRequest("Say hi.", follow_ups=True))
        await answered(talking, 1)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await plain.get_workflow_handle(talking.id).execute_update(
                FOLLOW_UP, FollowUp("again \udc80")
            )
        assert await talking.execute_update(END, result_type=str) == ENDED
    assert reason == (
        "The run's request cannot be sent on: its repo.url holds a lone surrogate (a character "
        "UTF-8 cannot carry); send UTF-8 text."
    )
    cause = refused.value.cause
    assert isinstance(cause, ApplicationError) and cause.message == (
        "The follow-up cannot be sent on: its prompt holds a lone surrogate (a character "
        "UTF-8 cannot carry); send UTF-8 text."
    )


def test_only_a_payload_no_code_could_read_is_a_failure_of_its_own() -> None:
    """A lone surrogate is an UndecodablePayload naming its field; a payload
    today's code cannot read (JSON cut short) stays the error it was, which
    fails the workflow task until a deploy fixes the code."""
    converter = AgentPayloadConverter()
    escaped = DataConverter.default.payload_converter.to_payloads(
        [RunRequest("Look.", inputs=[Input("a\udc00", "file", 1, 1, "", "")])]
    )
    # As a client's start (the request alone) arrives: no type to read it by.
    with pytest.raises(UndecodablePayload) as undecodable:
        converter.from_payloads(escaped, None)
    assert undecodable.value.non_retryable
    assert undecodable.value.message == (
        "A payload cannot be read: its inputs[0].name holds a lone surrogate (a character "
        "UTF-8 cannot carry); send UTF-8 text."
    )
    [misread] = DataConverter.default.payload_converter.to_payloads([{"provider": "local"}])
    misread.data = b'{"provider": "local"'
    with pytest.raises(ValueError) as other:
        converter.from_payloads([misread], None)
    assert not isinstance(other.value, UndecodablePayload)


# ------------------------------------------------------------ the API


@pytest.mark.process
async def test_the_api_refuses_a_repository_before_a_run_starts(temporal_client: Client) -> None:
    address = temporal_client.service_client.config.target_host
    environment = service_environment(address, "http://127.0.0.1:9/v1")
    with listening() as listener:
        bad = [
            "file:///etc/passwd",
            "/var/lib/worker/repo",
            "http://github.com/org/repo",
            f"https://127.0.0.1:{listener.port}/org/repo.git",
            f"https://localhost:{listener.port}/org/repo.git",
            "https://10.0.0.7/org/repo.git",
            "https://169.254.169.254/latest/meta-data",
            "https://github.com/org/\ud800",
        ]
        async with api_process(environment) as api, api.client() as client:
            said: list[Any] = []
            for url in bad:
                # JSON as a client writes it: a lone surrogate escaped (\ud800).
                answer = await client.post(
                    "/v1/runs",
                    content=json.dumps({"prompt": "x", "repo": url}).encode(),
                    headers={"content-type": "application/json"},
                )
                said.append((answer.status_code, answer.json()["detail"]))
    assert listener.accepted == []
    for url, (status, detail) in zip(bad, said, strict=True):
        assert status == 422, detail
        # A lone surrogate is refused in any field before the URL is read.
        refused = (
            "holds a lone surrogate" if "\ud800" in url else f"{repos.shown(url)} is not allowed: "
        )
        assert detail.startswith(f"field 'repo' {refused}"), detail
        assert "\n" not in detail and detail.endswith("."), detail
