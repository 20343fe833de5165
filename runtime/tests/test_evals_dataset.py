"""A dataset a team writes by hand is read whole, or refused in one line
before any run starts: the file, the case, the field, the value, what is
wrong and what is allowed (evals/dataset.py)."""

import textwrap
from pathlib import Path

import pytest

from sandbox_agent_runtime.evals.dataset import BadDataset, Case, load
from sandbox_agent_runtime.run_request import Check

DIGEST = "AB" * 32

EVERY_CHECK = f"""\
description: Every kind of check, once.
cases:
  - id: csv-sum
    prompt: Add up the second column of data/sales.csv into total.txt.
    inputs: [data, notes.md]
    timeout_seconds: 120
    checks:
      - file_exists: total.txt
      - file_contains: {{path: ./out/total.txt, text: "1234"}}
      - file_sha256: {{path: total.txt, sha256: {DIGEST}}}
      - command: test -s total.txt
      - command: {{run: pytest -q, timeout_seconds: 60}}
      - answer_matches: 'total: \\d+'
      - answer_json_schema: {{type: object, required: [total]}}
      - max_turns: 10
      - max_tokens: 50000
    rubric: The answer says how the total was found.
  - id: fix-bug
    prompt: Make the tests pass.
    repo: https://github.com/org/repo@v1.2
    checks:
      - command: pytest -q
"""


def dataset(directory: Path, text: str, name: str = "tasks.yaml") -> Path:
    """``text`` as a dataset file in ``directory``, beside a data/ directory
    and a notes.md its cases may take as inputs."""
    (directory / "data").mkdir(exist_ok=True)
    (directory / "data" / "sales.csv").write_text("a,1\nb,2\n")
    (directory / "notes.md").write_text("notes\n")
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def refusal(path: Path) -> str:
    with pytest.raises(BadDataset) as refused:
        load(path)
    line = str(refused.value)
    assert "\n" not in line
    return line


def test_a_dataset_with_every_check_loads_into_its_cases(tmp_path: Path) -> None:
    path = dataset(tmp_path, EVERY_CHECK)
    assert load(path) == [
        Case(
            id="csv-sum",
            prompt="Add up the second column of data/sales.csv into total.txt.",
            inputs=((tmp_path / "data").resolve(), (tmp_path / "notes.md").resolve()),
            repo=None,
            sandbox_checks=(
                Check(kind="file_exists", path="total.txt"),
                Check(kind="file_contains", path="out/total.txt", text="1234"),
                Check(kind="file_sha256", path="total.txt", sha256=DIGEST.lower()),
                Check(kind="command", command="test -s total.txt"),
                Check(kind="command", command="pytest -q", timeout=60.0),
            ),
            answer_matches=r"total: \d+",
            answer_json_schema={"type": "object", "required": ["total"]},
            max_turns=10,
            max_tokens=50000,
            timeout_seconds=120.0,
            rubric="The answer says how the total was found.",
            source=path,
        ),
        Case(
            id="fix-bug",
            prompt="Make the tests pass.",
            inputs=(),
            repo="https://github.com/org/repo@v1.2",
            sandbox_checks=(Check(kind="command", command="pytest -q"),),
            answer_matches=None,
            answer_json_schema=None,
            max_turns=None,
            max_tokens=None,
            timeout_seconds=600.0,
            rubric=None,
            source=path,
        ),
    ]


def test_a_directory_is_its_yaml_files_in_the_order_of_their_names(tmp_path: Path) -> None:
    one_case = "cases:\n  - {{id: {}, prompt: Go., checks: [{{file_exists: out.txt}}]}}\n"
    dataset(tmp_path, one_case.format("second"), "b.yml")
    dataset(tmp_path, one_case.format("first"), "a.yaml")
    (tmp_path / "README.md").write_text("not a dataset\n")
    # A directory beside them holds inputs, not more cases.
    (tmp_path / "data" / "more.yaml").write_text("not: [a dataset\n")
    assert [(case.id, case.source.name) for case in load(tmp_path)] == [
        ("first", "a.yaml"),
        ("second", "b.yml"),
    ]


