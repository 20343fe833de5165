import pytest
from pytest_cookies.plugin import Cookies

from .baked import BakedProject
from .combinations import COMBINATIONS

_baked: dict[str, BakedProject] = {}


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
