"""Worker Versioning: which build of the service a worker runs, and which
build each run stays on.

Off unless both ``TEMPORAL_DEPLOYMENT_NAME`` and ``TEMPORAL_WORKER_BUILD_ID``
are set (the names Temporal's Kubernetes worker controller injects). Then the
worker polls as that Worker Deployment Version, and Temporal sends each run
only to workers of the build it started on (the workflow is ``PINNED``): a
change to the workflow's code reaches new runs once its build is made current
(``temporal worker deployment set-current-version``), and never replays into
a run the old code started. A chain's next run starts on the current build
(``AUTO_UPGRADE`` at continue-as-new: workflow.py), so a long run picks up a
deploy within one run of its chain. docs/versioning.md says how to deploy.

What one run hands the next (chain.Carried) is read by whichever build runs
the next run: a new build must read what the old one wrote.
"""

import re
from collections.abc import Mapping

from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import WorkerDeploymentConfig

DEPLOYMENT_NAME = "TEMPORAL_DEPLOYMENT_NAME"
BUILD_ID = "TEMPORAL_WORKER_BUILD_ID"

# What Temporal accepts in either: no whitespace or control characters, and
# no "." in a deployment name (the server joins the two with one).
_NAME = re.compile(r"[^\s.]{1,255}")
_BUILD = re.compile(r"[^\s]{1,255}")

# How a run of the workflow follows deploys: it stays on its build to the
# end. It is the versioned worker's default rather than the workflow's own
# setting (@workflow.defn(versioning_behavior=...)), which an unversioned
# worker's server refuses.
RUN_BEHAVIOR = VersioningBehavior.PINNED


class BadVersioning(Exception):
    """The worker's versioning settings cannot be used."""


def worker_version(environ: Mapping[str, str]) -> WorkerDeploymentVersion | None:
    """The Worker Deployment Version the worker polls as, or None when
    versioning is off (neither variable set)."""
    name, build = (environ.get(variable, "") for variable in (DEPLOYMENT_NAME, BUILD_ID))
    if not name and not build:
        return None
    if not name or not build:
        given, missing = (DEPLOYMENT_NAME, BUILD_ID) if name else (BUILD_ID, DEPLOYMENT_NAME)
        raise BadVersioning(
            f"{given}={environ[given]!r} is set but {missing} is not: set both "
            "(a versioned worker: docs/versioning.md) or neither (versioning off)."
        )
    for variable, value, allowed, rule in (
        (DEPLOYMENT_NAME, name, _NAME, "no spaces or dots"),
        (BUILD_ID, build, _BUILD, "no spaces"),
    ):
        if not allowed.fullmatch(value):
            raise BadVersioning(
                f"{variable}={value!r} is not a valid name: use 1 to 255 characters, {rule}."
            )
    return WorkerDeploymentVersion(deployment_name=name, build_id=build)


def deployment_config(version: WorkerDeploymentVersion) -> WorkerDeploymentConfig:
    """The worker options that make it poll as ``version``."""
    return WorkerDeploymentConfig(
        version=version, use_worker_versioning=True, default_versioning_behavior=RUN_BEHAVIOR
    )


def version_label(version: WorkerDeploymentVersion | None) -> str | None:
    """How people and metrics name a version: ``<deployment>.<build id>``."""
    return None if version is None else f"{version.deployment_name}.{version.build_id}"