def test_an_id_is_the_dataset_s_once_across_its_files(tmp_path: Path) -> None:
    one_case = "cases:\n  - {id: same, prompt: Go., checks: [{file_exists: out.txt}]}\n"
    dataset(tmp_path, one_case, "a.yaml")
    dataset(tmp_path, one_case, "b.yaml")
    assert refusal(tmp_path) == (
        f"{tmp_path / 'b.yaml'}: case 'same': id 'same' is already a case's id in "
        f"{tmp_path / 'a.yaml'}: give each case an id of its own."
    )


def test_what_is_not_a_dataset_is_refused(tmp_path: Path) -> None:
    assert refusal(tmp_path / "missing.yaml") == (
        f"{tmp_path / 'missing.yaml'}: no such file or directory."
    )
    assert refusal(tmp_path) == f"{tmp_path}: no *.yaml or *.yml file in this directory."


def test_an_input_may_not_lead_out_of_its_directory_through_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    inside = tmp_path / "evals"
    inside.mkdir()
    (inside / "escape").symlink_to(outside)
    path = dataset(
        inside,
        "cases:\n  - {id: a, prompt: Go., inputs: [escape], checks: [{file_exists: x}]}\n",
    )
    assert refusal(path) == (
        f"{path}: case 'a': input 'escape' is not inside {inside}: give a file or a directory "
        "below the dataset file's directory (a link may not lead out)."
    )


