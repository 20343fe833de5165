"""Names and limits that the worker, the workflow and the starter must agree on.

They live in one module because a mismatch fails silently: a starter that
calls an update by another name waits for an answer that never comes, and a
workflow that schedules an activity by a name no worker registered waits for
ever. The names a service chooses (its task queue, its sandbox providers)
are its ``Service``'s.
"""

from datetime import timedelta

# The workflow's type name. The starter starts runs by this name rather than
# by importing the workflow (and with it the Agents SDK, seconds of start-up),
# so the workflow must register under it.
WORKFLOW_TYPE = "SandboxAgentWorkflow"

# The memo key under which every run shows its chain's model calls and tokens
# (written by the workflow, read by the starter).
USAGE_MEMO = "usage"


# A run's sandbox on a host (a local workspace, a container on the host's own
# Docker engine) is reached only through that host's workers.
# When none of them takes one of its operations for this long, the host is
# taken for gone, and the run fails saying so. It must cover a worker's
# restart on the same host (the orchestrator's delay, then seconds to start)
# and the longest an operation waits for a free slot on a busy host.
SANDBOX_HOST_WAIT = timedelta(seconds=120)

# The topics of a run's stream (streaming.py writes it, client/stream.py
# reads it): the model's raw stream events, and the workflow's own.
MODEL_TOPIC = "model"
RUN_TOPIC = "run"

# The workflow's query listing the requests that wait for a person, and its
# update deciding one (the starter, `temporal workflow query` and `temporal
# workflow update execute` call them by these names).
PENDING = "pending"
DECIDE = "decide"

# Each call to the model is one activity with this start-to-close timeout,
# unless the worker's MODEL_ACTIVITY_TIMEOUT_SECONDS sets another.
MODEL_ACTIVITY_TIMEOUT = timedelta(seconds=60)

# Temporal ends a run whose history passes 50 MB or 51,200 events (it warns
# at 10 MB / 10,240) and refuses any single payload over 2 MB. Every model
# call is an activity whose input is the whole conversation, so a long run
# would pass both; these limits keep every run of the service well inside:
#
# A run hands its work to a new run (continue-as-new: same conversation,
# same sandbox, same workflow id) before its next model call once its
# history passes this many bytes, or when Temporal suggests it.
HISTORY_BUDGET = 4_000_000

# The most the conversation may weigh (bytes of JSON) in a model call's
# input and in what one run hands the next: the request and the latest items
# are kept, with a note saying how many earlier items were left out.
CONVERSATION_LIMIT = 1_000_000

# The longest prompt a run takes (bytes of UTF-8; the starter refuses a
# longer one in one line). The prompt is kept whole in every model call's
# input, whatever else of the conversation is left out: it must leave room
# for the work. Material larger than this belongs in the workspace.
LONGEST_PROMPT = CONVERSATION_LIMIT // 4

# Files that go into a run (--input) and come out of it (--output) travel
# as tar archives. Without an object store (OBJECT_STORE_URL) they travel in
# history, where one payload may hold 2 MB: at most INLINE_FILES_LIMIT bytes
# of files each way. With one, every payload from STORE_THRESHOLD bytes up is
# kept in the store (history holds a reference), and a run's files may weigh
# STORED_FILES_LIMIT bytes each way.
INLINE_FILES_LIMIT = 1024 * 1024
STORE_THRESHOLD = 256 * 1024
STORED_FILES_LIMIT = 100 * 1024 * 1024
# And in number: the list of a run's files (a path, a size and a checksum
# each) travels in history whatever the store holds, where one payload may
# hold 2 MB. Each way, a run's files are at most MOST_FILES, whose paths
# weigh at most LONGEST_LISTING bytes of UTF-8 in all; and at most
# MOST_SKIPPED entries left out are named (the rest are counted).
MOST_FILES = 10_000
LONGEST_LISTING = 512 * 1024
MOST_SKIPPED = 100

# The model compacts the conversation (the Responses API's compaction) once
# it passes this many tokens: about 400 kB of text, where the SDK's default
# (90% of the model's context window) would be several MB.
COMPACTION_THRESHOLD = 100_000

# Command output (stdout and stderr each) longer than this many bytes is cut
# on the worker, with a note saying how much was cut and how to read the rest.
LONGEST_OUTPUT = 64 * 1024

# The same for a file the agent's tools read (to view or patch it): large
# enough for any file worth patching, small enough for one payload.
LONGEST_READ = 1_000_000

# The sandbox operation that asks a worker, before a run creates its sandbox,
# which host the sandbox will live on ("<provider>-sandbox_host": a local
# activity).
CHOOSING_THE_HOST = "sandbox_host"
# A sandbox operation offered on the run's own queue carries its host in this
# header; a worker of another host refuses it with this error type
# (affinity.HostFirst), and the run sends it to the host's queue.
HOST_HEADER = "sandbox-host"
NOT_THIS_HOST = "NotThisHost"


