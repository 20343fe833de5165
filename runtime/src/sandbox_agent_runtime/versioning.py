"""Worker Versioning: which build of the service a worker runs, and which
build each run stays on.

Off unless both ``TEMPORAL_DEPLOYMENT_NAME`` and ``TEMPORAL_WORKER_BUILD_ID``
are set (the names Temporal's Kubernetes worker controller injects). Then
each run stays on the build it started on (``PINNED``), so a change to the
workflow's code reaches new runs once its build is made current and never
replays into a run the old code started; a chain's next run starts on the
current build, so a long run picks up a deploy within one run of its chain
(and a new build must read what the old one carried). A render's
docs/versioning.md says how to deploy.
"""

from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import WorkerDeploymentConfig

# How a run of the workflow follows deploys: it stays on its build to the
# end. It is the versioned worker's default rather than the workflow's own
# setting (@workflow.defn(versioning_behavior=...)), which an unversioned
# worker's server refuses.
RUN_BEHAVIOR = VersioningBehavior.PINNED


def deployment_config(version: WorkerDeploymentVersion) -> WorkerDeploymentConfig:
    """The worker options that make it poll as ``version``."""
    return WorkerDeploymentConfig(
        version=version, use_worker_versioning=True, default_versioning_behavior=RUN_BEHAVIOR
    )


def reporting_only(version: WorkerDeploymentVersion) -> WorkerDeploymentConfig:
    """The worker options that make a poller report ``version`` but poll
    unversioned (the model calls' queue)."""
    return WorkerDeploymentConfig(version=version, use_worker_versioning=False)


def version_label(version: WorkerDeploymentVersion | None) -> str | None:
    """How people and metrics name a version: ``<deployment>.<build id>``."""
    return None if version is None else f"{version.deployment_name}.{version.build_id}"
