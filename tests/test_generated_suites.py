"""Each combination's own test suite installs and passes, offline, no API key."""

import pytest

from .baked import BakedProject, find_python
from .combinations import COMBINATIONS


@pytest.mark.slow
@pytest.mark.parametrize("answers", COMBINATIONS)
def test_generated_suite_passes(bake, answers: dict[str, object]) -> None:
    project: BakedProject = bake(answers)
    version = str(project.context["python_version"])
    if find_python(version) is None:
        pytest.skip(f"no Python {version} on this machine to install the project with")

    installed = project.install()
    assert installed.returncode == 0, installed.stderr

    # Everything, including the test that runs the worker and the starter as
    # processes (left out of a plain `uv run pytest` because it is slower).
    tests = project.run_tests("-m", "process or not process", OPENAI_API_KEY="", OPENAI_BASE_URL="http://127.0.0.1:9")
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert " passed" in tests.stdout and "failed" not in tests.stdout
