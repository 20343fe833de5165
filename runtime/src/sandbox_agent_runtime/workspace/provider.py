"""The workspace's operations as activities: ``WorkspaceProvider``, the SDK's
provider of a sandbox backend with the workspace's own operations beside its
own (place, collect, snapshot, restore and forget), each run with the
worker's variables a session's manifest names resolvable, as the SDK's own
are."""

import asyncio
import functools
import hashlib
import tempfile
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from agents.sandbox.session.sandbox_client import BaseSandboxClient
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.openai_agents import SandboxClientProvider
from temporalio.openai_agents._temporal_worker_env_ref import AllowAllWorkerEnvVars

# Not exported by the plugin: the scope in which its operations resolve the
# worker's variables a session's manifest names (TemporalWorkerEnvValue).
from temporalio.openai_agents.sandbox._temporal_worker_env_value import (
    _resolvable_worker_env_vars_scope,
)

from sandbox_agent_runtime import archives
from sandbox_agent_runtime.repos import DEFAULT_POLICY, RepoPolicy
from sandbox_agent_runtime.run_request import CheckResult, Outputs, Repo
from sandbox_agent_runtime.shared import (
    CHECK,
    COLLECT,
    FORGET,
    GIT_TIMEOUT,
    INLINE_FILES_LIMIT,
    LONGEST_LISTING,
    MEMORY_LOAD,
    MEMORY_SAVE,
    MOST_FILES,
    PLACE,
    RESTORE,
    SESSION_IDLE_TIMEOUT,
    SESSION_LIFETIME,
    SNAPSHOT,
    STORED_FILES_LIMIT,
)
from sandbox_agent_runtime.workspace import memories
from sandbox_agent_runtime.workspace.census import (
    LARGEST_WORKSPACE,
    Census,
    census,
    grown_over,
    outputs_over,
    too_large,
    too_many,
    tree_size,
)
from sandbox_agent_runtime.workspace.checks import check as make_check
from sandbox_agent_runtime.workspace.git import (
    clone,
    clone_dir,
    patch_of,
    plain_tar,
    repo_archive,
)
from sandbox_agent_runtime.workspace.requests import (
    SNAPSHOT_FORMAT,
    CheckArgs,
    CollectArgs,
    ForgetArgs,
    MemoryArgs,
    PlaceArgs,
    Placed,
    Remembered,
    RestoreArgs,
    Restored,
    Snapshot,
    SnapshotArgs,
)
from sandbox_agent_runtime.workspace.snapshots import (
    SnapshotStore,
    forget,
    gzipped,
    members,
    record_snapshot,
    snapshot_context,
    verified,
)

# An operation's argument and result (WorkspaceProvider's ``scoped``).
A = TypeVar("A")
R = TypeVar("R")


