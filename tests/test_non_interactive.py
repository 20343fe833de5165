"""Every non-interactive way of answering the prompts, as the README shows them."""

import subprocess
from pathlib import Path

import pytest

from .baked import TEMPLATE, succeeds, tool


class Cookiecutter:
    """The cookiecutter command, with a home directory of its own (its replay
    files and any ~/.cookiecutterrc stay out of the real one)."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return succeeds(tool("cookiecutter"), *args, cwd=self.home, HOME=str(self.home))


@pytest.fixture
def cookiecutter(tmp_path: Path) -> Cookiecutter:
    return Cookiecutter(tmp_path)


def shared(project: Path, package: str) -> str:
    package_dir = project / "src" / package
    return (package_dir / "service.py").read_text() + (package_dir / "runs.py").read_text()


def test_no_input_takes_every_default(cookiecutter: Cookiecutter, tmp_path: Path) -> None:
    cookiecutter("--no-input", "--output-dir", str(tmp_path / "out"), str(TEMPLATE))

    project = tmp_path / "out" / "sandbox-agent"
    assert 'TASK_QUEUE = "sandbox-agent"' in shared(project, "sandbox_agent")
    assert (project / "LICENSE").read_text().startswith("MIT License")


def test_key_value_answers_on_the_command_line(cookiecutter: Cookiecutter, tmp_path: Path) -> None:
    cookiecutter(
        "--no-input",
        "--output-dir",
        str(tmp_path / "out"),
        str(TEMPLATE),
        "project_name=Data Cleaner",
        "sandbox_backend=daytona",
        "task_queue=data-cleaner",
        "license=none",
    )

    project = tmp_path / "out" / "data-cleaner"
    text = shared(project, "data_cleaner")
    assert 'TASK_QUEUE = "data-cleaner"' in text
    assert 'SANDBOX_PROVIDER = "daytona"' in text
    assert not (project / "LICENSE").exists()


def write_user_config(tmp_path: Path) -> Path:
    config = tmp_path / "platform-team.yaml"
    config.write_text(
        "default_context:\n"
        '  author_name: "Acme Platform Team"\n'
        '  license: "Apache-2.0"\n'
        '  sandbox_backend: "e2b"\n'
        '  python_version: "3.12"\n'
        f'cookiecutters_dir: "{tmp_path / "cookiecutters"}"\n'
        f'replay_dir: "{tmp_path / "replay"}"\n'
    )
    return config


def test_a_user_config_file_sets_the_fleet_defaults(cookiecutter: Cookiecutter, tmp_path: Path) -> None:
    config = write_user_config(tmp_path)

    cookiecutter(
        "--no-input",
        "--config-file",
        str(config),
        "--output-dir",
        str(tmp_path / "out"),
        str(TEMPLATE),
        "project_name=Fleet Agent",
    )

    project = tmp_path / "out" / "fleet-agent"
    pyproject = (project / "pyproject.toml").read_text()
    assert 'authors = [{ name = "Acme Platform Team" }]' in pyproject
    assert 'license = "Apache-2.0"' in pyproject
    assert 'requires-python = ">=3.12"' in pyproject
    assert 'SANDBOX_PROVIDER = "e2b"' in shared(project, "fleet_agent")
    assert (project / "LICENSE").read_text().lstrip().startswith("Apache License")


def test_replay_renders_the_same_project_again(cookiecutter: Cookiecutter, tmp_path: Path) -> None:
    config = write_user_config(tmp_path)
    first, second = tmp_path / "first", tmp_path / "second"
    cookiecutter(
        "--no-input",
        "--config-file",
        str(config),
        "--output-dir",
        str(first),
        str(TEMPLATE),
        "project_name=Replayed Agent",
        "max_turns=7",
    )

    cookiecutter("--replay", "--config-file", str(config), "--output-dir", str(second), str(TEMPLATE))

    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    for relative in files:
        assert (first / relative).read_bytes() == (second / relative).read_bytes(), relative
    assert "MAX_TURNS = 7" in shared(second / "replayed-agent", "replayed_agent")
