import os

import pytest
from pytest_cookies.plugin import Cookies

from .baked import BakedProject
from .combinations import COMBINATIONS

_baked: dict[str, BakedProject] = {}

# The tests of minutes, in the order the test processes take them up, before
# every other: the parts of the runtime's suite, then each combination's
# generated suite (test_generated_suites.py orders them longest first), the
# previous release's suite on this runtime, then the runtime's type check. A test process takes the next test once it is
# done with one (pytest-xdist's --dist loadgroup, --no-loadscope-reorder in
# pyproject.toml), so the longest start first, on separate cores, and the
# tests of seconds fill in at the end instead of leaving a core idle behind a
# test of minutes.
LONGEST_FIRST = (
    "tests/test_runtime.py::test_the_runtimes_own_suite_passes",
    "tests/test_generated_suites.py::test_generated_suite_types_and_hooks_pass",
    "tests/test_releases.py::test_a_project_of_the_previous_release_passes_its_whole_suite",
    "tests/test_runtime.py::test_the_runtime_type_checks_strictly_with_every_backend",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        found = [i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)]
        return found[0] if found else len(LONGEST_FIRST)

    items.sort(key=rank)


@pytest.fixture(scope="session")
def bake(cookies_session: Cookies):
    """Render a combination once per session; every test of it shares the render."""

    def bake(answers: dict[str, object]) -> BakedProject:
        key = repr(sorted(answers.items()))
        if key not in _baked:
            result = cookies_session.bake(extra_context=answers)
            assert result.exit_code == 0, result.exception
            _baked[key] = BakedProject(result.project_path, dict(result.context))
        return _baked[key]

    return bake


@pytest.fixture(params=COMBINATIONS)
def project(request: pytest.FixtureRequest, bake) -> BakedProject:
    """Each combination, rendered (once per session); a test may name other answers with
    ``@pytest.mark.parametrize("project", [...], indirect=True)``."""
    return bake(request.param)


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One mypy cache for every project the test processes check (each
    combination's render, and the runtime). Checking the SDKs' ~1,500 modules takes ~40 s and gives the same result in
    every project; mypy checks each cached module against its source's hash,
    so a shared cache changes how long mypy takes, never what it reports, as
    long as one mypy uses it at a time (see ``one_mypy_at_a_time``)."""
    base = tmp_path_factory.getbasetemp()
    cache = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "mypy-cache"
    cache.mkdir(exist_ok=True)
    return str(cache)