# Each bad dataset (a case, in YAML), and the line that refuses it, after
# "FILE: ". A case is named by its id when it has a good one, else by its place.
OK = "checks: [{file_exists: out.txt}]"
ALL_CHECKS = (
    "file_exists, file_contains, file_sha256, command, "
    "answer_matches, answer_json_schema, max_turns, max_tokens"
)
BAD_CASES = [
    pytest.param(
        "{id: csv-sum, prompt: Go., checks: [{file_exits: out.txt}]}",
        f"case 'csv-sum': check 'file_exits' is not one of {ALL_CHECKS}.",
        id="unknown-check",
    ),
    pytest.param(
        f"{{id: a, prompt: Go., inputs: [missing], {OK}}}",
        "case 'a': input 'missing' does not exist in {dir}: give a file or a directory there.",
        id="missing-input",
    ),
    pytest.param(
        f"{{id: a, prompt: Go., inputs: [../data], {OK}}}",
        "case 'a': input '../data' is not allowed: give a path inside the dataset file's "
        "directory, relative to it, without '..'.",
        id="input-climbs-out",
    ),
    pytest.param(
        f"{{id: a, prompt: Go., inputs: [/etc], {OK}}}",
        "case 'a': input '/etc' is not allowed: give a path inside the dataset file's "
        "directory, relative to it, without '..'.",
        id="input-absolute",
    ),
    pytest.param(
        f"{{id: a, prompt: Go., inputs: data, {OK}}}",
        "case 'a': inputs 'data' is not allowed: give a list of paths relative to the "
        "dataset file ([data, notes.md]).",
        id="inputs-not-a-list",
    ),
    pytest.param(
        f"{{id: a, prompt: Go., inputs: [data, data/../data], {OK}}}",
        "case 'a': input 'data/../data' is not allowed: give a path inside the dataset file's "
        "directory, relative to it, without '..'.",
        id="input-dotdot-inside",
    ),
    pytest.param(
        f"{{id: a, prompt: Go., inputs: [data], repo: 'https://h/o/r', {OK}}}",
        "case 'a': it has both inputs and a repo: give one, as a run starts from one or the other.",
        id="inputs-and-repo",
    ),
    pytest.param(
        f"{{id: a, prompt: Go., repo: 'not a url', {OK}}}",
        "case 'a': repo 'not a url': give a git URL, optionally @ a branch, "
        "tag or commit (https://github.com/org/repo@v1.2, git@github.com:org/repo@main).",
        id="bad-repo",
    ),
    pytest.param(
        f"{{id: a, prompt: Go., repo: '/srv/repos/secret@main', {OK}}}",
        "case 'a': repo '/srv/repos/secret' is not allowed: a path names a directory on the "
        "worker's own disk; use an https:// or ssh:// URL, or user@server:path.",
        id="repo-path",
    ),
    pytest.param(
        f"{{id: a, prompt: Go., repo: 'file:///etc', {OK}}}",
        "case 'a': repo 'file:///etc' is not allowed: a file:// URL reads the worker's own "
        "disk; use an https:// or ssh:// URL, or user@server:path.",
        id="repo-file-url",
    ),
    pytest.param(
        "{id: a, prompt: Go., checks: [{answer_json_schema: {type: strin}}]}",
        "case 'a': check 1 (answer_json_schema) is not a JSON Schema (draft 2020-12): "
        "'strin' is not valid under any of the given schemas at type.",
        id="bad-schema",
    ),
    pytest.param(
        "{id: a, prompt: Go., checks: [{answer_json_schema: [object]}]}",
        "case 'a': check 1 (answer_json_schema) ['object'] is not allowed: give a JSON "
        "Schema as a mapping ({type: object, required: [total]}).",
        id="schema-not-a-mapping",
    ),
    pytest.param(
        "{id: a, prompt: Go., checks: [{file_contains: {path: out.txt}}]}",
        "case 'a': check 1 (file_contains) has no 'text': give {path: ..., text: ...}.",
        id="file-contains-without-text",
    ),
    pytest.param(
        "{id: a, prompt: Go., checks: [{file_contains: {path: out.txt, txt: hi}}]}",
        "case 'a': check 1 (file_contains) has an unknown key 'txt': give {path: ..., text: ...}.",
        id="file-contains-unknown-key",
    ),
    pytest.param(
        "{id: a, prompt: Go., checks: [{file_sha256: {path: out.txt, sha256: abc}}]}",
        "case 'a': check 1 (file_sha256) sha256 'abc' is not allowed: give 64 hexadecimal digits.",
        id="short-sha256",
    ),
    pytest.param(
        "{id: a, prompt: Go., checks: [{file_exists: /etc/passwd}]}",
        "case 'a': check 1 (file_exists) path '/etc/passwd' is not allowed: give a path "
        "relative to the workspace, not absolute and without '..'.",
        id="absolute-check-path",
    ),
    pytest.param(
        "{id: a, prompt: Go., checks: [{file_exists: x}, {file_exists: ../x}]}",
        "case 'a': check 2 (file_exists) path '../x' is not allowed: give a path relative "
        "to the workspace, not absolute and without '..'.",
        id="check-path-climbs-out",
    ),
    pytest.param(
        "{id: a, prompt: Go., checks: [{command: ''}]}",
        "case 'a': check 1 (command) '' is not allowed: give a shell command that must exit 0.",
        id="blank-command",
    ),
    pytest.param(
        "{id: a, prompt: Go., checks: [{answer_matches: '('}]}",
        "case 'a': check 1 (answer_matches) '(' is not a regular expression (missing ), "
        "unterminated subpattern at position 0).",
        id="bad-regex",
    ),
    pytest.param(
        "{id: a, prompt: Go., checks: [{max_turns: 0}]}",
        "case 'a': check 1 (max_turns) 0 is not allowed: give a whole number from 1.",
        id="zero-turns",
    ),
    pytest.param(
        "{id: a, prompt: Go., checks: [{max_tokens: 1.5}]}",
        "case 'a': check 1 (max_tokens) 1.5 is not allowed: give a whole number from 1.",
        id="fractional-tokens",
    ),
    pytest.param(
        "{id: a, prompt: Go., checks: [{max_turns: 3}, {max_turns: 4}]}",
        "case 'a': check 2 (max_turns) is given twice: give each answer check once.",
        id="answer-check-twice",
    ),
    pytest.param(
        f"{{id: a, prompt: Go., timeout_seconds: 0, {OK}}}",
        "case 'a': timeout_seconds 0 is not allowed: give a number of seconds above 0, "
        "at most 86400 (a day).",
        id="zero-timeout",
    ),
    pytest.param(
        f"{{id: a, prompt: Go., timeout_seconds: true, {OK}}}",
        "case 'a': timeout_seconds True is not allowed: give a number of seconds above 0, "
        "at most 86400 (a day).",
        id="boolean-timeout",
    ),
    pytest.param(
        "{id: a, prompt: Go., checks: [{command: {run: make, timeout_seconds: -1}}]}",
        "case 'a': check 1 (command) timeout_seconds -1 is not allowed: give a number of "
        "seconds above 0, at most 86400 (a day).",
        id="negative-command-timeout",
    ),
    pytest.param(
        f"{{id: a, promt: Go., {OK}}}",
        "case 'a': 'promt' is not one of id, prompt, inputs, repo, checks, timeout_seconds, "
        "rubric.",
        id="unknown-key",
    ),
    pytest.param(
        f"{{id: a, {OK}}}",
        "case 'a': it has no 'prompt': every case has an id and a prompt.",
        id="no-prompt",
    ),
    pytest.param(
        f"{{id: a, prompt: '  ', {OK}}}",
        "case 'a': prompt '  ' is not allowed: give some text.",
        id="blank-prompt",
    ),
    pytest.param(
        f"{{prompt: Go., {OK}}}",
        "case 1: it has no 'id': every case has an id and a prompt.",
        id="no-id",
    ),
    pytest.param(
        f"{{id: 'csv sum', prompt: Go., {OK}}}",
        "case 1: id 'csv sum' is not allowed: use letters, digits, '.', '_' and '-', "
        "starting with a letter or a digit, at most 100.",
        id="bad-id",
    ),
    pytest.param(
        "{id: a, prompt: Go.}",
        "case 'a': it has no checks and no rubric: give at least one, or every run of it passes.",
        id="nothing-checked",
    ),
    pytest.param(
        "{id: a, prompt: Go., checks: [{file_exists: out.txt, max_turns: 3}]}",
        "case 'a': check 1 {'file_exists': 'out.txt', 'max_turns': 3} is not allowed: write "
        "each check as a one-key mapping (- file_exists: out.txt).",
        id="check-of-two-keys",
    ),
    pytest.param(
        "{id: a, prompt: Go., checks: [file_exists out.txt]}",
        "case 'a': check 1 'file_exists out.txt' is not allowed: write each check as a "
        "one-key mapping (- file_exists: out.txt).",
        id="check-not-a-mapping",
    ),
    pytest.param(
        "Add up the numbers.",
        "case 1: 'Add up the numbers.' is not a case: write each case as a mapping "
        "(- id: ..., prompt: ...).",
        id="case-not-a-mapping",
    ),
]


