"""The generated repository's CI, container, pre-commit and license files.

No GitHub runner exists here and no image is built from the Dockerfile, so
these files are checked with what does run: hadolint for the Dockerfile, the GitHub-workflow and
Compose JSON schemas (vendored in check-jsonschema, no download) for the YAML,
pre-commit's own validator, and the structure each file must have.
"""

import fnmatch
import re
import shutil
import tomllib
from pathlib import Path

import pytest
import yaml

from local_extensions import CHOICES

from .baked import TEMPLATE, BakedProject, run, tool


def test_dockerfile_passes_hadolint(project: BakedProject) -> None:
    lint = project.run(tool("hadolint"), "--no-color", "Dockerfile")
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_dockerfile_caches_dependencies_runs_the_worker_unprivileged(project: BakedProject) -> None:
    dockerfile = project.text("Dockerfile")
    lines = [line.strip() for line in dockerfile.splitlines()]
    python = project.context["python_version"]
    runtime = tomllib.loads(project.text("pyproject.toml"))["tool"]["uv"]["sources"]["sandbox-agent-runtime"]
    # A runtime taken from a directory comes in as the build's named context
    # "runtime" (an empty stage unless given), mounted where uv.lock names it.
    assert [line for line in lines if line.startswith("FROM ")] == [
        *(["FROM scratch AS runtime"] if "path" in runtime else []),
        f"FROM python:{python}-slim-bookworm AS build",
        f"FROM python:{python}-slim-bookworm",
    ]
    if "path" in runtime:
        assert f"docker build --build-context runtime={runtime['path']} " in dockerfile
        mount = f"--mount=type=bind,from=runtime,target={runtime['path']} \\"
        assert lines.count(mount) == 2
    # Dependencies from the lock in a layer of their own, before the source is copied.
    deps = lines.index("uv sync --locked --no-dev --no-install-project")
    assert deps < lines.index("COPY . /src") < lines.index("uv sync --locked --no-dev --no-editable")
    user = re.findall(r"^USER (\S+)$", dockerfile, re.MULTILINE)
    assert user and user[-1].split(":")[0] not in ("root", "0")
    scripts = tomllib.loads(project.text("pyproject.toml"))["project"]["scripts"]
    command = re.search(r'^CMD \["([^"]+)"\]$', dockerfile, re.MULTILINE)
    assert command and command.group(1) in scripts
    assert scripts[command.group(1)].endswith(".worker:cli")


def dockerignore(project: BakedProject) -> list[str]:
    """The patterns of the project's .dockerignore, in order."""
    return [
        line.strip() for line in project.text(".dockerignore").splitlines() if line.strip() and not line.startswith("#")
    ]


def dockerignored(relative: str, patterns: list[str]) -> bool:
    """Whether the image build leaves ``relative`` out of its context, as
    Docker reads .dockerignore: the last pattern that matches the path or a
    directory above it decides, a ``!`` pattern bringing it back in."""
    parts = relative.split("/")
    above = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    left_out = False
    for pattern in patterns:
        keep = pattern.startswith("!")
        if any(fnmatch.fnmatch(path, pattern.removeprefix("!")) for path in above):
            left_out = not keep
    return left_out


def test_a_private_template_repositorys_token_reaches_the_builds_clone_as_a_secret_alone(project: BakedProject) -> None:
    """docs/kubernetes.md says what a private template repository needs and
    how to give it to the build: the secret it names is the one both of the
    Dockerfile's installs mount, and nothing else in the Dockerfile reads it."""
    dockerfile = project.text("Dockerfile")
    assert re.findall(r"--mount=type=secret,id=(\w+),target=/root/\.netrc \\$", dockerfile, re.MULTILINE) == [
        "netrc",
        "netrc",
    ]
    mounts = [line.strip() for line in dockerfile.splitlines() if "netrc" in line and not line.startswith("#")]
    assert mounts == ["--mount=type=secret,id=netrc,target=/root/.netrc \\"] * 2
    guide = re.sub(r"\s+", " ", project.text("docs/kubernetes.md"))
    assert "### A private template repository" in project.text("docs/kubernetes.md")
    assert "docker build --secret id=netrc,src=netrc" in guide
    for where in ("build stage", "CI (`.github/workflows/`, `uv sync`)", "teammate"):
        assert where in guide, where


def test_dockerignore_keeps_secrets_out_and_build_inputs_in(project: BakedProject) -> None:
    patterns = dockerignore(project)

    def ignored(path: str) -> bool:
        return dockerignored(path, patterns)

    for needed in [
        "pyproject.toml",
        "uv.lock",
        "README.md",
        f"src/{project.context['package_name']}/worker.py",
    ]:
        assert not ignored(needed), needed
    if (project.path / "LICENSE").exists():
        assert not ignored("LICENSE")
    for secret in [
        ".env",
        ".env.local",
        ".venv/bin/python",
        ".git/config",
        "deploy/k8s/secret.env",
        "deploy/k8s/api-tokens.env",
    ]:
        assert ignored(secret), secret


