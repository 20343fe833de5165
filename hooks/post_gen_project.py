"""Remove what the chosen answers do not need.

The template carries one module per sandbox backend; the generated service
keeps only the one it uses, so it reads as if written for that backend alone.
Runs offline: it only deletes files.
"""

from pathlib import Path

BACKEND = {{ cookiecutter.sandbox_backend | tojson }}
PACKAGE = Path("src") / {{ cookiecutter.package_name | tojson }}


def remove_unused_backends(package: Path, backend: str) -> None:
    for module in (package / "backends").glob("*.py"):
        if module.stem not in ("__init__", backend):
            module.unlink()


def remove_stand_in_worker(tests: Path, backend: str) -> None:
    # Only a remote backend's process test needs a worker with a local sandbox
    # standing in for the remote one.
    if backend == "local":
        (tests / "stand_in_worker.py").unlink()


if __name__ == "__main__":
    remove_unused_backends(PACKAGE, BACKEND)
    remove_stand_in_worker(Path("tests"), BACKEND)