@pytest.mark.parametrize(("case", "line"), BAD_CASES)
def test_a_bad_case_is_refused_in_one_line(tmp_path: Path, case: str, line: str) -> None:
    good = "{id: good, prompt: Go., checks: [{file_exists: out.txt}]}"
    path = dataset(tmp_path, f"cases:\n  - {good}\n  - {case}\n")
    expected = f"{path}: " + line.replace("{dir}", str(tmp_path))
    # Case 1 is the good one: a case named by its place is the second.
    assert refusal(path) == expected.replace("case 1:", "case 2:")


# Each bad file, and the line that refuses it, after "FILE: ".
BAD_FILES = [
    pytest.param(
        "cases:\n  - id: a\n    prompt: [Go.\n",
        "not YAML: expected ',' or ']', but got '<stream end>' at line 4.",
        id="not-yaml",
    ),
    pytest.param(
        "- id: a\n  prompt: Go.\n",
        "holds no list of cases: write a mapping with 'cases', a list of cases "
        "(- id: ..., prompt: ..., checks: [...]).",
        id="no-cases",
    ),
    pytest.param("cases: []\n", "'cases' is empty: give at least one case.", id="empty"),
    pytest.param(
        "cases: [{id: a, prompt: Go., checks: [{file_exists: x}]}]\nmodel: gpt-5\n",
        "'model' is not one of cases, description: a dataset file holds its cases and, if "
        "wanted, a description.",
        id="unknown-top-level-key",
    ),
    pytest.param(
        "cases:\n  - id: a\n    prompt: Go.\n    prompt: Stop.\n    checks: [{file_exists: x}]\n",
        "not YAML: the key 'prompt' is given twice at line 4.",
        id="key-twice",
    ),
    pytest.param(
        "cases:\n  - {id: a, prompt: Go., checks: [{file_exists: x}]}\n"
        "  - {id: a, prompt: Again., checks: [{file_exists: x}]}\n",
        "case 'a': id 'a' is already a case's id in this file: give each case an id of its own.",
        id="id-twice",
    ),
]


