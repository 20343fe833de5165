"""The checks on a run's answer that a dataset's patterns drive
(evals/answers.py): each made in a child process under a time limit, so a
pattern that backtracks without end fails its check in one line instead of
hanging the evaluation; and a schema that refers to anything but itself is
refused when the dataset is loaded, and never fetched when an answer is
checked: no connection is made, no file is opened."""

import json
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sandbox_agent_runtime.evals import answers
from sandbox_agent_runtime.evals.answers import checked, failure
from sandbox_agent_runtime.evals.dataset import BadDataset, load, shown

# 40 a's and no b: (a+)+b tries every way of cutting them up, about 2**40.
BACKTRACKS = r"(a+)+b"
ANSWER = "x" + "a" * 40 + "!"

OK_SCHEMA = {
    "$defs": {"total": {"type": "integer"}},
    "type": "object",
    "properties": {"total": {"$ref": "#/$defs/total"}},
}

# The files opened in this process while a test watches them (an audit hook
# cannot be removed: it is added once, and records only what is watched).
_WATCHED: set[str] = set()
_OPENED: list[str] = []


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and args and str(args[0]) in _WATCHED:
        _OPENED.append(str(args[0]))


sys.addaudithook(_audit)


@contextmanager
def watching_opens(path: Path) -> Iterator[list[str]]:
    """The times ``path`` is opened in this process, while in the block."""
    _OPENED.clear()
    _WATCHED.add(str(path))
    try:
        yield _OPENED
    finally:
        _WATCHED.discard(str(path))


@contextmanager
def listening() -> Iterator[socket.socket]:
    """A port on loopback that accepts connections, and answers none."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        yield server


def assert_no_connection(server: socket.socket) -> None:
    with pytest.raises(BlockingIOError):
        server.accept()


async def test_the_answer_s_checks_pass_and_fail_as_written() -> None:
    assert await checked("answer_matches", r"total: \d+", "The total: 42.") is None
    assert await checked("answer_matches", r"total: \d+", "No idea.") == (
        "answer_matches",
        r"the answer does not match the pattern total: \d+",
    )
    assert await checked("answer_json_schema", OK_SCHEMA, '{"total": 42}') is None
    assert await checked("answer_json_schema", OK_SCHEMA, '{"total": "42"}') == (
        "answer_json_schema",
        "the answer does not fit the schema: '42' is not of type 'integer'",
    )
    assert await checked("answer_json_schema", OK_SCHEMA, "42 apples") == (
        "answer_json_schema",
        "the answer is not JSON (Extra data: line 1 column 4 (char 3))",
    )


@pytest.mark.parametrize(
    ("kind", "given", "text"),
    [
        pytest.param("answer_matches", BACKTRACKS, ANSWER, id="answer_matches"),
        pytest.param(
            "answer_json_schema",
            {"type": "string", "pattern": BACKTRACKS},
            json.dumps(ANSWER),
            id="a-schema-s-pattern",
        ),
    ],
)
async def test_a_pattern_that_backtracks_without_end_fails_its_check_in_one_line(
    monkeypatch: pytest.MonkeyPatch, kind: str, given: object, text: str
) -> None:
    monkeypatch.setattr(answers, "CHECK_SECONDS", 1.0)
    assert await checked(kind, given, text) == (
        kind,
        "the check took over 1 s and was stopped (a pattern that backtracks without end?)",
    )


def test_a_schema_referring_outside_itself_is_refused_when_the_dataset_is_loaded(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"type": "string", "description": "a file of the evaluating host"}')
    with listening() as server, watching_opens(secret) as opened:
        port = server.getsockname()[1]
        for reference in (
            f"http://127.0.0.1:{port}/schema.json",
            secret.as_uri(),
            "secret.json",
            "#/$defs/nowhere",
        ):
            schema = json.dumps({**OK_SCHEMA, "properties": {"total": {"$ref": reference}}})
            path = tmp_path / "tasks.yaml"
            path.write_text(
                f"cases:\n  - {{id: a, prompt: Go., checks: [{{answer_json_schema: {schema}}}]}}\n"
            )
            with pytest.raises(BadDataset) as refused:
                load(path)
            assert str(refused.value) == (
                f"{path}: case 'a': check 1 (answer_json_schema) $ref {shown(reference)} is not "
                "allowed: refer only to a part of this schema (#/$defs/NAME): nothing is "
                "fetched, from the network or from a file."
            )
        assert_no_connection(server)
    assert opened == []
    path.write_text(
        "cases:\n  - {id: a, prompt: Go., checks: [{answer_json_schema: "
        + json.dumps(OK_SCHEMA)
        + "}]}\n"
    )
    assert load(path)[0].answer_json_schema == OK_SCHEMA


async def test_an_answer_is_checked_against_its_schema_with_nothing_fetched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A schema that did not come through load() (a test's, a caller's own
    # Case): still nothing fetched, from a file or the network.
    secret = tmp_path / "secret.json"
    secret.write_text('{"type": "string"}')
    with watching_opens(secret) as opened:
        found = failure("answer_json_schema", {"$ref": secret.as_uri()}, '"text"')
    assert opened == []
    assert found == (
        "answer_json_schema",
        f"the schema refers to {secret.as_uri()!r}, which is not in it (nothing is fetched)",
    )
    # A port that would hold the check for ever: it never sees a connection.
    monkeypatch.setattr(answers, "CHECK_SECONDS", 5.0)
    with listening() as server:
        reference = f"http://127.0.0.1:{server.getsockname()[1]}/schema.json"
        found = await checked("answer_json_schema", {"$ref": reference}, '"text"')
        assert_no_connection(server)
    assert found == (
        "answer_json_schema",
        f"the schema refers to {reference!r}, which is not in it (nothing is fetched)",
    )
