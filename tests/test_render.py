"""Each combination renders into a clean project written for exactly that choice."""

import json
import py_compile
import re

import pytest

from local_extensions import BACKENDS, DEFAULT_MODEL_ACTIVITY_TIMEOUT

from .baked import TEMPLATE, BakedProject, tool
from .combinations import COMBINATIONS

GIT_COMMIT = re.compile(r"\b[0-9a-f]{40}\b")
BACKEND_WORDS = {
    "local": re.compile(r"unix_local|UnixLocal|backends\.local|backends/local"),
    "daytona": re.compile(r"daytona", re.IGNORECASE),
    "e2b": re.compile(r"e2b", re.IGNORECASE),
    # Every project has a Dockerfile and talks of `docker build`: these are the
    # Docker backend's own words.
    "docker": re.compile(r"DockerSandbox|backends[./]docker|DOCKER_(HOST|PROVIDER|GID)|docker\.sock|test_docker"),
    "modal": re.compile(r"modal", re.IGNORECASE),
    "runloop": re.compile(r"runloop", re.IGNORECASE),
    "vercel": re.compile(r"vercel", re.IGNORECASE),
    "blaxel": re.compile(r"blaxel", re.IGNORECASE),
    # Cloudflare's R2 is an object store the docs of every project name.
    "cloudflare": re.compile(r"CloudflareSandbox|backends[./]cloudflare|CLOUDFLARE_SANDBOX|test_cloudflare"),
}


# GitHub's own expressions (`${{ matrix.python }}`, `${{ secrets.OPENAI_API_KEY }}`)
# in a workflow are not Jinja's.
GITHUB_EXPRESSION = re.compile(r"\$\{\{ [a-z][a-zA-Z0-9_.-]* \}\}")
# Prometheus's own alert templates (`{{ $value | humanize }}`, `{{ $labels.host }}`)
# in the rule files are not Jinja's either.
PROMETHEUS_TEMPLATE = re.compile(r"\{\{ \$[a-z][a-zA-Z0-9_.]*( \| [a-zA-Z]+)? \}\}")
# ... nor Grafana's legends (`"legendFormat": "{{outcome}} {{build_id}}"`).
GRAFANA_LEGEND = re.compile(r'"legendFormat": "[^"]*"')
RULE_FILES = (
    "deploy/monitoring/alerts.yaml",
    "deploy/monitoring/alerts.test.yaml",
    "deploy/k8s/monitoring/prometheusrule.yaml",
)


def test_renders_without_template_residue(project: BakedProject) -> None:
    for path in project.files():
        text = path.read_text()
        if path.relative_to(project.path).parts[0] == ".github":
            text = GITHUB_EXPRESSION.sub("", text)
        if path.relative_to(project.path).as_posix() in RULE_FILES:
            text = PROMETHEUS_TEMPLATE.sub("", text)
        if path.relative_to(project.path).as_posix() == "deploy/monitoring/dashboard.json":
            text = GRAFANA_LEGEND.sub("", text)
        for residue in ("{{", "}}", "{%", "%}", "cookiecutter"):
            assert residue not in text, f"{residue!r} left in {path.relative_to(project.path)}"


def test_mentions_only_the_chosen_backends(project: BakedProject) -> None:
    chosen = project.derived.backends
    service = (project.package / "service.py").read_text()
    assert re.findall(r'^        [A-Z0-9_]+: "(\w+)",$', service, re.M) == chosen
    for path in project.files():
        relative = path.relative_to(project.path)
        # Without the template's commit, which a project names (README.md,
        # docs/updating.md): its hex spells whatever it spells ("...2e2bb5...").
        text = GIT_COMMIT.sub("<commit>", path.read_text())
        for other in BACKENDS:
            if other in chosen:
                continue
            if other == "local" and relative.parts[0] == "tests":
                # Remote backends' tests stand a local sandbox in for the remote one.
                continue
            if relative.name.endswith(".encrypted.json"):
                # A history recorded with encryption on: its base64
                # ciphertext spells whatever it spells ("...E2b...").
                continue
            assert not BACKEND_WORDS[other].search(text), f"{relative} mentions {other}"