@pytest.mark.parametrize(("text", "line"), BAD_FILES)
def test_a_bad_file_is_refused_in_one_line(tmp_path: Path, text: str, line: str) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text(text)
    assert refusal(path) == f"{path}: {line}"


def test_inputs_of_one_name_are_refused(tmp_path: Path) -> None:
    for part in ("a", "b"):
        (tmp_path / part).mkdir()
        (tmp_path / part / "data").write_text("x\n")
    path = dataset(
        tmp_path, f"cases:\n  - {{id: a, prompt: Go., inputs: [a/data, b/data], {OK}}}\n"
    )
    assert refusal(path) == (
        f"{path}: case 'a': inputs 'a/data' and 'b/data' share the name 'data': each input "
        "is placed at the top of the workspace under its last part, so each needs a name of "
        "its own."
    )


def test_a_long_value_is_cut_in_the_line(tmp_path: Path) -> None:
    prompt_key = "p" * 200
    path = dataset(tmp_path, f"cases:\n  - {{id: a, {prompt_key}: Go., {OK}}}\n")
    line = refusal(path)
    assert line.startswith(f"{path}: case 'a': '{'p' * 79}... (202 characters) is not one of")


# A "billion laughs" in YAML: each level nine aliases of the one before. Four
# levels here (6,561 strings); nine took the evaluator to 2.3 GB.
ALIAS_BOMB = """\
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
cases: [*c, *c, *c, *c, *c, *c, *c, *c, *c]
"""


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param(ALIAS_BOMB, "line 2: the alias *a is not allowed", id="alias-bomb"),
        pytest.param(
            "base: &base {prompt: Go., checks: [{file_exists: x}]}\n"
            "cases:\n  - {<<: *base, id: a}\n",
            "line 3: the alias *base is not allowed",
            id="merge-key",
        ),
    ],
)
def test_a_dataset_takes_no_alias_so_none_can_expand_it(
    tmp_path: Path, text: str, line: str
) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text(text)
    assert refusal(path) == (
        f"{path}: {line}: write the value out (a dataset takes no aliases: a few of them can "
        "make a small file expand without bound)."
    )


def test_a_file_too_large_or_nested_too_deep_is_refused_before_it_is_read_whole(
    tmp_path: Path,
) -> None:
    large = tmp_path / "large.yaml"
    large.write_text("cases: []\n" + "#" * (1024 * 1024))
    deep = tmp_path / "deep.yaml"
    # Deeper than Python's parser can go (it recursed out of its stack).
    deep.write_text("cases:\n  - " + "[" * 5000 + "]" * 5000 + "\n")
    assert refusal(large) == (
        f"{large}: over 1,048,576 bytes (1 MiB): a dataset file is at most that (put large "
        "inputs beside it, or split its cases into several files)."
    )
    assert (
        refusal(deep) == f"{deep}: line 2: a value nested over 100 deep is not allowed: nest less."
    )
