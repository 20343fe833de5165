"""Record the histories every generated project ships in tests/histories/.

    python scripts/record_histories.py [KIND ...]     # every kind unless named

Run it after a change to the generated workflow that changes the commands it
issues (its generated suite's test_histories.py then fails, naming the file):
for each kind of workflow a project can have (``RECORDED``) it renders a
project of that kind, runs the project's own scripted chain on a dev server
that suggests continuing as new early (a chain of two runs, the first
continued as new, with an input file placed in the workspace, a sandbox
command, model calls and the outputs collected), records it with the
project's own ``record()`` (histories.py), and writes the histories back
into the template as ``<kind>.run-N.json``; then a conversation on a dev server
of its own (a run with follow-ups: a prompt answered, its sandbox released
after a second of idleness, a follow-up restoring it, then the END update),
written as ``<kind>.conversation.json``; for the default kind, that
conversation again with encryption on (the project's TEST_KEYS, in its
test_histories.py), as ``<kind>.encrypted.json``. Each project keeps the kind its
workflow makes (local_extensions.history_kind). Besides the kind, the
provider's name is the only answer a history depends on (it names the
sandbox activities and is a field of the workflow's input, its RunRequest):
it becomes a template expression, so every render of the kind replays them.
Commit the result with the workflow change.
"""

import base64
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[1]
SHIPPED = TEMPLATE / "{{cookiecutter.project_slug}}" / "tests" / "histories"
PROVIDER = "{{ cookiecutter.sandbox_provider_name }}"

# Runs inside the rendered project (its own dev server, worker and model).
RECORDING = """
import asyncio, os, sys
os.environ['OPENAI_AGENTS_DISABLE_TRACING'] = '1'
from pathlib import Path
from sandbox_agent_runtime.archives import inputs_of
from sandbox_agent_runtime.histories import record
from sandbox_agent_runtime.run_request import RunRequest
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import dev_server, running_worker
import tests.conftest  # registers the project with the tests' helpers

async def main(out: Path) -> None:
    brief = out.parent / "brief.txt"
    brief.write_text("kept across the chain\\n")
    async with dev_server("limit.historyCount.suggestContinueAsNew=20") as server:
        model = ScriptedModel(["cp brief.txt note.txt && cat note.txt"])
        async with running_worker(server, model{where}) as (client, _):
            request = RunRequest(
                "Copy the brief to a note, then say what it says.",
                inputs=inputs_of([str(brief)], has_store=False),
            )
            handle = await start(client, request)
            print((await handle.result()).answer)
            for path in await record(client, out, limit=10):
                print(path)

asyncio.run(main(Path(sys.argv[1])))
"""

# Runs inside the rendered project too: a conversation of two prompts with an
# idle release between them, then ended (the runtime's tests/test_sessions.py's way).
CONVERSING = """
import asyncio, os, sys
os.environ['OPENAI_AGENTS_DISABLE_TRACING'] = '1'
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from sandbox_agent_runtime.histories import record
from sandbox_agent_runtime.object_store import parse
from sandbox_agent_runtime.run_request import RELEASED, FollowUp, RunRequest
from sandbox_agent_runtime.shared import END, FOLLOW_UP
from sandbox_agent_runtime.starter import start
import tests.conftest  # registers the project with the tests' helpers
from sandbox_agent_runtime.testing.conversing import Conversing, answered, until
from sandbox_agent_runtime.testing.support import SETTINGS, dev_server, running_worker

async def main(out: Path) -> None:
    settings = replace(SETTINGS, session_idle_timeout=timedelta(seconds=1){store})
    async with dev_server() as server:
        model = Conversing([["echo kept > note.txt && cat note.txt"], ["cat note.txt"]])
        async with running_worker(server, model, settings=settings{where}) as (client, _):
            handle = await start(client, RunRequest("Write a note, then read it.", follow_ups=True))
            await until(handle, lambda state: state.state == RELEASED)
            await handle.execute_update(FOLLOW_UP, FollowUp("Read the note again."))
            await answered(handle, 2)
            await handle.execute_update(END)
            print((await handle.result()).answer)
            for path in await record(client, out, limit=10):
                print(path)

asyncio.run(main(Path(sys.argv[1])))
"""


