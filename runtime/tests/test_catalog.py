"""The catalog of backends (backends/catalog.toml) is what the backends are:
a module, an extra and an SDK for each entry, every option it declares read
by its module's sandbox options, its lifetime the one its provider is given,
and its sandboxes on the worker's host where it says so."""

import dataclasses
import importlib.util
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_agent_runtime import service
from sandbox_agent_runtime.backends import (
    RATE,
    Option,
    backend_module,
    sandbox_usd_per_hour,
    use_options,
)
from sandbox_agent_runtime.catalog import BACKENDS, CATALOG
from sandbox_agent_runtime.testing.support import SETTINGS

RUNTIME = Path(__file__).parents[1]
# A value each text option takes (an image, a name, a region, an app).
SOME_TEXT = "catalog-check1"


@pytest.fixture(autouse=True)
def defaults_after() -> Iterator[None]:
    yield
    use_options({})


def test_each_backend_of_the_catalog_has_its_module_its_extra_and_its_sdk() -> None:
    modules = {path.stem for path in (RUNTIME / "src/sandbox_agent_runtime/backends").glob("*.py")}
    assert modules - {"__init__"} == set(BACKENDS)
    assert service.BACKENDS == BACKENDS
    project = tomllib.loads((RUNTIME / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    for name, declared in CATALOG.items():
        if declared.extra:
            wanted = f"openai-agents[{declared.extra}]"
            assert any(wanted in item for item in extras[declared.extra])
        for module in declared.sdk_modules:
            assert importlib.util.find_spec(module) is not None, (name, module)
        # The credentials of each set are variables, and only a backend
        # without credentials leaves the worker nothing to check.
        assert all(all(v.isupper() for v in names) for names in declared.required_environment)


def another_value(option: Option) -> int | bool | str:
    """A value of ``option`` other than its default, as its variable may say it."""
    default = option.default_value()
    if option.kind == "number":
        return option.low if default != option.low else option.high
    if option.kind == "yes_no":
        return not default
    if option.kind == "choice":
        return next(choice for choice in option.choices if choice != default)
    return option.parse(SOME_TEXT)


def sent(name: str, chosen: dict[str, Any]) -> Any:
    """What a run of backend ``name`` is given with the options ``chosen``:
    the options it is sent with, as data, and the default image of a Modal
    worker's client (which Modal takes there, not in a run's options)."""
    use_options({name: chosen})
    options = backend_module(name).sandbox_options()
    dump = getattr(options, "model_dump", None)
    sent = dump(mode="json") if dump is not None else dataclasses.asdict(options)
    if name == "modal":
        worker = dataclasses.replace(SETTINGS, backend_options={"modal": chosen})
        client = backend_module(name).sandbox_client(worker)
        sent["worker's image"] = repr(vars(client)["_default_image"])
    return sent


@pytest.mark.parametrize("name", BACKENDS)
def test_every_option_the_catalog_declares_changes_what_a_run_is_sent(name: str) -> None:
    module = backend_module(name)
    chosen = {key: option.default_value() for key, option in module.OPTIONS.items()}
    defaults = sent(name, chosen)
    for key, option in module.OPTIONS.items():
        if key == RATE:
            continue  # not sent: what the run is charged (the next test)
        assert sent(name, {**chosen, key: another_value(option)}) != defaults, (name, key)


@pytest.mark.parametrize("name", BACKENDS)
def test_every_backends_rate_is_what_its_sandboxes_time_is_charged_at_and_has_its_source(
    name: str,
) -> None:
    module = backend_module(name)
    declared = CATALOG[name].options[RATE]
    chosen = {key: option.default_value() for key, option in module.OPTIONS.items()}
    # A rate other than 0 is a provider's published one, and names where.
    assert float(declared["default"]) == 0.0 or declared["source"].startswith("https://"), name
    assert float(declared["default"]) > 0.0 or name not in ("e2b", "daytona"), name
    assert float(declared["default"]) == 0.0 or name not in ("local", "docker"), name
    try:
        assert sandbox_usd_per_hour(name) == float(declared["default"])
        use_options({name: {**chosen, RATE: module.OPTIONS[RATE].parse("0.25")}})
        assert sandbox_usd_per_hour(name) == 0.25
    finally:
        use_options({})


@pytest.mark.parametrize("name", [name for name in BACKENDS if CATALOG[name].longest_lifetime()])
def test_a_sandboxs_lifetime_is_its_lifetime_option_within_its_providers_longest(name: str) -> None:
    module = backend_module(name)
    [(key, option)] = [(k, o) for k, o in module.OPTIONS.items() if o.outlives_the_run]
    assert option.high == CATALOG[name].longest_lifetime()
    for seconds in (option.low, option.high):
        chosen = {k: o.default_value() for k, o in module.OPTIONS.items()}
        use_options({name: {**chosen, key: seconds}})
        assert module.sandbox_lifetime_seconds() == seconds  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", BACKENDS)
def test_a_sandbox_lives_on_the_workers_host_where_the_catalog_says(name: str) -> None:
    module = backend_module(name)
    assert module.host_bound(SETTINGS) == CATALOG[name].host_bound
    assert (name in service.HOST_BOUND) == CATALOG[name].host_bound
    # An engine every worker reaches holds no worker's containers; nothing
    # else is shared that way.
    shared = dataclasses.replace(SETTINGS, docker_engine_shared=True)
    assert module.host_bound(shared) == (CATALOG[name].host_bound and name != "docker")
