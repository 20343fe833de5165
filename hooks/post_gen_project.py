"""Remove what the chosen answers do not need.

The template carries one module per sandbox backend; the generated service
keeps only the one it uses, so it reads as if written for that backend alone.
Runs offline: it only deletes files.
"""

from pathlib import Path

BACKEND = {{ cookiecutter.sandbox_backend | tojson }}
PACKAGE = Path("src") / {{ cookiecutter.package_name | tojson }}
LICENSE = {{ cookiecutter.license | tojson }}


def remove_unused_backends(package: Path, backend: str) -> None:
    for module in (package / "backends").glob("*.py"):
        if module.stem not in ("__init__", backend):
            module.unlink()


def remove_license_file(license_name: str) -> None:
    # "none" means all rights reserved: no license text at all.
    if license_name == "none":
        Path("LICENSE").unlink()


if __name__ == "__main__":
    remove_unused_backends(PACKAGE, BACKEND)
    remove_license_file(LICENSE)
