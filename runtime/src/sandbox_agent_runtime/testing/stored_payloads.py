"""A workflow whose every payload is too large for history: its input (a
RunRequest carrying an input archive of a few MB), its activity's input and
result, and its result (a RunAnswer carrying an output archive as large).
Registered on a real worker by the object store's tests, whose client and
worker keep those payloads in the object store."""

import hashlib
import io
import os
import tarfile
from datetime import timedelta

from temporalio import activity, workflow

from sandbox_agent_runtime.run_request import (
    OutputFile,
    Outputs,
    RunAnswer,
    RunRequest,
)

with workflow.unsafe.imports_passed_through():
    from sandbox_agent_runtime import archives

# What the activity writes: as large as the test's input, and other bytes.
OUTPUT_SIZE = 5_000_000


@activity.defn(name="stored_payloads-transform")
async def transform(request: RunRequest) -> Outputs:
    """Check the request's input archive arrived whole, and hand back a
    large output archive of other bytes."""
    [given] = request.inputs
    archive = archives.decoded(given.archive)
    if hashlib.sha256(archive).hexdigest() != given.sha256:
        raise ValueError("the input archive changed on its way to the activity")
    data = os.urandom(OUTPUT_SIZE)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("made.bin")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return Outputs(
        files=[OutputFile("made.bin", len(data), hashlib.sha256(data).hexdigest())],
        archive=archives.encoded(buffer.getvalue()),
    )


@workflow.defn(name="StoredPayloadsWorkflow")
class StoredPayloadsWorkflow:
    @workflow.run
    async def run(self, request: RunRequest) -> RunAnswer:
        outputs = await workflow.execute_activity(
            transform, request, start_to_close_timeout=timedelta(seconds=60)
        )
        # The answer names the input's digest as the workflow received it.
        return RunAnswer(answer=request.inputs[0].sha256, outputs=outputs)