# The conversation again, every payload and snapshot encrypted with the test
# key the project's test_histories.py replays with.
ENCRYPTING = CONVERSING.replace(
    "from sandbox_agent_runtime.histories import record\n",
    "from sandbox_agent_runtime.encryption import EncryptionCodec\n"
    "from sandbox_agent_runtime.histories import record\n"
    "from sandbox_agent_runtime.object_store import data_converter\n"
    "from sandbox_agent_runtime.testing.object_stores import client_with\n"
    "from tests.test_histories import TEST_KEYS\n",
).replace(
    "    async with dev_server() as server:\n",
    "    settings = replace(settings, keys=TEST_KEYS)\n"
    "    async with dev_server() as plain:\n"
    "        server = client_with(plain, data_converter(None, codec=EncryptionCodec(TEST_KEYS)))\n",
)
# The kinds recorded with encryption on too. An encrypted history's request
# cannot become a template (it is ciphertext): it replays only where the
# provider keeps the name it was recorded under (local_extensions.py).
ENCRYPTED_KINDS = {"scripted-chain"}


def request_in(data: str, provider: str) -> dict | None:
    """The run's request a payload's ``data`` holds (the workflow's input, a
    RunRequest whose provider is ``provider``), or None for any other."""
    try:
        value = json.loads(base64.b64decode(data))
    except ValueError:
        return None
    if isinstance(value, dict) and "prompt" in value and value.get("provider") == provider:
        return value
    return None


# A render mentions only its own backends (the template's test_render.py):
# a history whose random ids or digests happen to spell one ("...8cee2b75...")
# is recorded again, up to this many times.
ATTEMPTS = 5


def local_activity_in(data: str, provider: str) -> dict | None:
    """What Temporal records of a local activity of ``provider`` in a
    marker's ``data`` (its type, "<provider>-sandbox_host", attempt and
    times: affinity.choose_host), or None for any other payload."""
    try:
        value = json.loads(base64.b64decode(data))
    except ValueError:
        return None
    if isinstance(value, dict) and str(value.get("activity_type", "")).startswith(f"{provider}-sandbox_"):
        return value
    return None


def mentions_a_backend(text: str) -> bool:
    """Whether a templated history names a backend outside its template
    expressions (where the provider's name is the answer's)."""
    outside = re.sub(r"\{% endraw %\}.*?\{% raw %\}", "", text, flags=re.DOTALL)
    return re.search(r"e2b|daytona|docker", outside, re.IGNORECASE) is not None


def templated(history: dict, provider: str) -> str:
    """The history as a template: the provider's name, where it appears (the
    sandbox activities' names, the local activity's in its marker, the
    provider of the workflow's input), becomes the answer's."""
    marker = "@@PROVIDER@@"
    requests: list[str] = []

    def payload_expression(value: dict, key: str, suffix: str = "") -> str:
        # The payload's JSON (as Temporal's converter writes it), its
        # ``key`` the answer's provider name (then ``suffix``), in base64.
        text = json.dumps({**value, key: marker}, separators=(",", ":"), sort_keys=True)
        before, after = text.split(json.dumps(marker))
        name = "(cookiecutter.sandbox_provider_name" + (f" ~ {json.dumps(suffix)}" if suffix else "") + ")"
        joined = f"{json.dumps(before)} ~ ({name} | tojson) ~ {json.dumps(after)}"
        return "{% endraw %}{{ (" + joined + ") | b64encode | tojson }}{% raw %}"

    def walk(node: object) -> object:
        if isinstance(node, dict):
            data = node.get("data")
            request = request_in(data, provider) if isinstance(data, str) else None
            if request is not None:
                requests.append(payload_expression(request, "provider"))
                return {**node, "data": f"{marker}request-{len(requests) - 1}"}
            local = local_activity_in(data, provider) if isinstance(data, str) else None
            if local is not None:
                suffix = local["activity_type"].removeprefix(provider)
                requests.append(payload_expression(local, "activity_type", suffix))
                return {**node, "data": f"{marker}request-{len(requests) - 1}"}
            name = node.get("name")
            if isinstance(name, str) and name.startswith(f"{provider}-sandbox_"):
                return {**node, "name": marker + name.removeprefix(provider)}
            return {key: walk(value) for key, value in node.items()}
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    text = json.dumps(walk(history), indent=1)
    for number, expression in enumerate(requests):
        text = text.replace(f'"{marker}request-{number}"', expression)
    text = text.replace(f'"{marker}', '"{% endraw %}' + PROVIDER + "{% raw %}")
    return "{% raw %}" + text + "{% endraw %}\n"


