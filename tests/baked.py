"""A rendered project and the commands a user would run in it."""

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# The template's own derivation of the list answers (its root, beside tests/, is on sys.path).
from local_extensions import Derived, derive

TEMPLATE = Path(__file__).resolve().parents[1]

# What the template's own test run sets and a user's shell does not: the
# template's virtualenv (uv inside a project uses the project's own), the
# template's pytest options and Temporal server, a user's cookiecutter config.
# PYTHONDONTWRITEBYTECODE goes too: Python caches bytecode in a project's
# virtualenv, as it does on a user's machine, so a second run of a generated
# suite costs what it costs a user (benchmarks/time_to_green.py) instead of
# compiling the ~1,800 modules it imports again.
NOT_A_USERS = (
    "VIRTUAL_ENV",
    "UV_PROJECT_ENVIRONMENT",
    "PYTEST_ADDOPTS",
    "TEMPORAL_TEST_ADDRESS",
    "PYTHONDONTWRITEBYTECODE",
    "COOKIECUTTER_CONFIG",
)


def run(*args: str, cwd: Path, timeout: float = 600, **env: str) -> subprocess.CompletedProcess[str]:
    """A command as a user would run it in cwd, with these environment variables added."""
    clean = {k: v for k, v in os.environ.items() if k not in NOT_A_USERS}
    return subprocess.run(
        args, cwd=cwd, env={**clean, **env}, capture_output=True, text=True, timeout=timeout, check=False
    )


def succeeds(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """As run, and it must exit 0."""
    done = run(*args, cwd=cwd, timeout=300, **env)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout}\n{done.stderr}"
    return done


def find_python(version: str) -> str | None:
    """An interpreter of exactly this minor version, if this machine has one."""
    found = subprocess.run(
        [tool("uv"), "python", "find", "--no-python-downloads", version],
        capture_output=True,
        text=True,
    )
    if found.returncode == 0 and found.stdout.strip():
        return found.stdout.strip()
    # pyenv keeps versions that are installed but not on PATH.
    for candidate in sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}")):
        return str(candidate)
    if sys.version_info[:2] == tuple(int(p) for p in version.split(".")):
        return sys.executable
    return None


@dataclass
class BakedProject:
    path: Path
    context: dict[str, object]

    @property
    def derived(self) -> Derived:
        """What every template file read from the answers: the chosen backends, the secrets' names."""
        return derive(self.context)

    @property
    def package(self) -> Path:
        return self.path / "src" / str(self.context["package_name"])

    def files(self) -> list[Path]:
        """The files the template rendered (not those an install or a test run adds)."""
        made_later = {".venv", ".pytest_cache", ".ruff_cache", ".mypy_cache", "__pycache__", "uv.lock", ".git"}
        return sorted(
            p for p in self.path.rglob("*") if p.is_file() and not made_later & set(p.relative_to(self.path).parts)
        )

    def text(self, relative: str) -> str:
        return (self.path / relative).read_text()

    def run(self, *args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess[str]:
        return run(*args, cwd=self.path, timeout=timeout, **env)

    def install(self, *uv_sync_args: str) -> subprocess.CompletedProcess[str]:
        python = find_python(str(self.context["python_version"]))
        env = {"UV_PYTHON": python} if python else {}
        return self.run(tool("uv"), "sync", "--no-python-downloads", *uv_sync_args, **env)

    def run_tests(self, *pytest_args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return self.run(tool("uv"), "run", "--no-sync", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args, **env)


def tool(name: str) -> str:
    """A command installed with the template's test dependencies."""
    beside_python = Path(sys.executable).parent / name
    found = str(beside_python) if beside_python.exists() else shutil.which(name)
    assert found, f"{name} is a test dependency of the template: pip install -e '.[test]'"
    return found


@contextmanager
def one_mypy_at_a_time(cache: str) -> Iterator[None]:
    """Hold the shared mypy cache for one mypy run, across pytest-xdist's
    test processes. Two renders share module names (``sandbox_agent.worker``)
    with different sources, and mypy writes a module's data, then
    its meta, in two steps: a mypy reading between them takes one render's
    data under the meta of a third render whose source matches its own, and
    reports errors its project does not have (CI once saw ``follow`` with an
    approval render's ``key_file`` argument in a project without approvals)."""
    with open(Path(cache) / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
