"""The same template through copier: copier.yml asks cookiecutter.json's
questions, only those that apply (approval_timeout_seconds only with
approvals), checks each answer as it is given with the pre-generation hook's
rules and message, and renders the project cookiecutter renders, byte for
byte."""

import json
import re
import shutil
import stat
from pathlib import Path
from typing import Any

import copier
import copier._main
import pytest
import yaml
from pytest_cookies.plugin import Cookies

from local_extensions import BACKENDS, QUESTIONS

from .baked import TEMPLATE, BakedProject, run, tool
from .combinations import COMBINATIONS
from .test_bad_inputs import BAD_INPUTS
from .test_render import INJECTION, LONGEST_PACKAGE_NAME

COOKIECUTTER_JSON = json.loads((TEMPLATE / "cookiecutter.json").read_text())
COPIER_YML = yaml.safe_load((TEMPLATE / "copier.yml").read_text())
# What each engine writes about the render itself: copier's answers file
# (cruft's .cruft.json is not in a cookiecutter render).
ANSWERS_FILE = ".copier-answers.yml"
# How a project follows the template, for the engine that made it
# (tests/test_updates.py runs what it says).
UPDATING = "docs/updating.md"
# The commit the README names: these tests render a copy outside git with
# copier, this checkout with cookiecutter.
COMMIT = re.compile(
    rb"commit (`[0-9a-f]{12}`( with changes not committed)?(, its release `v[0-9.]+`)?"
    rb"|unknown \(rendered from files outside git\));"
)
NOT_TEMPLATE = shutil.ignore_patterns(".git", ".venv", "venv", "__pycache__", "*.egg-info", ".pytest_cache", ".ci")


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The template as it is in this checkout, outside git: copier renders a
    repository's last commit, and these tests render the files as they are."""
    copy = tmp_path_factory.mktemp("copier") / "template"
    shutil.copytree(TEMPLATE, copy, ignore=NOT_TEMPLATE)
    # The runtime a render takes is this checkout's, as cookiecutter's render
    # of it takes (pyproject.toml's [tool.uv.sources] names the same directory).
    shutil.rmtree(copy / "runtime")
    (copy / "runtime").symlink_to(TEMPLATE / "runtime")
    return copy


def render_with_copier(template: Path, into: Path, answers: dict[str, object]) -> Path:
    copier.run_copy(str(template), str(into), data=answers, defaults=True, unsafe=True, quiet=True)
    return into


