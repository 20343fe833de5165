"""The starter's settings (the API and the evaluations read them too)."""

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sandbox_agent_runtime import encryption
from sandbox_agent_runtime import object_store as stores
from sandbox_agent_runtime import repos as repositories
from sandbox_agent_runtime.approvers import default_key_file
from sandbox_agent_runtime.callbacks import NO_CALLBACKS, CallbackPolicy
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.settings.declared import read_by
from sandbox_agent_runtime.settings.reading import (
    callback_policy,
    encryption_keys,
    number,
    object_store,
    refused,
    repo_policy,
    url,
)


def starter_variables() -> tuple[str, ...]:
    """Every variable the starter of this service reads itself."""
    return read_by("starter")


@dataclass(frozen=True)
class StarterSettings:
    """Everything the starter takes from its environment, parsed."""

    # TEMPORAL_UI_URL: the base of the Web UI links it prints; None: the
    # Temporal Cloud UI for a Cloud address, else the dev server's.
    ui_url: str | None
    # OBJECT_STORE_URL: the worker's object store, which the starter needs
    # too; None: none.
    object_store: stores.ObjectStore | None
    # PAYLOAD_ENCRYPTION_KEYS: the worker's keys; None: none.
    keys: encryption.Keys | None
    # APPROVER_KEY_FILE: the approver's private key; read only
    # with approvals (without, the default, which nothing reads).
    approver_key_file: Path
    # REPO_ALLOWED_*: the repositories a run may be given.
    repos: repositories.RepoPolicy = repositories.DEFAULT_POLICY
    # CALLBACK_HOSTS: the servers a run's callback may call.
    callbacks: CallbackPolicy = NO_CALLBACKS
    # SCHEDULE_MIN_INTERVAL and SCHEDULES_PER_CALLER: a schedule's bounds.
    schedule_min_interval: int = 60
    schedules_per_caller: int = 20


def starter_settings(environ: Mapping[str, str] = os.environ) -> StarterSettings:
    """The starter's settings; ``BadSetting`` for the first one it cannot use."""
    key_file = environ.get("APPROVER_KEY_FILE") if current().approvals else None
    if key_file is not None and (not key_file.strip() or not key_file.isprintable()):
        raise refused(
            "APPROVER_KEY_FILE",
            key_file,
            f"the path of a file, or leave it unset for {default_key_file()}",
        )
    return StarterSettings(
        ui_url=url(environ, "TEMPORAL_UI_URL"),
        object_store=object_store(environ),
        keys=encryption_keys(environ),
        approver_key_file=Path(key_file or default_key_file()).expanduser(),
        repos=repo_policy(environ),
        callbacks=callback_policy(environ),
        schedule_min_interval=number(environ, "SCHEDULE_MIN_INTERVAL"),
        schedules_per_caller=number(environ, "SCHEDULES_PER_CALLER"),
    )