# The renders whose workflows make different histories, by kind: without
# approvals, and with them (a person's decision before each command: the same
# for both approval modes, since the scripted chain edits no file); with a
# backend whose sandbox can be bound to a worker's host (the run first asks
# where its sandbox will live: affinity.py), and with remote backends alone
# (no such step). E2B's render stands for every remote-only one: its tests'
# sandbox is the local stand-in whatever the remote backend, and the one
# trace of E2B a history keeps, the names of the errors its sandbox
# operations do not retry, names no backend (a replay does not compare them).
RECORDED: dict[str, tuple[list[str], str]] = {
    "scripted-chain": ([], "local"),
    "approved-chain": (["approval=commands"], "local"),
    "remote-scripted-chain": (["sandbox_backend=e2b"], "e2b"),
    "remote-approved-chain": (["sandbox_backend=e2b", "approval=commands"], "e2b"),
}


def record(prefix: str, answers: list[str], provider: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        subprocess.run(
            [sys.executable, "-m", "cookiecutter", "--no-input", str(TEMPLATE), "-o", str(work), *answers], check=True
        )
        [project] = work.iterdir()
        subprocess.run(["uv", "sync", "-q"], cwd=project, check=True)
        # A worker on a host of its own, where the workflow asks for one.
        where = ', host="recording-host"' if provider == "local" else ""
        # A remote sandbox's snapshots need an object store (a host-bound
        # one's stay on its host's disk without).
        store = "" if provider == "local" else f', object_store=parse("file://{work}/store")'
        (project / "record_shipped.py").write_text(RECORDING.replace("{where}", where))
        conversing = CONVERSING.replace("{where}", where).replace("{store}", store)
        (project / "record_conversation.py").write_text(conversing)
        scripts = [("record_shipped.py", 2), ("record_conversation.py", 1)]
        if prefix in ENCRYPTED_KINDS:
            encrypting = ENCRYPTING.replace("{where}", where).replace("{store}", store)
            (project / "record_encrypted.py").write_text(encrypting)
            scripts.append(("record_encrypted.py", 1))
        recorded = {}
        for script, expected in scripts:
            for attempt in range(1, ATTEMPTS + 1):
                out = work / f"{script.removesuffix('.py')}-{attempt}"
                subprocess.run(["uv", "run", "python", script, str(out)], cwd=project, check=True)
                runs = []
                for path in out.glob("*.json"):
                    history = json.loads(path.read_text())
                    runs.append((history["events"][0]["eventTime"], history))
                if len(runs) != expected:
                    sys.exit(f"{prefix}: expected {expected} runs from {script}, recorded {len(runs)}")
                recorded[script] = [history for _, history in sorted(runs, key=lambda run: run[0])]
                # Ciphertext spells what it spells (the render test lets it).
                if script == "record_encrypted.py" or not any(
                    mentions_a_backend(templated(history, provider)) for history in recorded[script]
                ):
                    break
            else:
                sys.exit(f"{prefix}: every recording of {script} names a backend by chance")
        for stale in SHIPPED.glob(f"{prefix}.*.json"):
            stale.unlink()
        SHIPPED.mkdir(parents=True, exist_ok=True)
        chain, conversation = recorded["record_shipped.py"], recorded["record_conversation.py"]
        names = [f"{prefix}.run-1.json", f"{prefix}.run-2.json", f"{prefix}.conversation.json"]
        histories = chain + conversation
        if "record_encrypted.py" in recorded:
            names.append(f"{prefix}.encrypted.json")
            histories += recorded["record_encrypted.py"]
        for name, history in zip(names, histories, strict=True):
            target = SHIPPED / name
            target.write_text(templated(history, provider))
            print(target.relative_to(TEMPLATE))


def main() -> None:
    kinds = sys.argv[1:] or list(RECORDED)
    unknown = sorted(set(kinds) - set(RECORDED))
    if unknown:
        sys.exit(f"No such kind of history: {', '.join(unknown)}; the kinds are {', '.join(RECORDED)}.")
    for prefix in kinds:
        answers, provider = RECORDED[prefix]
        record(prefix, answers, provider)


if __name__ == "__main__":
    main()