# What only a sandbox bound to a worker's host needs: its setting, its
# activity and constants, its queue, the module that routes to it.
HOST_MACHINERY = re.compile(
    r"WORKER_HOST_ID|sandbox_host|CHOOSING_THE_HOST|SandboxHost|host_bound|host_queue"
    r"|host's (own )?queue|@<host>|affinity",
    re.IGNORECASE,
)
# Hosts in the words a person reads, but for an address's (host:port).
HOST_IN_PROSE = re.compile(r"\bhosts?\b(?!:port)", re.IGNORECASE)


def test_only_a_project_with_a_host_bound_backend_has_host_machinery(project: BakedProject) -> None:
    bound = bool(project.derived.host_bound_backends)
    mentions = {
        str(path.relative_to(project.path)) for path in project.files() if HOST_MACHINERY.search(path.read_text())
    }
    if bound:
        # ... and keeps all of it: the routing, the worker's host queue, the setting.
        assert {".env.example", "README.md"} <= mentions
        return
    assert not mentions, mentions
    # Its documents speak of remote sandboxes and workers, never of hosts.
    documents = [
        path
        for path in project.files()
        if path.suffix in (".md", ".yaml", ".yml") or path.name in (".env.example", "Dockerfile")
    ]
    assert documents
    for path in documents:
        found = HOST_IN_PROSE.search(path.read_text())
        assert not found, f"{path.relative_to(project.path)} mentions a host: {found.group()!r}"


# The longest package name the pre-generation hook accepts, in a project with
# every backend: each generated line that names the package or the backends
# is as ruff formats it (one line where it fits, else one name a line).
LONGEST_PACKAGE_NAME = pytest.param(
    {
        "sandbox_backend": "daytona",
        "additional_sandbox_backends": "local,e2b,docker,modal,runloop,vercel,cloudflare,blaxel",
        "package_name": "customer_support_triage_agents",
    },
    id="every-backend-30-character-package-name",
)
# The shortest names, sorting before the project's own folders (benchmarks,
# tests): no import's place and no line's wrapping depends on the names.
SHORTEST_NAMES = pytest.param(
    {"project_name": "Ax", "approval": "commands"},
    id="two-letter-names-sorting-first",
)