def test_compose_runs_the_dev_server_the_worker_and_the_api(project: BakedProject) -> None:
    schema = project.run(tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", "compose.yaml")
    assert schema.returncode == 0, schema.stdout + schema.stderr

    services = yaml.safe_load(project.text("compose.yaml"))["services"]
    assert set(services) == {"temporal", "worker", "api"}
    temporal = services["temporal"]
    assert temporal["image"].startswith("temporalio/temporal:")
    # Reachable from the worker's container; handing tasks to workers promptly
    # (a one-shard dev server polls for them 20 times a second by default).
    assert temporal["command"] == [
        "server",
        "start-dev",
        "--ip",
        "0.0.0.0",
        "--dynamic-config-value",
        "history.transferProcessorMaxPollRPS=1000",
    ]
    # The dev server asks no one for credentials: only this machine may reach it.
    assert temporal["ports"] == ["127.0.0.1:7233:7233", "127.0.0.1:8233:8233"]
    worker = services["worker"]
    runtime = tomllib.loads(project.text("pyproject.toml"))["tool"]["uv"]["sources"]["sandbox-agent-runtime"]
    if "path" in runtime:
        assert worker["build"] == {"context": ".", "additional_contexts": {"runtime": runtime["path"]}}
    else:
        assert worker["build"] == "."
    assert worker["environment"]["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert worker["depends_on"]["temporal"]["condition"] == "service_healthy"
    assert worker["env_file"] == [{"path": ".env", "required": False}]
    # Docker kills a container 10 s after SIGTERM unless told otherwise: the
    # worker must have the grace it gives work in flight, and a few seconds more.
    assert seconds(worker["stop_grace_period"]) > shutdown_grace(project)
    if "docker" in project.derived.backends:
        # Every worker of the file drives the one engine of its host.
        assert worker["environment"]["DOCKER_ENGINE_SHARED"] == "true"
        # The worker drives the host's engine through its socket, as the socket's group.
        assert worker["volumes"] == ["/var/run/docker.sock:/var/run/docker.sock"]
        assert worker["group_add"] == ["${DOCKER_GID:?set DOCKER_GID to the group id of /var/run/docker.sock}"]
        assert "root" in project.text("compose.yaml")
    else:
        assert "volumes" not in worker and "group_add" not in worker
    # The API: the worker's image with its own command, the worker's .env and
    # Temporal, its callers from the environment, ready while Temporal answers.
    api = services["api"]
    slug = project.context["project_slug"]
    assert api["build"] == worker["build"]
    assert api["command"] == [f"{slug}-api"]
    assert api["env_file"] == worker["env_file"]
    assert api["environment"] == {
        "TEMPORAL_ADDRESS": "temporal:7233",
        "TEMPORAL_NAMESPACE": "default",
        "API_BIND_ADDRESS": "0.0.0.0:8000",
        "API_TOKENS": "${API_TOKENS:-}",
    }
    # Plain HTTP: on this machine's loopback address only.
    assert api["ports"] == ["127.0.0.1:8000:8000"]
    assert "http://127.0.0.1:8000/readyz" in " ".join(api["healthcheck"]["test"])
    assert api["depends_on"]["temporal"]["condition"] == "service_healthy"


def test_ci_workflow_installs_with_uv_and_runs_lint_types_and_tests(project: BakedProject) -> None:
    path = ".github/workflows/ci.yml"
    schema = project.run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", path)
    assert schema.returncode == 0, schema.stdout + schema.stderr

    workflow = yaml.safe_load(project.text(path))
    steps = workflow["jobs"]["check"]["steps"]
    setup_uv = [step for step in steps if str(step.get("uses", "")).startswith("astral-sh/setup-uv@")]
    assert setup_uv and setup_uv[0]["with"]["python-version"] == "${{ matrix.python }}"
    commands = [step["run"] for step in steps if "run" in step]
    # The Docker tests run on the runner's engine, with the image pulled first:
    # DOCKER_SANDBOX_IMAGE's default, the worker's when the variable is unset.
    pull = ["docker pull python:3.12-slim"] if "docker" in project.derived.backends else []
    assert commands == [
        "uv sync --locked --compile-bytecode",
        "uv run ruff check . && uv run ruff format --check .",
        "uv run mypy src tests",
        *pull,
        "uv run pytest",
        "uv run pytest -m long",
        "uv run pytest -m process",
        "uv run pytest -m faults",
        # promtool and a real Prometheus for the dashboard's and the alerts' tests.
        "sudo apt-get update -qq && sudo apt-get install -y -qq prometheus",
        "uv run pytest -m monitoring",
    ]
    assert workflow["permissions"] == {"contents": "read"}


def test_evals_workflow_runs_the_dataset_nightly_with_the_secrets_and_keeps_the_report(project: BakedProject) -> None:
    path = ".github/workflows/evals.yml"
    schema = project.run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", path)
    assert schema.returncode == 0, schema.stdout + schema.stderr

    workflow = yaml.safe_load(project.text(path))
    # YAML 1.1 reads the key "on" as True.
    assert set(workflow[True]) == {"schedule", "workflow_dispatch"}
    assert workflow["permissions"] == {"contents": "read"}
    steps = workflow["jobs"]["evaluate"]["steps"]
    slug = project.context["project_slug"]
    commands = [step["run"] for step in steps if "run" in step]
    assert commands[0] == "uv sync --locked"
    assert "uv run temporal server start-dev --headless" in commands[1]
    assert f"uv run {slug}-worker " in commands[2]
    evaluate = f'uv run {slug}-eval evals/ --repeat "${{REPEAT:-3}}" --report-dir eval-report'
    if project.context["approval"] == "none":
        assert commands[3] == evaluate
    else:
        # Every command approved as the evaluation's approver, its key from a
        # secret, in a file only the job's user reads.
        assert commands[3].splitlines() == [
            "umask 077",
            'printf \'%s\\n\' "$EVAL_APPROVER_KEY" > "$RUNNER_TEMP/approver.pem"',
            f'APPROVER_KEY_FILE="$RUNNER_TEMP/approver.pem" {evaluate} --approve-all',
        ]
    # Secrets reach the worker's step and the command's (a rubric's grader) alone.
    given = {step["name"]: step.get("env", {}) for step in steps if "name" in step}
    assert {name for name, env in given.items() if "secrets." in str(env)} == {
        "The worker, with its credentials",
        "Evaluate",
    }
    worker = given["The worker, with its credentials"]
    # Every credential the worker's Kubernetes Secret holds but the dev
    # server's (a static Vercel token instead of a short-lived OIDC one).
    example = project.text("deploy/k8s/secret.example.env")
    needed = set(re.findall(r"^([A-Z][A-Z0-9_]*)=", example, re.MULTILINE)) - {"TEMPORAL_API_KEY"}
    if "VERCEL_OIDC_TOKEN" in needed:
        needed = needed - {"VERCEL_OIDC_TOKEN"} | {"VERCEL_TOKEN", "VERCEL_PROJECT_ID", "VERCEL_TEAM_ID"}
    if project.context["approval"] != "none":
        needed.add("APPROVERS")
    assert {name for name, value in worker.items() if "secrets." in str(value)} == needed
    for name in needed:
        assert worker[name] == "${{ secrets." + name + " }}"
    keep = steps[-1]
    assert keep["uses"].startswith("actions/upload-artifact@") and keep["if"] == "always()"
    assert "eval-report/" in keep["with"]["path"]


def test_ci_tests_every_python_the_project_claims_each_to_the_end(project: BakedProject) -> None:
    claimed = tomllib.loads(project.text("pyproject.toml"))["project"]["requires-python"]
    assert claimed == f">={project.context['python_version']}"
    lowest = tuple(int(part) for part in claimed.removeprefix(">=").split("."))
    # The newest Python the template offers; the project claims it too.
    newest = max(tuple(int(part) for part in version.split(".")) for version in CHOICES["python_version"])
    expected = [f"3.{minor}" for minor in range(lowest[1], newest[1] + 1)]
    strategy = yaml.safe_load(project.text(".github/workflows/ci.yml"))["jobs"]["check"]["strategy"]
    assert strategy == {"fail-fast": False, "matrix": {"python": expected}}


def test_dependabot_keeps_the_actions_and_the_lock_current_in_groups_after_a_cooldown(project: BakedProject) -> None:
    path = ".github/dependabot.yml"
    schema = project.run(tool("check-jsonschema"), "--builtin-schema", "vendor.dependabot", path)
    assert schema.returncode == 0, schema.stdout + schema.stderr
    updates = yaml.safe_load(project.text(path))["updates"]
    assert [update["package-ecosystem"] for update in updates] == ["github-actions", "uv"]
    for update in updates:
        assert update["directory"] == "/"
        assert update["schedule"] == {"interval": "weekly"}
        assert update["cooldown"]["default-days"] >= 3
        [group] = update["groups"].values()
        assert group == {"patterns": ["*"]}


def test_pre_commit_runs_ruff_and_mypy(project: BakedProject) -> None:
    valid = project.run(tool("pre-commit"), "validate-config", ".pre-commit-config.yaml")
    assert valid.returncode == 0, valid.stdout + valid.stderr

    hooks = {
        hook["id"]: hook
        for repo in yaml.safe_load(project.text(".pre-commit-config.yaml"))["repos"]
        for hook in repo["hooks"]
    }
    assert hooks["ruff-check"]["entry"].startswith("uv run ruff check")
    assert hooks["ruff-format"]["entry"] == "uv run ruff format"
    assert hooks["mypy"]["entry"] == "uv run mypy src tests"


def test_license_file_and_metadata_match_the_choice(project: BakedProject) -> None:
    chosen = project.context["license"]
    metadata = tomllib.loads(project.text("pyproject.toml"))["project"]
    assert metadata["authors"] == [{"name": project.context["author_name"]}]
    if chosen == "none":
        assert not (project.path / "LICENSE").exists()
        assert "license" not in metadata
        assert metadata["classifiers"] == ["Private :: Do Not Upload"]
        return
    assert metadata["license"] == chosen
    assert metadata["license-files"] == ["LICENSE"]
    text = project.text("LICENSE")
    if chosen == "MIT":
        assert text.startswith("MIT License\n\nCopyright (c) ")
        assert text.splitlines()[2].endswith(f" {project.context['author_name']}")
    else:
        assert text.lstrip().startswith("Apache License\n")
        assert "Version 2.0, January 2004" in text
    assert text.endswith("\n") and not text.endswith("\n\n")


def test_dockerignore_says_all_the_build_context_carries(project: BakedProject, tmp_path: Path) -> None:
    """Its comment names what the build's context carries, and it carries
    that alone: of the render, with a lock, files added later and secrets."""
    copy = tmp_path / "project"
    shutil.copytree(project.path, copy)
    for added in ("uv.lock", "NOTES.md", "scratch/data.csv", ".env", "src/.env", "deploy/k8s/secret.env"):
        (copy / added).parent.mkdir(parents=True, exist_ok=True)
        (copy / added).touch()
    patterns = dockerignore(project)
    carried = {
        path.relative_to(copy).parts[0]
        for path in copy.rglob("*")
        if path.is_file() and not dockerignored(path.relative_to(copy).as_posix(), patterns)
    }
    licensed = (copy / "LICENSE").exists()
    assert carried == {"pyproject.toml", "uv.lock", "README.md", "src"} | ({"LICENSE"} if licensed else set())
    assert dockerignored("src/.env", patterns)
    comment = " ".join(line.lstrip("# ") for line in project.text(".dockerignore").splitlines()[:2])
    assert "pyproject.toml, uv.lock, README.md, LICENSE and src/" in comment


def seconds(duration: str) -> float:
    """A compose duration such as "45s" or "1m30s", in seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(float(n) * units[u] for n, u in parts)


def shutdown_grace(project: BakedProject) -> float:
    """SHUTDOWN_GRACE of the runtime's worker.py, in seconds."""
    [grace] = re.findall(
        r"^SHUTDOWN_GRACE = timedelta\(seconds=(\d+)\)$",
        (TEMPLATE / "runtime" / "src" / "sandbox_agent_runtime" / "worker.py").read_text(),
        re.M,
    )
    return float(grace)


@pytest.mark.slow
def test_the_images_installs_need_only_the_build_context_and_the_runtime(bake, tmp_path) -> None:
    """The Dockerfile's two `uv sync --locked` steps, run as its build runs them
    but offline (images cannot be pulled here, so the build itself is not):
    over exactly what .dockerignore leaves of the project, with the runtime
    where the build's named context mounts it (pyproject.toml's source)."""
    project: BakedProject = bake({})
    locked = project.run(tool("uv"), "lock", "--offline", "--no-python-downloads")
    assert locked.returncode == 0, locked.stderr
    patterns = dockerignore(project)
    context = tmp_path / "context"
    for path in project.path.rglob("*"):
        relative = path.relative_to(project.path).as_posix()
        if path.is_file() and not dockerignored(relative, patterns):
            (context / relative).parent.mkdir(parents=True, exist_ok=True)
            (context / relative).write_bytes(path.read_bytes())
    assert (context / "uv.lock").exists() and not (context / "tests").exists()
    runtime = tomllib.loads(project.text("pyproject.toml"))["tool"]["uv"]["sources"]["sandbox-agent-runtime"]
    assert (Path(runtime["path"]) / "pyproject.toml").exists()
    environment = {"UV_PROJECT_ENVIRONMENT": str(tmp_path / "venv"), "UV_PYTHON_DOWNLOADS": "never"}
    for step in (["--no-install-project"], ["--no-editable"]):
        synced = run(tool("uv"), "sync", "--locked", "--offline", "--no-dev", *step, cwd=context, **environment)
        assert synced.returncode == 0, synced.stderr
    worker = tmp_path / "venv" / "bin" / f"{project.context['project_slug']}-worker"
    assert worker.exists()
