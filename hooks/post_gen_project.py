"""Remove what the chosen answers do not need.

The template carries one module per sandbox backend; the generated service
keeps only those it uses (the primary backend and any additional ones), so it
reads as if written for them alone. Tests of features that were not chosen go
too. Runs offline: it only deletes files.
"""

from pathlib import Path

# As every template file reads the answers (local_extensions.py).
BACKENDS = {{ cookiecutter | backends | tojson }}
REMOTE_BACKENDS = {{ cookiecutter | remote_backends | tojson }}
HOST_BOUND_BACKENDS = {{ cookiecutter | host_bound_backends | tojson }}
HAS_SECRETS = bool({{ cookiecutter | secret_env_vars | tojson }})
PACKAGE = Path("src") / {{ cookiecutter.package_name | tojson }}
TESTS = Path("tests")
LICENSE = {{ cookiecutter.license | tojson }}
APPROVAL = {{ cookiecutter.approval | tojson }}


def remove_unused_backends(package: Path, tests: Path, backends: list[str]) -> None:
    for module in (package / "backends").glob("*.py"):
        if module.stem not in ("__init__", *backends):
            module.unlink()
            # A backend's own tests (tests/test_docker.py, say) go with it.
            (tests / f"test_{module.stem}.py").unlink(missing_ok=True)


def remove_unused_tests(
    tests: Path, backends: list[str], remote_backends: list[str], host_bound_backends: list[str], has_secrets: bool
) -> None:
    if len(backends) == 1:
        (tests / "test_providers.py").unlink()
    if not has_secrets:
        (tests / "test_secrets.py").unlink()
    # Only a service with a remote backend needs, for its process test, a
    # worker with a local sandbox standing in for the remote one.
    if not remote_backends:
        (tests / "stand_in_worker.py").unlink()
    # Sandbox affinity is tested with the backends whose sandbox can live on a
    # worker's host; a remote sandbox's moves are tested in test_durability.py.
    if not host_bound_backends:
        (tests / "test_affinity.py").unlink()
        (tests / "test_affinity_processes.py").unlink()


def remove_approvals(package: Path, tests: Path, approval: str) -> None:
    # Without approvals, no approval code at all. The recorded histories a
    # project replays are the ones of its own kind (scripts/record_histories.py).
    if approval == "none":
        (package / "approvals.py").unlink()
        (tests / "test_approvals.py").unlink()
        (Path("docs") / "approvals.md").unlink()
    kept = "scripted-chain" if approval == "none" else "approved-chain"
    for history in (tests / "histories").glob("*.json"):
        if not history.name.startswith(f"{kept}."):
            history.unlink()


def remove_license_file(license_name: str) -> None:
    # "none" means all rights reserved: no license text at all.
    if license_name == "none":
        Path("LICENSE").unlink()


if __name__ == "__main__":
    remove_unused_backends(PACKAGE, TESTS, BACKENDS)
    remove_unused_tests(TESTS, BACKENDS, REMOTE_BACKENDS, HOST_BOUND_BACKENDS, HAS_SECRETS)
    remove_approvals(PACKAGE, TESTS, APPROVAL)
    remove_license_file(LICENSE)
