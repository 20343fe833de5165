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
into the template as ``<kind>.run-N.json``; each project keeps the kind its
workflow makes (local_extensions.history_kind). Besides the kind, the
provider's name is the only answer a history depends on (it names the
sandbox activities and is a field of the workflow's input, its RunRequest):
it becomes a template expression, so every render of the kind replays them.
Commit the result with the workflow change.
"""

import base64
import json
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
from sandbox_agent.machinery.archives import inputs_of
from sandbox_agent.machinery.histories import record
from sandbox_agent.machinery.run_request import RunRequest
from sandbox_agent.machinery.starter import start
from tests.scripted_model import ScriptedModel
from tests.support import dev_server, running_worker

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


def templated(history: dict, provider: str) -> str:
    """The history as a template: the provider's name, where it appears (the
    sandbox activities' names, the provider of the workflow's input),
    becomes the answer's."""
    marker = "@@PROVIDER@@"
    requests: list[str] = []

    def request_expression(request: dict) -> str:
        # The request's JSON (as Temporal's converter writes it), its
        # provider the answer's, in base64.
        text = json.dumps({**request, "provider": marker}, separators=(",", ":"), sort_keys=True)
        before, after = text.split(json.dumps(marker))
        joined = f"{json.dumps(before)} ~ (cookiecutter.sandbox_provider_name | tojson) ~ {json.dumps(after)}"
        return "{% endraw %}{{ (" + joined + ") | b64encode | tojson }}{% raw %}"

    def walk(node: object) -> object:
        if isinstance(node, dict):
            data = node.get("data")
            request = request_in(data, provider) if isinstance(data, str) else None
            if request is not None:
                requests.append(request_expression(request))
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
        (project / "record_shipped.py").write_text(RECORDING.replace("{where}", where))
        out = work / "recorded"
        subprocess.run(["uv", "run", "python", "record_shipped.py", str(out)], cwd=project, check=True)
        runs = []
        for path in out.glob("*.json"):
            history = json.loads(path.read_text())
            runs.append((history["events"][0]["eventTime"], history))
        if len(runs) != 2:
            sys.exit(f"{prefix}: expected a chain of two runs, recorded {len(runs)}")
        for stale in SHIPPED.glob(f"{prefix}.*.json"):
            stale.unlink()
        SHIPPED.mkdir(parents=True, exist_ok=True)
        for number, (_, history) in enumerate(sorted(runs, key=lambda run: run[0]), start=1):
            target = SHIPPED / f"{prefix}.run-{number}.json"
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