# The activities the agents plugin runs each model call as.
MODEL_ACTIVITIES = ("invoke_model_activity", "invoke_model_activity_streaming")


# The two sandbox operations of the workspace's own (workspace/): placing a
# run's inputs, collecting its outputs ("<provider>-sandbox_workspace_place").
PLACE = "sandbox_workspace_place"
COLLECT = "sandbox_workspace_collect"
# And two more for conversations: a snapshot of the workspace into the
# object store (or the host's disk), and a fresh sandbox restored from one.
SNAPSHOT = "sandbox_workspace_snapshot"
RESTORE = "sandbox_workspace_restore"
FORGET = "sandbox_workspace_forget"
# And two for a caller's memory across conversations (workspace/memories.py):
# the Memory capability's directory kept in the object store, and put back.
MEMORY_SAVE = "sandbox_workspace_memory_save"
MEMORY_LOAD = "sandbox_workspace_memory_load"
# And one for evaluations: the checks a request asks the run to make on what
# it left in its workspace, after its answer (run_request.Check).
CHECK = "sandbox_workspace_check"

# A conversation's handlers: the update that sends a
# follow-up (a FollowUp; it answers with the prompt's number), the update
# that ends it, and the query of where it stands (a Conversation).
FOLLOW_UP = "follow_up"
END = "end"
CONVERSATION = "conversation"
# The memo key under which a conversation shows where it stands (the
# Conversation without its answer), rewritten at each change of state.
SESSION_MEMO = "session"
# The memo key of a run started through the API: who started it ("token:NAME"),
# carried from run to run of its chain (api/callers.py). The starter's runs
# have none.
CALLER_MEMO = "api_caller"
# The memo key of a run that ended without removing its sandbox (a removal
# that failed for good): the sandbox's provider, host, session id and why
# (phases/ending.py), for an operator to find and remove it.
SANDBOX_LEFT_MEMO = "sandbox_left"
# The memo key of every run a service starts (the API, the starter, the
# evaluations): the service it belongs to (its task queue), carried from run
# to run of its chain. The API and the starter act only on their own
# service's runs.
SERVICE_MEMO = "service"

# How long a conversation keeps its sandbox after an answer, and how long it
# waits for a follow-up before it ends, unless the worker's
# SESSION_IDLE_TIMEOUT / SESSION_LIFETIME (seconds) set others.
SESSION_IDLE_TIMEOUT = timedelta(minutes=10)
SESSION_LIFETIME = timedelta(days=7)

# The longest one git process of the worker may run (a --repo's clone, the
# diff of its changes) unless the worker's GIT_TIMEOUT_MINUTES sets another: then it is killed, with its helpers (workspace/git.py).
GIT_TIMEOUT = timedelta(minutes=5)


def sandbox_operation(activity: str) -> str | None:
    """The sandbox operation an activity runs.

    Args:
        activity: the activity's name ("<provider>-sandbox_session_start").

    Returns:
        The operation ("sandbox_session_start"), or None for any other
        activity (a model call, one of the agent's tools).
    """
    _, prefix, operation = activity.rpartition("-sandbox_")
    return f"sandbox_{operation}" if prefix else None


# The operations of an MCP server, each an activity named after its server
# ("<server>-stateless-call-tool-v2": temporalio.openai_agents' providers).
MCP_KINDS = ("-stateless-", "-stateful-")
MCP_CALL = "call-tool-v2"


def mcp_operation(activity: str) -> tuple[str, str] | None:
    """The MCP server an activity reaches, and its operation.

    Args:
        activity: the activity's name ("notes-stateless-call-tool-v2").

    Returns:
        ("notes", "call-tool-v2"), or None for any other activity.
    """
    for kind in MCP_KINDS:
        server, found, operation = activity.rpartition(kind)
        if found and server and operation:
            return server, operation
    return None


def mcp_server_named(name: str) -> str:
    """The name a team gave an MCP server's provider, from the name the
    Agents SDK knows it by ("notes-stateless": "notes")."""
    for kind in MCP_KINDS:
        suffix = kind.rstrip("-")
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def tool_of(activity: str) -> str | None:
    """The agent's tool an activity runs (the activity is named after it).

    Args:
        activity: the activity's name.

    Returns:
        The tool's name, or None for a model call or a sandbox operation.
    """
    if activity in MODEL_ACTIVITIES or sandbox_operation(activity) is not None:
        return None
    return activity


def step_name(activity: str) -> str:
    """An activity in words.

    Args:
        activity: the activity's name.

    Returns:
        "the model call", "the sandbox operation <name>", "the MCP server
        '<name>' (<operation>)" or "the tool <name>".
    """
    if activity in MODEL_ACTIVITIES:
        return "the model call"
    if sandbox_operation(activity) is not None:
        return f"the sandbox operation {activity}"
    mcp = mcp_operation(activity)
    if mcp is not None:
        return f"the MCP server {mcp[0]!r} ({mcp[1]})"
    return f"the tool {activity}"
