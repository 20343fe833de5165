"""A render says of its backends what the runtime's catalog of backends
(runtime/src/sandbox_agent_runtime/backends/catalog.toml) declares: their
credentials in .env.example, the Kubernetes secret's example and the
evaluations' CI, their options with their defaults and bounds in
.env.example and docs/configuration.md, where the agent's shell runs in the
README; nothing of the backends it leaves out. The template's rules read the
catalog too (hosts, SDK modules, lifetimes)."""

import json
import re
import tomllib
from pathlib import Path

import pytest

import local_extensions
from tests.baked import BakedProject

ROOT = Path(__file__).parents[1]
CATALOG = tomllib.loads((ROOT / "runtime/src/sandbox_agent_runtime/backends/catalog.toml").read_text())["backends"]

RENDERS = [
    pytest.param({}, id="local"),
    pytest.param(
        {"sandbox_backend": "daytona", "additional_sandbox_backends": "runloop, vercel"},
        id="daytona-runloop-vercel",
    ),
    pytest.param({"sandbox_backend": "docker", "workflow_execution_timeout_seconds": "7200"}, id="docker-two-hours"),
    pytest.param(
        {
            "sandbox_backend": "modal",
            "additional_sandbox_backends": "e2b, blaxel, cloudflare, local",
            "approval": "commands",
            "project_slug": "lab-agent",
        },
        id="modal-e2b-blaxel-cloudflare-local-approvals",
    ),
]


def variables(backend: str) -> set[str]:
    """Every environment variable the catalog names for ``backend``."""
    entry = CATALOG[backend]
    return (
        {name for names in entry["required_environment"] for name in names}
        | {variable["name"] for variable in entry.get("environment", [])}
        | {f"{backend.upper()}_SANDBOX_{key.upper()}" for key in entry.get("options", {})}
    )


def default_of(option: dict, project: BakedProject) -> str:
    """An option's default as its variable says it, from the catalog and
    the answers."""
    if "default" in option:
        default = option["default"]
        return str(default).lower() if isinstance(default, bool) else str(default)
    if option["kind"] == "choice":
        return option["choices"][0]
    if option.get("default_is_service_name"):
        return project.context["project_slug"]
    if option["kind"] == "number":
        return str(min(int(project.context["workflow_execution_timeout_seconds"]), option["high"]))
    return ""  # an image or a name: the provider's own


@pytest.fixture(scope="module", params=RENDERS)
def rendered(request: pytest.FixtureRequest, bake) -> BakedProject:
    return bake(request.param)


def test_the_env_example_has_each_chosen_backends_credentials_variables_and_options(rendered) -> None:
    example = rendered.text(".env.example")
    lines = example.splitlines()
    chosen = rendered.derived.backends
    for backend, entry in CATALOG.items():
        if backend not in chosen:
            for name in variables(backend):
                assert not re.search(rf"\b{name}=", example), (backend, name)
            continue
        first, *others = entry["required_environment"] or [[]]
        for name in first:
            assert f"{name}=" in lines, name
        for name in (name for names in others for name in names):
            assert f"# {name}=" in lines, name
        for variable in entry.get("environment", []):
            assert f"# {variable['name']}={variable.get('example', '')}" in lines, variable
        for key, option in entry.get("options", {}).items():
            assert f"# {backend.upper()}_SANDBOX_{key.upper()}={default_of(option, rendered)}" in lines, key
        if entry["credentials_url"]:
            assert entry["credentials_url"] in example


def test_the_secret_example_holds_the_credentials_of_the_chosen_backends_alone(rendered) -> None:
    example = rendered.text("deploy/k8s/secret.example.env")
    keys = {line.partition("=")[0] for line in example.splitlines() if line and not line.startswith("#")}
    expected = {"OPENAI_API_KEY", "TEMPORAL_API_KEY", *rendered.derived.secret_env_vars}
    for backend in rendered.derived.backends:
        entry = CATALOG[backend]
        if entry["required_environment"]:
            expected |= set(entry["required_environment"][0])
            assert entry["credentials_url"] in example
        expected |= {variable["name"] for variable in entry.get("environment", []) if variable.get("secret")}
    assert keys == expected


def test_the_evaluations_ci_is_given_each_chosen_backends_lasting_credentials(rendered) -> None:
    workflow = rendered.text(".github/workflows/evals.yml")
    given = set(re.findall(r"^ +([A-Z][A-Z0-9_]*): \$\{\{ secrets\.", workflow, re.MULTILINE))
    for backend, entry in CATALOG.items():
        if not entry["required_environment"]:
            continue
        lasting = set(entry.get("ci_environment", entry["required_environment"][0]))
        assert (lasting <= given) == (backend in rendered.derived.backends), backend


def test_the_readme_and_the_guide_say_what_the_catalog_says_of_the_chosen_backends(rendered) -> None:
    readme = rendered.text("README.md")
    assert CATALOG[rendered.context["sandbox_backend"]]["where"] in readme
    guide = rendered.text("docs/configuration.md")
    settings = guide.partition("\n## Settings\n")[2].partition("\n## ")[0]
    rows = dict(re.findall(r"^\| `([A-Z0-9_]+)` \| (.*) \|$", settings, re.MULTILINE))
    credentials = guide.partition("\n## Credentials and connections\n")[2].partition("\n## ")[0]
    for backend, entry in CATALOG.items():
        options = {
            f"{backend.upper()}_SANDBOX_{key.upper()}": option for key, option in entry.get("options", {}).items()
        }
        # A backend's options, their defaults and bounds, are the runtime's
        # reference (docs/settings.md, made from the catalog): the guide links
        # to it and copies none, so a runtime that adds one cannot make it wrong.
        assert not set(options) & set(rows), backend
        if backend not in rendered.derived.backends:
            assert not any(name in credentials for name in variables(backend)), backend
            continue
        for name in (name for names in entry["required_environment"] for name in names):
            assert f"`{name}`" in credentials, name


def test_the_template_reads_its_facts_of_backends_from_the_catalog() -> None:
    assert set(local_extensions.BACKENDS) == set(CATALOG)
    assert set(json.loads((ROOT / "cookiecutter.json").read_text())["sandbox_backend"]) == set(CATALOG)
    assert local_extensions.HOST_BOUND == tuple(name for name, entry in CATALOG.items() if entry["host_bound"])
    for backend, entry in CATALOG.items():
        lifetimes = [option["high"] for option in entry.get("options", {}).values() if option.get("lifetime")]
        assert local_extensions.LONGEST_SANDBOX.get(backend) == (min(lifetimes) if lifetimes else None)
        assert local_extensions.SDK_MODULES[backend] == entry["sdk_modules"]


def test_the_project_installs_the_runtime_with_each_chosen_backends_extra(rendered) -> None:
    dependencies = tomllib.loads(rendered.text("pyproject.toml"))["project"]["dependencies"]
    [runtime] = [item for item in dependencies if item.startswith("sandbox-agent-runtime[")]
    extras = set(runtime.partition("[")[2].partition("]")[0].split(","))
    chosen = {CATALOG[backend]["extra"] for backend in rendered.derived.backends} - {""}
    assert extras == {"api", "evals"} | chosen