@pytest.mark.parametrize("project", [*COMBINATIONS, LONGEST_PACKAGE_NAME, SHORTEST_NAMES], indirect=True)
def test_python_compiles_and_ruff_is_clean(project: BakedProject) -> None:
    for path in project.files():
        if path.suffix == ".py":
            py_compile.compile(str(path), doraise=True)
    lint = project.run(tool("ruff"), "check", "--no-cache", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = project.run(tool("ruff"), "format", "--check", "--diff", "--no-cache", ".")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_answers_reach_the_names_module(project: BakedProject) -> None:
    shared = (project.package / "service.py").read_text() + (project.package / "runs.py").read_text()
    context = project.context
    assert f'TASK_QUEUE = "{context["task_queue"]}"' in shared
    assert f'SANDBOX_PROVIDER = "{context["sandbox_provider_name"]}"' in shared
    assert f"MAX_TURNS = {context['max_turns']}" in shared
    assert f"timedelta(seconds={context['sandbox_activity_timeout_seconds']})" in shared
    # The template's rules and docs know the runtime's default model call timeout.
    runtime_shared = (TEMPLATE / "runtime" / "src" / "sandbox_agent_runtime" / "shared.py").read_text()
    assert f"MODEL_ACTIVITY_TIMEOUT = timedelta(seconds={DEFAULT_MODEL_ACTIVITY_TIMEOUT})" in runtime_shared
    assert f"timedelta(seconds={context['workflow_execution_timeout_seconds']})" in shared
    pyproject = project.text("pyproject.toml")
    assert f'requires-python = ">={context["python_version"]}"' in pyproject


INJECTION = {
    "project_name": '{% raw %}Évil "Agent" \\ {{ x }}\'s{% endraw %}',
    "description": '{% raw %}"""; import os; os.system("echo pwned")  # {{ }} \\{% endraw %}',
    "sandbox_backend": "local",
}


def test_quotes_backslashes_unicode_and_braces_cannot_inject(bake) -> None:
    project: BakedProject = bake(INJECTION)
    for path in project.files():
        if path.suffix == ".py":
            py_compile.compile(str(path), doraise=True)
    # The values arrive intact, as data.
    found = project.run(
        "python3",
        "-c",
        "import ast, sys, tomllib;"
        "init = ast.parse(open(sys.argv[1]).read());"
        "print(ast.get_docstring(init));"
        "print(tomllib.load(open('pyproject.toml', 'rb'))['project']['description'])",
        str(project.package / "__init__.py"),
    )
    assert found.returncode == 0, found.stderr
    assert 'Évil "Agent" \\ {{ x }}\'s' in found.stdout
    assert 'import os; os.system("echo pwned")  # {{ }} \\' in found.stdout
    assert (
        "pwned"
        not in project.run(
            "python3", "-c", f"import runpy; runpy.run_path({str(project.package / '__init__.py')!r})"
        ).stdout
    )


def test_keeps_tests_only_for_the_chosen_features(project: BakedProject) -> None:
    tests = {p.name for p in (project.path / "tests").glob("test_*.py")}
    assert {"test_agent_workflow.py", "test_configuration.py", "test_live.py"} <= tests
    # Each backend's module, routing, secrets and approvals are the runtime's
    # tests (runtime/tests/remote/), proven once.
    assert not {"test_providers.py", "test_secrets.py", "test_approvals.py", "test_daytona.py"} & tests
    # Two worker processes as two hosts, where a sandbox can live on a
    # worker's host; affinity itself, durability, long runs, versioning,
    # metrics and the starter are the runtime's tests.
    host_bound = bool(project.derived.host_bound_backends)
    assert ("test_affinity_processes.py" in tests) == host_bound
    assert ("test_remote_sandboxes.py" in tests) != host_bound
    assert not {"test_affinity.py", "test_durability.py", "test_long_runs.py", "test_versioning.py"} & tests
    assert not {"test_metrics.py", "test_starter.py"} & tests
    # The tests' helpers are the runtime's (sandbox_agent_runtime.testing: its
    # stand-in worker for remote backends among them), not the project's.
    helpers = {"support.py", "processes.py", "stand_in_worker.py", "approver.py", "long_workflow.py"}
    assert not helpers & {p.name for p in (project.path / "tests").glob("*.py")}
    assert "pytest_plugins = [PYTEST_PLUGIN]" in project.text("tests/conftest.py")


def test_renders_approval_code_only_when_a_person_approves(project: BakedProject) -> None:
    approval = project.context["approval"]
    assert (project.path / "docs" / "approvals.md").exists() == (approval != "none")
    mentions = [
        path.relative_to(project.path)
        for path in [*project.package.rglob("*.py"), *(project.path / "tests").glob("*.py")]
        if "approv" in path.read_text().lower()
    ]
    assert bool(mentions) == (approval != "none"), mentions
    # Each project replays the recorded runs its own workflow makes: with a
    # person's decisions or without, with the step that asks where a
    # sandbox lives or (remote backends alone) without.
    histories = {path.name.partition(".")[0] for path in (project.path / "tests" / "histories").glob("*.json")}
    kind = "scripted-chain" if approval == "none" else "approved-chain"
    assert histories == {kind if project.derived.host_bound_backends else f"remote-{kind}"}
    edits_wait = "Filesystem(configure_tools=wait_for_writes)" in (project.package / "agent.py").read_text()
    assert edits_wait == (approval == "commands_and_writes")


def test_env_example_lists_what_the_worker_reads(project: BakedProject) -> None:
    example = project.text(".env.example")
    assert "OPENAI_API_KEY=" in example
    assert "# OPENAI_AGENTS_DISABLE_TRACING=1" in example
    chosen = project.derived.backends
    assert ("DAYTONA_API_KEY=" in example) == ("daytona" in chosen)
    assert ("E2B_API_KEY=" in example) == ("e2b" in chosen)
    assert ("MODAL_TOKEN_ID=" in example) == ("modal" in chosen)
    assert ("RUNLOOP_API_KEY=" in example) == ("runloop" in chosen)
    assert ("VERCEL_OIDC_TOKEN=" in example) == ("vercel" in chosen)
    assert ("BL_API_KEY=" in example) == ("blaxel" in chosen)
    assert ("CLOUDFLARE_SANDBOX_WORKER_URL=" in example) == ("cloudflare" in chosen)
    assert ("# DOCKER_HOST=" in example) == ("docker" in chosen)
    assert ("# DOCKER_ENGINE_SHARED=" in example) == ("docker" in chosen)
    assert ("# WORKER_HOST_ID=" in example) == bool(project.derived.host_bound_backends)
    assert ("# APPROVERS=" in example) == (project.context["approval"] != "none")
    # And every other setting the runtime declares for every worker, as the
    # runtime's data says (runtime/docs/settings.json, made from its declarations).
    declared = json.loads((TEMPLATE / "runtime" / "docs" / "settings.json").read_text())
    for setting in declared:
        if "worker" in setting["readers"] and not setting["when"]:
            assert f"\n# {setting['name']}=" in example, setting["name"]
    for name in project.derived.secret_env_vars:
        assert f"\n{name}=" in example


# Odd but accepted spellings of the list answers, each beside the tidy one.
ODD_LIST_SPELLINGS = [
    pytest.param(
        {"additional_sandbox_backends": ",", "sandbox_secret_env_vars": " , "}, {}, id="only-commas-and-spaces"
    ),
    pytest.param(
        {
            "sandbox_backend": "e2b",
            "additional_sandbox_backends": ",daytona ,, local ",
            "sandbox_secret_env_vars": "GITHUB_TOKEN,,\tNPM_TOKEN\n",
        },
        {
            "sandbox_backend": "e2b",
            "additional_sandbox_backends": "daytona, local",
            "sandbox_secret_env_vars": "GITHUB_TOKEN, NPM_TOKEN",
        },
        id="stray-commas-and-spaces",
    ),
]


@pytest.mark.parametrize(("odd", "tidy"), ODD_LIST_SPELLINGS)
def test_blank_items_and_spaces_in_list_answers_change_nothing(bake, odd, tidy) -> None:
    odd_project, tidy_project = bake(odd), bake(tidy)
    files = [path.relative_to(tidy_project.path) for path in tidy_project.files()]
    assert [path.relative_to(odd_project.path) for path in odd_project.files()] == files
    for relative in files:
        assert (odd_project.path / relative).read_bytes() == (tidy_project.path / relative).read_bytes(), relative


@pytest.mark.parametrize(("approval", "run"), [("none", 3600), ("commands", 86400)])
def test_a_run_may_last_an_hour_or_with_approvals_a_day_by_default(bake, approval, run) -> None:
    # The sandbox lifetimes of E2B, Modal, Runloop, Vercel and Blaxel follow
    # it by default: the worker's settings (E2B_SANDBOX_TIMEOUT_SECONDS, ...).
    project: BakedProject = bake({"sandbox_backend": "e2b", "approval": approval})
    assert f"timedelta(seconds={run})" in (project.package / "runs.py").read_text()


def test_a_default_projects_readme_stays_under_200_lines(bake) -> None:
    # Deploying, operating and extending belong in the project's docs/.
    project: BakedProject = bake({})
    assert len(project.text("README.md").splitlines()) < 200
