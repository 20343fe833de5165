"""The histories every generated project ships (tests/histories/, recorded by
scripts/record_histories.py) guard the runtime it runs: a one-line change to
the runtime workflow's steps, taken by a project as a runtime upgrade (its
[tool.uv.sources] pointed at the changed runtime, `uv sync`), fails the
project's suite, naming the file that no longer replays, in a project with a host-bound backend and in one with remote
backends alone (each ships the histories its own workflow makes). Every
combination's own suite replays them unchanged (test_generated_suites.py),
whatever the provider's name."""

import shutil

import pytest

from .baked import TEMPLATE, BakedProject


@pytest.mark.slow
@pytest.mark.parametrize(
    ("answers", "kind"),
    [
        pytest.param({}, "scripted-chain", id="host-bound"),
        # A remote-only project's own kind: its workflow never asks for a host.
        pytest.param({"sandbox_backend": "e2b"}, "remote-scripted-chain", id="remote-only"),
    ],
)
def test_a_one_line_change_to_the_runtimes_workflow_fails_the_generated_replay_test(
    bake, tmp_path, answers, kind
) -> None:
    project = bake(answers)
    runtime = tmp_path / "runtime"
    shutil.copytree(TEMPLATE / "runtime", runtime, ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    workflow = runtime / "src" / "sandbox_agent_runtime" / "workflow.py"
    anchor = "        request, self.sandbox = await begin.begin(request, carried, self.given)\n"
    text = workflow.read_text()
    assert anchor in text
    workflow.write_text(text.replace(anchor, "        await workflow.sleep(0.01)\n" + anchor))
    changed = BakedProject(tmp_path / project.path.name, project.context)
    shutil.copytree(project.path, changed.path, ignore=shutil.ignore_patterns(".venv"))
    pyproject = changed.path / "pyproject.toml"
    source = 'sandbox-agent-runtime = { path = "%s" }' % (TEMPLATE / "runtime")
    assert source in pyproject.read_text()
    pyproject.write_text(pyproject.read_text().replace(source, 'sandbox-agent-runtime = { path = "%s" }' % runtime))
    installed = changed.install()
    assert installed.returncode == 0, installed.stderr

    tests = changed.run_tests("tests/test_histories.py", "-k", "replays_against", "-n", "0")

    assert tests.returncode == 1, tests.stdout
    # The default kind ships its conversation recorded with encryption on too.
    names = ["run-1", "run-2", "conversation", *(["encrypted"] if kind == "scripted-chain" else [])]
    for name in names:
        assert f"tests/histories/{kind}.{name}.json does not replay" in tests.stdout
    assert "[TMPRL1100]" in tests.stdout
    assert f"{len(names)} failed" in tests.stdout