def rendered_files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Each file the template rendered (as BakedProject.files), with its bytes and mode."""
    files = BakedProject(root, {}).files()
    return {str(path.relative_to(root)): (path.read_bytes(), stat.S_IMODE(path.stat().st_mode)) for path in files}


def test_copier_asks_cookiecutters_questions_with_its_defaults_and_prompts() -> None:
    questions = [name for name in COPIER_YML if not name.startswith("_")]
    assert questions == QUESTIONS
    prompts = COOKIECUTTER_JSON["__prompts__"]
    for name in QUESTIONS:
        default, question, prompt = COOKIECUTTER_JSON[name], COPIER_YML[name], prompts[name]
        if isinstance(default, list):
            assert (
                list(question["choices"].values() if isinstance(question["choices"], dict) else question["choices"])
                == default
            )
            assert question["default"] == default[0]
            if isinstance(prompt, dict):
                assert question["help"] == prompt["__prompt__"]
                assert list(question["choices"]) == [prompt[option] for option in default], name
            else:
                assert question["help"] == prompt
        else:
            assert question["help"] == prompt, name
            assert question["default"] == (default if isinstance(default, bool) else str(default)), name
        assert question["type"] == ("bool" if isinstance(default, bool) else "str"), name
        assert question["validator"] == f"{{{{ cookiecutter | refusal({name!r}) }}}}", name


def copier_answers(answers: dict[str, object]) -> dict[str, object]:
    """The same answers for copier: cookiecutter renders an answer as a
    template (the tests wrap braces in {% raw %}); copier takes it as it is."""
    return {
        name: value.replace("{% raw %}", "").replace("{% endraw %}", "") if isinstance(value, str) else value
        for name, value in answers.items()
    }


INJECTION_PARAM = pytest.param(INJECTION, id="quotes-backslashes-unicode-braces")


@pytest.mark.parametrize("project", [*COMBINATIONS, LONGEST_PACKAGE_NAME, INJECTION_PARAM], indirect=True)
def test_copier_renders_what_cookiecutter_renders(
    request: pytest.FixtureRequest, template: Path, tmp_path: Path, project: BakedProject
) -> None:
    answers = request.node.callspec.params["project"]
    copied = render_with_copier(template, tmp_path / "copied", copier_answers(answers))

    by_copier = rendered_files(copied)
    assert ANSWERS_FILE in by_copier
    del by_copier[ANSWERS_FILE]
    by_cookiecutter = rendered_files(project.path)
    assert sorted(by_copier) == sorted(by_cookiecutter)
    for relative, (text, mode) in by_cookiecutter.items():
        if relative == UPDATING:
            continue
        if relative == "README.md":
            assert len(COMMIT.findall(text)) == len(COMMIT.findall(by_copier[relative][0])) == 1
            text = COMMIT.sub(b"commit", text)
            by_copier[relative] = (COMMIT.sub(b"commit", by_copier[relative][0]), mode)
        assert by_copier[relative] == (text, mode), relative


def test_a_copier_project_is_told_to_follow_the_template_with_copier(template: Path, tmp_path: Path, bake) -> None:
    copied = render_with_copier(template, tmp_path / "copied", {})
    updating = (copied / UPDATING).read_text()
    assert "copier update --trust" in updating
    assert "cruft" not in updating
    # These files are a copy outside git: no commit to name, and no update without one.
    assert "commit unknown (rendered from files outside git)" in (copied / "README.md").read_text()
    assert "Without a commit to start from, `copier update`" in updating
    made = (bake({}).path / UPDATING).read_text()
    assert "uvx cruft update" in made
    assert "copier copy --trust" in made


def test_the_answers_file_is_copiers_alone(template: Path, tmp_path: Path, bake) -> None:
    copied = render_with_copier(template, tmp_path / "copied", {"sandbox_backend": "e2b"})
    recorded = yaml.safe_load((copied / ANSWERS_FILE).read_text())
    assert recorded["sandbox_backend"] == "e2b"
    assert recorded["workflow_execution_timeout_seconds"] == "3600"
    # A question copier did not ask (the approval wait, without approvals) is not recorded.
    assert "approval_timeout_seconds" not in recorded
    assert not (bake({"sandbox_backend": "e2b"}).path / ANSWERS_FILE).exists()


def asked_questions(
    template: Path, into: Path, monkeypatch: pytest.MonkeyPatch, refused: dict[str, str] | None = None, **typed: object
) -> list[str]:
    """The questions copier asks a person who types these answers and takes
    the default of every other question asked. A typed answer the question
    refuses goes in ``refused`` (what the prompt says), and the person takes
    the default instead; without ``refused``, none may be refused."""
    asked = []

    def prompt(questions: list[dict[str, Any]], answers: dict[str, object]) -> dict[str, object]:
        (question,) = questions
        name = question["name"]
        if not question["when"](answers):
            return answers
        asked.append(name)
        answer = typed.get(name, answers[name])
        said = question["validate"](str(answer)) if "validate" in question else True
        if said is not True:
            assert refused is not None, (name, answer, said)
            refused[name] = said
            answer = answers[name]
        return {name: answer}

    monkeypatch.setattr(copier._main, "unsafe_prompt", prompt)
    copier.run_copy(str(template), str(into), unsafe=True, quiet=True)
    return asked


EVERYONES = [
    "project_name",
    "project_slug",
    "package_name",
    "description",
    "sandbox_backend",
    "sandbox_provider_name",
    "additional_sandbox_backends",
    "sandbox_secret_env_vars",
    "task_queue",
    "sandbox_activity_timeout_seconds",
    "approval",
    "workflow_execution_timeout_seconds",
    "max_turns",
    "model_name",
    "python_version",
    "author_name",
    "license",
]
# Cookiecutter asks every question of cookiecutter.json; copier all but
# approval_timeout_seconds without approvals. A backend's own settings
# (image, template, region, lifetime...) are the worker's environment
# variables, never questions.
WITH_APPROVALS = [name for name in QUESTIONS if name in EVERYONES or name == "approval_timeout_seconds"]


def test_cookiecutter_asks_at_most_20_questions() -> None:
    asked = [name for name in COOKIECUTTER_JSON if not name.startswith("_")]
    assert asked == QUESTIONS == WITH_APPROVALS
    assert len(asked) <= 20
    # No backend has questions of its own.
    assert not [name for name in asked if name.split("_")[0] in BACKENDS]


def test_copier_asks_a_local_project_only_the_questions_that_apply(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = asked_questions(template, tmp_path / "out", monkeypatch, sandbox_backend="local")
    assert asked == EVERYONES
    assert len(asked) <= 17
    assert (tmp_path / "out" / "src" / "sandbox_agent" / "service.py").exists()


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        *(
            pytest.param({"sandbox_backend": backend}, EVERYONES, id=backend)
            for backend in BACKENDS
            if backend != "local"
        ),
        pytest.param(
            {"sandbox_backend": "local", "additional_sandbox_backends": "docker", "approval": "commands"},
            WITH_APPROVALS,
            id="local-plus-docker-approved",
        ),
    ],
)
def test_copier_asks_every_backend_the_same_questions(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, typed: dict[str, object], expected: list[str]
) -> None:
    # In cookiecutter.json's order.
    assert asked_questions(template, tmp_path / "out", monkeypatch, **typed) == expected


def test_copier_judges_a_rule_at_the_first_question_that_lets_it(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # package_name is asked before the backends: the backend that the package
    # would shadow is the answer refused, with the package_name rule's line.
    refused: dict[str, str] = {}
    asked_questions(
        template,
        tmp_path / "out",
        monkeypatch,
        refused,
        package_name="docker",
        additional_sandbox_backends="docker",
        task_queue="my queue",
    )
    assert refused == {
        "additional_sandbox_backends": "Validation error for question 'additional_sandbox_backends': "
        "package_name='docker' is not allowed: it is the name of the docker SDK's module, which the "
        "service imports; choose another.",
        "task_queue": "Validation error for question 'task_queue': task_queue='my queue' is not allowed: "
        "use letters, digits, dots, underscores and dashes, starting with a letter or digit, at most 200 characters.",
    }


def hook_line(cookies: Cookies, capfd: pytest.CaptureFixture[str], answers: dict[str, object]) -> str:
    """The one line cookiecutter's pre-generation hook stops it with for these
    answers (the message of its FailedHookException, which its command prints)."""
    result = cookies.bake(extra_context=answers)
    assert result.exit_code != 0
    (line,) = str(result.exception).splitlines()
    return line.removeprefix("ERROR: ")


@pytest.mark.parametrize(("answers", "message"), BAD_INPUTS)
def test_copier_refuses_a_bad_answer_with_the_hooks_line(
    cookies: Cookies, capfd: pytest.CaptureFixture[str], template: Path, tmp_path: Path, answers, message
) -> None:
    with pytest.raises(ValueError) as refused:
        render_with_copier(template, tmp_path / "out", answers)

    # copier names the question that refused it: "Validation error for question 'x': ..."
    said = str(refused.value)
    assert said.startswith("Validation error for question '")
    assert said.partition("': ")[2] == hook_line(cookies, capfd, answers)
    assert message in said
    assert not (tmp_path / "out").exists()


def test_the_copier_command_refuses_a_bad_answer_in_one_line(template: Path, tmp_path: Path) -> None:
    done = run(
        tool("copier"),
        "copy",
        "--trust",
        "--defaults",
        "--data",
        "project_slug=My Agent",
        str(template),
        str(tmp_path / "out"),
        cwd=tmp_path,
    )
    assert done.returncode != 0
    assert "project_slug='My Agent' is not allowed: use lowercase letters" in done.stderr
    assert not (tmp_path / "out").exists()
