"""The catalog of sandbox backends (backends/catalog.toml), where each
backend's name, extra, credentials, options and host are declared once.

It is data rather than code so that the template reads it too, where the
runtime is not installed (its local_extensions.py reads the file itself).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any


@dataclass(frozen=True)
class Declared:
    """One backend as the catalog declares it (catalog.toml says what each
    field means)."""

    name: str
    title: str
    extra: str
    sdk_modules: tuple[str, ...]
    host_bound: bool
    credentials_url: str
    required_environment: tuple[tuple[str, ...], ...]
    # Its options' tables, by key, as the catalog has them
    # (backends.declared_options() makes them options).
    options: dict[str, dict[str, Any]]

    def longest_lifetime(self) -> int | None:
        """The longest its provider lets a sandbox live (the ``high`` of its
        lifetime option): a run of a service with it lasts no longer. None:
        no such limit."""
        highs = [int(table["high"]) for table in self.options.values() if table.get("lifetime")]
        return min(highs) if highs else None


def _read() -> tuple[dict[str, Declared], dict[str, dict[str, str]]]:
    text = (
        resources.files(__name__.rpartition(".")[0])
        .joinpath("backends", "catalog.toml")
        .read_text()
    )
    catalog = tomllib.loads(text)
    backends = {
        name: Declared(
            name=name,
            title=entry["title"],
            extra=entry["extra"],
            sdk_modules=tuple(entry["sdk_modules"]),
            host_bound=entry["host_bound"],
            credentials_url=entry["credentials_url"],
            required_environment=tuple(tuple(names) for names in entry["required_environment"]),
            options=entry.get("options", {}),
        )
        for name, entry in catalog["backends"].items()
    }
    return backends, catalog["kinds"]


# Every backend, by the name a service gives it, in the catalog's order; and
# the forms of text an option may take by its kind ("image", "name": a
# pattern, and what it allows in words).
CATALOG, KINDS = _read()
BACKENDS: tuple[str, ...] = tuple(CATALOG)