class WorkspaceProvider(SandboxClientProvider):
    """The SDK's provider, with the workspace's operations beside its own,
    registered under the provider's name:

    - ``<provider>-sandbox_workspace_place``, before the agent's first turn:
      the run's inputs and its git repository (cloned on the worker, at its
      ref: the sandbox needs neither git nor a network) go into the
      workspace, beside the agent's ``default_manifest``; it returns a
      checksum of every file, the baseline of the outputs. Placing again (a
      retry) gives the same workspace.
    - ``<provider>-sandbox_workspace_collect``, after the answer: every file
      new or changed since the baseline, in one archive, and for a
      repository its changes as a patch ``git apply`` takes on the ref.
      Links, devices, FIFOs and names that climb out of the workspace are
      left out, saying so.
    - ``<provider>-sandbox_workspace_snapshot``, after each answer and before
      a run continues as new: the whole workspace, gzipped, into the
      ``SnapshotStore``; it answers with the worker's SESSION_IDLE_TIMEOUT
      and SESSION_LIFETIME, so the workflow waits by the settings of the
      worker that holds the sandbox, the same on every replay. Each snapshot
      replaces (and deletes) the one before.
    - ``<provider>-sandbox_workspace_restore``, in a fresh sandbox: the
      snapshot's files, in place of what the sandbox started with.
    - ``<provider>-sandbox_workspace_forget``: the last snapshot deleted once
      the conversation ends.
    - ``<provider>-sandbox_workspace_memory_save`` and ``..._memory_load``: a
      caller's memory kept in the object store after each answer, and put
      back in the caller's next conversation (workspace/memories.py).

    Place, collect and snapshot count a workspace's files and bytes in the
    sandbox (one command) and read nothing of one over the limits; then they
    read it as a stream, so the worker's memory is bounded whatever the
    workspace holds. Files travel in the activity's input or result (the
    object store keeps a large one).

    ``has_store``: the worker keeps large payloads in an object store, so a
    run's outputs may weigh STORED_FILES_LIMIT rather than INLINE_FILES_LIMIT.
    ``git_timeout``: the longest one of its git processes may run;
    ``repos``: the repositories it clones (REPO_ALLOWED_*)."""

    def __init__(
        self,
        name: str,
        client: BaseSandboxClient[Any],
        has_store: bool,
        snapshots: SnapshotStore | None = None,
        idle_timeout: timedelta = SESSION_IDLE_TIMEOUT,
        lifetime: timedelta = SESSION_LIFETIME,
        git_timeout: timedelta = GIT_TIMEOUT,
        repos: RepoPolicy = DEFAULT_POLICY,
    ) -> None:
        super().__init__(name, client)
        self.limit = STORED_FILES_LIMIT if has_store else INLINE_FILES_LIMIT
        self.has_store = has_store
        self.snapshots = snapshots
        self.idle_timeout = idle_timeout
        self.lifetime = lifetime
        self.git_timeout = git_timeout
        self.repos = repos

    def _get_activities(
        self, resolvable_worker_env_vars: Collection[str] | AllowAllWorkerEnvVars
    ) -> Sequence[Callable[..., Any]]:
        return [
            *super()._get_activities(resolvable_worker_env_vars),
            *self._workspace_activities(resolvable_worker_env_vars),
        ]

    def _workspace_activities(
        self, resolvable_worker_env_vars: Collection[str] | AllowAllWorkerEnvVars
    ) -> list[Callable[..., Any]]:
        def scoped(operation: Callable[[A], Awaitable[R]]) -> Callable[[A], Awaitable[R]]:
            """``operation`` with the worker's variables that a session's
            manifest may name (TemporalWorkerEnvValue: the sandbox's secrets)
            resolvable, as in the SDK's own operations: the census runs a
            command in the session."""

            @functools.wraps(operation)
            async def in_scope(args: A) -> R:
                with _resolvable_worker_env_vars_scope(resolvable_worker_env_vars):
                    return await operation(args)

            return in_scope

        @activity.defn(name=f"{self.name}-{PLACE}")
        @scoped
        async def place(args: PlaceArgs) -> Placed:
            session = await self._session(args)
            try:
                archives_in = [archives.input_archive(item) for item in args.inputs]
            except archives.UnsafeName as e:
                raise ApplicationError(str(e), type="UnsafeInput", non_retryable=True) from e
            for data in archives_in:
                with plain_tar(data) as plain:
                    await session.hydrate_workspace(plain)
            commit = ""
            repo = Census(files=0, size=0)
            if args.repo is not None:
                clone_path, commit = await clone(args.repo, self.git_timeout, self.repos)
                repo = await asyncio.to_thread(tree_size, clone_path)
                if repo.size > LARGEST_WORKSPACE:
                    raise too_large(f"The repository {args.repo.url}", repo.size)
                with await asyncio.to_thread(repo_archive, clone_path, args.repo.name) as tree:
                    await session.hydrate_workspace(tree)
            # Counted before it is read: what the worker holds is bounded.
            held = await census(session)
            if held.size > LARGEST_WORKSPACE:
                raise too_large("The workspace", held.size)
            if held.files - repo.files > MOST_FILES:
                raise too_many(held.files - repo.files)
            skip = {args.repo.name} if args.repo else set()
            workspace = archives.spooled(await session.persist_workspace())
            with workspace:
                files, _ = await asyncio.to_thread(archives.workspace_files, workspace, skip)
            paths = archives.listing_size(files)
            if len(files) > MOST_FILES or paths > LONGEST_LISTING:
                raise too_many(len(files), paths)
            return Placed(
                baseline={path: file.sha256 for path, file in files.items()},
                commit=commit,
                files=held.files,
                size=held.size,
            )

        @activity.defn(name=f"{self.name}-{COLLECT}")
        @scoped
        async def collect(args: CollectArgs) -> Outputs:
            session = await self._session(args)
            # Counted before it is read: what the run added to the workspace
            # (at least what its outputs hold) over the limits is withheld
            # before the worker reads a byte of it.
            held = await census(session)
            placed = Census(files=args.files, size=args.size)
            grown = grown_over(held, placed, self.limit, self.has_store)
            if grown:
                return Outputs(commit=args.commit, withheld=grown)
            skip = {args.repo.name} if args.repo else set()
            workspace = archives.spooled(await session.persist_workspace())
            with workspace:
                files, skipped = await asyncio.to_thread(archives.workspace_files, workspace, skip)
                changed = {
                    path: file
                    for path, file in files.items()
                    if args.baseline.get(path) != file.sha256
                }
                del files
                patch = b""
                if args.repo is not None and args.commit:
                    clone_path = clone_dir(args.repo, args.commit)
                    if not clone_path.exists():
                        clone_path, _ = await clone(
                            Repo(args.repo.url, args.commit, args.repo.name),
                            self.git_timeout,
                            self.repos,
                        )
                    patch, paths, tree, left_out = await patch_of(
                        clone_path, args.commit, workspace, args.repo.name, self.git_timeout
                    )
                    skipped += left_out
                    for path in paths:
                        if path in tree:
                            changed[f"{args.repo.name}/{path}"] = tree[path]
                size = sum(file.size for file in changed.values()) + len(patch)
                paths_size = archives.listing_size(changed)
                why = outputs_over(len(changed), paths_size, size, self.limit, self.has_store)
                if why:
                    # Listed when the list itself may travel.
                    fits = len(changed) <= MOST_FILES and paths_size <= LONGEST_LISTING
                    return Outputs(
                        files=archives.listing(changed) if fits else [],
                        commit=args.commit,
                        skipped=archives.bounded(skipped),
                        withheld=why,
                    )
                archive = (
                    await asyncio.to_thread(archives.output_archive, workspace, set(changed))
                    if changed
                    else b""
                )
            return Outputs(
                files=archives.listing(changed),
                archive=archives.encoded(archive) if archive else "",
                patch=archives.encoded(patch) if patch else "",
                commit=args.commit,
                skipped=archives.bounded(skipped),
            )

        @activity.defn(name=f"{self.name}-{CHECK}")
        @scoped
        async def check(args: CheckArgs) -> list[CheckResult]:
            # The run's own checks on what it left (evaluations), in its sandbox.
            session = await self._session(args)
            root = str(session.state.manifest.root)
            return [await make_check(session, root, each) for each in args.checks]

        @activity.defn(name=f"{self.name}-{SNAPSHOT}")
        @scoped
        async def snapshot(args: SnapshotArgs) -> Snapshot:
            settings = Snapshot(
                idle_timeout=self.idle_timeout.total_seconds(),
                lifetime=self.lifetime.total_seconds(),
            )
            if self.snapshots is None:
                return settings.model_copy(update={"why_not": "no object store (OBJECT_STORE_URL)"})
            started = time.monotonic()
            session = await self._session(args)
            # Counted before it is read, and gzipped through a temporary file.
            held = await census(session)
            if held.size > LARGEST_WORKSPACE:
                why_not = (
                    f"the workspace weighs {archives.size_text(held.size)}, over "
                    f"{archives.size_text(LARGEST_WORKSPACE)}"
                )
                return settings.model_copy(update={"why_not": why_not})
            with archives.spooled(await session.persist_workspace()) as workspace:
                data = await asyncio.to_thread(gzipped, workspace)
                if len(data) > STORED_FILES_LIMIT:
                    why_not = (
                        f"the workspace weighs {archives.size_text(len(data))} gzipped, over "
                        f"{archives.size_text(STORED_FILES_LIMIT)}"
                    )
                    return settings.model_copy(update={"why_not": why_not})
                files = await asyncio.to_thread(members, archives.spooled(workspace))
            store = self.snapshots
            context = snapshot_context(activity.info().workflow_id or "", args.key, SNAPSHOT_FORMAT)
            stored, encrypted = store.sealed(data, context)
            await store.objects.put_object(bucket=store.bucket, key=args.key, data=stored)
            if args.previous:
                await forget(store, args.previous)
            record_snapshot("snapshot", len(data), started)
            return settings.model_copy(
                update={
                    "key": args.key,
                    "where": store.where,
                    "size": len(data),
                    "files": files,
                    "taken": datetime.now(UTC).isoformat(timespec="seconds"),
                    "encrypted": encrypted,
                    "format": SNAPSHOT_FORMAT,
                    "digest": hashlib.sha256(stored).hexdigest(),
                }
            )

        @activity.defn(name=f"{self.name}-{RESTORE}")
        @scoped
        async def restore(args: RestoreArgs) -> Restored:
            if self.snapshots is None:
                raise ApplicationError(
                    "This worker has no snapshots to restore from: it has no object store "
                    "(OBJECT_STORE_URL), and the snapshot is not on its host",
                    type="SnapshotUnavailable",
                    non_retryable=True,
                )
            started = time.monotonic()
            with tempfile.TemporaryFile(prefix="workspace-") as workspace:
                # Verified whole before the sandbox sees a byte of it.
                size, files = await verified(self.snapshots, args, workspace)
                session = await self._session(args)
                await session.hydrate_workspace(workspace)
            record_snapshot("restore", size, started)
            return Restored(size=size, files=files)

        @activity.defn(name=f"{self.name}-{FORGET}")
        @scoped
        async def forget_snapshot(args: ForgetArgs) -> None:
            if self.snapshots is not None:
                await forget(self.snapshots, args.key)

        @activity.defn(name=f"{self.name}-{MEMORY_SAVE}")
        @scoped
        async def memory_save(args: MemoryArgs) -> Remembered:
            return await memories.save(self.snapshots, await self._session(args), args)

        @activity.defn(name=f"{self.name}-{MEMORY_LOAD}")
        @scoped
        async def memory_load(args: MemoryArgs) -> Remembered:
            return await memories.load(self.snapshots, await self._session(args), args)

        return [place, collect, check, snapshot, restore, forget_snapshot, memory_save, memory_load]
