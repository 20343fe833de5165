"""An evaluation dataset, as a team writes it by hand: YAML files of cases,
read and checked whole before any run starts.

A dataset with one bad case is refused whole, in one line naming the file,
the case, the field and what is allowed, so a run of it never starts only to
stop on its tenth case; a hostile file is refused instead of taking the
evaluator's memory. The format is in ``load()``.
"""

import math
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema  # type: ignore[import-untyped,unused-ignore]
import referencing
import referencing.exceptions
import referencing.jsonschema
import yaml

from sandbox_agent_runtime.archives import BadInput, repo_of
from sandbox_agent_runtime.run_request import Check

# The checks a case may ask for: those the run makes in its own sandbox
# (run_request.Check), then those made on what the run handed back.
SANDBOX_CHECKS = ("file_exists", "file_contains", "file_sha256", "command")
ANSWER_CHECKS = ("answer_matches", "answer_json_schema", "max_turns", "max_tokens")
CHECKS = SANDBOX_CHECKS + ANSWER_CHECKS

# What a case may hold, and what a file may hold.
CASE_KEYS = ("id", "prompt", "inputs", "repo", "checks", "timeout_seconds", "rubric")
FILE_KEYS = ("cases", "description")

# A case's id becomes part of its runs' workflow ids: letters, digits, ".",
# "_" and "-", starting with a letter or a digit.
ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
ID_ALLOWED = "letters, digits, '.', '_' and '-', starting with a letter or a digit, at most 100"

# How long a case's run may take unless it says, and the longest it may ask.
TIMEOUT_SECONDS = 600.0
LONGEST_TIMEOUT_SECONDS = 86_400.0

# The most of a bad value a message shows.
_SHOWN = 80

# The largest dataset file, and how deep its values may nest (a schema's
# deepest part included): bounds a file meets long before a team's hand-written
# cases do, and Python's parser would not reach (it recurses).
MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 100


class BadDataset(ValueError):
    """A dataset that cannot be run; its message is one line naming the
    file, the case, the field, the value, what is wrong and what is allowed."""


@dataclass(frozen=True)
class Case:
    """One case of a dataset: a prompt, what its run starts with, and what
    its run must leave and answer to pass."""

    id: str
    prompt: str
    # Files and directories the workspace starts with, absolute.
    inputs: tuple[Path, ...]
    # Or a git repository, as URL[@REF] (archives.repo_of takes it).
    repo: str | None
    # The checks the run makes in its sandbox, in the order written.
    sandbox_checks: tuple[Check, ...]
    # A regular expression the answer must hold (re.search).
    answer_matches: str | None
    # A JSON Schema the answer, read as JSON, must be valid under.
    answer_json_schema: dict[str, Any] | None
    # The most turns and tokens (input and output, added up) the run may take.
    max_turns: int | None
    max_tokens: int | None
    # How long the run may take, in seconds.
    timeout_seconds: float
    # What a model grades the answer against, reported apart from the checks.
    rubric: str | None
    # The YAML file it was read from.
    source: Path


def shown(value: object) -> str:
    """``value`` as a message shows it: its repr (quoted, escaped, one
    line), cut when long."""
    text = repr(value)
    if len(text) > _SHOWN:
        return f"{text[:_SHOWN]}... ({len(text):,} characters)"
    return text


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _NotAllowed(yaml.composer.ComposerError):
    """YAML the loader reads, but a dataset may not hold."""


class _Loader(yaml.SafeLoader):
    """``yaml.safe_load``'s loader, refusing a key given twice in one
    mapping (YAML keeps the last one and says nothing), an alias, and a
    value nested deeper than ``MAX_DEPTH``."""

    depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise _NotAllowed(
                None,
                None,
                f"the alias *{event.anchor} is not allowed: write the value out (a dataset "
                "takes no aliases: a few of them can make a small file expand without bound)",
                event.start_mark,
            )
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _NotAllowed(
                    None,
                    None,
                    f"a value nested over {MAX_DEPTH} deep is not allowed: nest less",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _mapping(loader: _Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            twice = key in seen
        except TypeError:  # unhashable: construct_mapping says so
            break
        if twice:
            raise yaml.constructor.ConstructorError(
                None, None, f"the key {shown(key)} is given twice", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _no_fetch(uri: str) -> referencing.Resource[Any]:
    # referencing's attrs classes: mypy sees no field in their __init__.
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


# Where a schema's references are looked up: in the schema alone. jsonschema
# would otherwise fetch what it does not hold, from any URL (file:// too),
# with no time limit.
_NOTHING_FETCHED: referencing.Registry[Any] = referencing.Registry(retrieve=_no_fetch)  # type: ignore[call-arg]


def schema_validator(schema: dict[str, Any]) -> Any:
    """A draft 2020-12 validator of ``schema`` whose ``$ref`` resolve only
    within it (and jsonschema's own meta-schemas): nothing is fetched."""
    return jsonschema.Draft202012Validator(schema, registry=_NOTHING_FETCHED)


def _outside_reference(schema: dict[str, Any]) -> str | None:
    """The first ``$ref`` (or ``$dynamicRef``) of ``schema`` that does not
    resolve within it; None when they all do."""
    root = referencing.jsonschema.DRAFT202012.create_resource(schema)
    todo = [(root, _NOTHING_FETCHED.resolver_with_root(root))]
    while todo:
        resource, resolver = todo.pop()
        resolver = resolver.in_subresource(resource)
        contents = resource.contents
        for key in ("$ref", "$dynamicRef"):
            reference = contents.get(key) if isinstance(contents, dict) else None
            if isinstance(reference, str):
                try:
                    resolver.lookup(reference)
                except referencing.exceptions.Unresolvable:
                    return reference
        todo.extend((each, resolver) for each in resource.subresources())
    return None


def load(path: Path) -> list[Case]:
    """Every case of a dataset, checked.

    A file holds a mapping with ``cases`` (and, if wanted, a ``description``)::

        cases:
          - id: csv-sum
            prompt: Add up the second column of data/sales.csv into total.txt.
            inputs: [data]              # relative to this file, inside its directory
            # or: repo: https://github.com/org/repo@v1.2
            timeout_seconds: 300        # 600 unless given
            checks:
              - file_exists: total.txt
              - file_contains: {path: total.txt, text: "1234"}
              - file_sha256: {path: total.txt, sha256: <64 hex digits>}
              - command: python -c "assert open('total.txt').read().strip() == '1234'"
              - answer_matches: "1234"  # a regular expression, searched in the answer
              - answer_json_schema: {type: object, required: [total]}
              - max_turns: 10
              - max_tokens: 50000
            rubric: The answer explains how the total was found.

    What each case guarantees once loaded: file checks name a path relative
    to the workspace, never absolute nor climbing out with ``..``; a SHA-256
    is 64 lowercase hexadecimal digits; a regular expression compiles; a
    schema is a valid JSON Schema (draft 2020-12) that refers only within
    itself (nothing is ever fetched); limits are whole numbers from 1; ids
    are unique across the dataset and safe in a workflow id; every input
    exists inside its file's directory, and no two inputs of a case share a
    name. A file is read with the safe loader, at most ``MAX_FILE_BYTES``,
    nested at most ``MAX_DEPTH`` deep, without YAML aliases (a few hundred
    bytes of aliases of aliases expand to gigabytes) and without a key given
    twice in one mapping.

    Args:
        path: a YAML file, or a directory of them (its ``*.yaml`` and
            ``*.yml`` files, in the order of their names; subdirectories are
            not read, so a case's input directories can sit beside it).

    Returns:
        The cases; ``BadDataset`` in one line for the first thing wrong.
    """
    if path.is_dir():
        files = sorted(
            each for each in path.iterdir() if each.suffix in (".yaml", ".yml") and each.is_file()
        )
        if not files:
            raise BadDataset(f"{path}: no *.yaml or *.yml file in this directory.")
    elif path.is_file():
        files = [path]
    else:
        raise BadDataset(f"{path}: no such file or directory.")
    cases: list[Case] = []
    ids: dict[str, Path] = {}
    for file in files:
        for case in _cases(file):
            if case.id in ids:
                where = "this file" if ids[case.id] == file else str(ids[case.id])
                raise BadDataset(
                    f"{file}: case {case.id!r}: id {case.id!r} is already a case's id in "
                    f"{where}: give each case an id of its own."
                )
            ids[case.id] = file
            cases.append(case)
    return cases


def _cases(file: Path) -> list[Case]:
    """The cases of one YAML file."""
    try:
        with file.open("rb") as opened:
            data = opened.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise BadDataset(f"{file}: cannot be read ({e.strerror or e}).") from e
    if len(data) > MAX_FILE_BYTES:
        raise BadDataset(
            f"{file}: over {MAX_FILE_BYTES:,} bytes (1 MiB): a dataset file is at most that "
            "(put large inputs beside it, or split its cases into several files)."
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadDataset(f"{file}: not UTF-8 text (byte {e.start}).") from e
    try:
        document = yaml.load(text, Loader=_Loader)  # noqa: S506 (a safe loader)
    except _NotAllowed as e:
        line = f"line {e.problem_mark.line + 1}: " if e.problem_mark is not None else ""
        raise BadDataset(f"{file}: {line}{e.problem}.") from e
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = f" at line {mark.line + 1}" if mark is not None else ""
        problem = _one_line(e.problem or e.context or "cannot be parsed")
        raise BadDataset(f"{file}: not YAML: {problem}{line}.") from e
    except yaml.YAMLError as e:
        raise BadDataset(f"{file}: not YAML: {_one_line(str(e))}.") from e
    if not isinstance(document, dict) or not isinstance(document.get("cases"), list):
        raise BadDataset(
            f"{file}: holds no list of cases: write a mapping with 'cases', a list of cases "
            "(- id: ..., prompt: ..., checks: [...])."
        )
    for key in document:
        if key not in FILE_KEYS:
            raise BadDataset(
                f"{file}: {shown(key)} is not one of {', '.join(FILE_KEYS)}: "
                "a dataset file holds its cases and, if wanted, a description."
            )
    if not document["cases"]:
        raise BadDataset(f"{file}: 'cases' is empty: give at least one case.")
    return [_case(file, place, raw) for place, raw in enumerate(document["cases"], start=1)]


class _Reader:
    """Reads one case, each refusal naming the file and the case."""

    def __init__(self, file: Path, label: str) -> None:
        self.file = file
        self.label = label

    def refused(self, text: str) -> BadDataset:
        return BadDataset(f"{self.file}: {self.label}: {text}.")

    def text(self, raw: dict[str, Any], key: str) -> str:
        value = raw[key]
        if not isinstance(value, str) or not value.strip():
            raise self.refused(f"{key} {shown(value)} is not allowed: give some text")
        return value

    def whole(self, name: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.refused(f"{name} {shown(value)} is not allowed: give a whole number from 1")
        return value

    def timeout(self, value: object, name: str = "timeout_seconds") -> float:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 < value <= LONGEST_TIMEOUT_SECONDS
        ):
            raise self.refused(
                f"{name} {shown(value)} is not allowed: give a number of seconds "
                f"above 0, at most {LONGEST_TIMEOUT_SECONDS:.0f} (a day)"
            )
        return float(value)

    def inputs(self, value: object) -> tuple[Path, ...]:
        """The inputs, resolved from the file's directory, each inside it."""
        if not isinstance(value, list) or not all(isinstance(each, str) for each in value):
            raise self.refused(
                f"inputs {shown(value)} is not allowed: give a list of paths relative to "
                "the dataset file ([data, notes.md])"
            )
        base = self.file.parent.resolve()
        found: dict[str, str] = {}
        paths: list[Path] = []
        for each in value:
            given = Path(each)
            if not each.strip() or given.is_absolute() or ".." in given.parts:
                raise self.refused(
                    f"input {shown(each)} is not allowed: give a path inside the dataset "
                    "file's directory, relative to it, without '..'"
                )
            path = (base / given).resolve()
            if not path.exists():
                raise self.refused(
                    f"input {shown(each)} does not exist in {self.file.parent}: give a file "
                    "or a directory there"
                )
            if path == base or not path.is_relative_to(base):
                raise self.refused(
                    f"input {shown(each)} is not inside {self.file.parent}: give a file or a "
                    "directory below the dataset file's directory (a link may not lead out)"
                )
            if path.name in found:
                raise self.refused(
                    f"inputs {shown(found[path.name])} and {shown(each)} share the name "
                    f"{path.name!r}: each input is placed at the top of the workspace under "
                    "its last part, so each needs a name of its own"
                )
            found[path.name] = each
            paths.append(path)
        return tuple(paths)

    def repo(self, value: object) -> str:
        """A repository of a form a run may be given; the
        service's REPO_ALLOWED_* settings are checked before any run starts
        (runner.prepare)."""
        if isinstance(value, str):
            try:
                repo_of(value)
            except BadInput as e:
                raise self.refused(str(e).replace("--repo", "repo", 1)) from None
            return value
        raise self.refused(
            f"repo {shown(value)} is not allowed: give a git URL, optionally @ a branch, tag "
            "or commit (https://github.com/org/repo@v1.2)"
        )

    def path(self, where: str, value: object) -> str:
        """A path relative to the workspace, as a plain POSIX path."""
        if not isinstance(value, str) or not value.strip() or "\0" in value or "\\" in value:
            raise self.refused(
                f"{where} path {shown(value)} is not allowed: give a path relative to the "
                "workspace (out/report.txt)"
            )
        posix = PurePosixPath(value)
        parts = [part for part in posix.parts if part != "."]
        if posix.is_absolute() or ".." in parts or not parts:
            raise self.refused(
                f"{where} path {shown(value)} is not allowed: give a path relative to the "
                "workspace, not absolute and without '..'"
            )
        return "/".join(parts)

    def fields(
        self, where: str, value: object, required: tuple[str, ...], optional: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        """``value`` as a mapping of exactly ``required`` (and ``optional``)."""
        shape = "{" + ", ".join(f"{key}: ..." for key in required + optional) + "}"
        if not isinstance(value, dict):
            raise self.refused(f"{where} {shown(value)} is not allowed: give {shape}")
        for key in value:
            if key not in required + optional:
                raise self.refused(f"{where} has an unknown key {shown(key)}: give {shape}")
        for key in required:
            if key not in value:
                raise self.refused(f"{where} has no {key!r}: give {shape}")
        return value

    def sandbox_check(self, where: str, kind: str, value: object) -> Check:
        if kind == "file_exists":
            return Check(kind=kind, path=self.path(where, value))
        if kind == "file_contains":
            fields = self.fields(where, value, ("path", "text"))
            text = fields["text"]
            if not isinstance(text, str) or not text:
                raise self.refused(f"{where} text {shown(text)} is not allowed: give some text")
            return Check(kind=kind, path=self.path(where, fields["path"]), text=text)
        if kind == "file_sha256":
            fields = self.fields(where, value, ("path", "sha256"))
            digest = fields["sha256"]
            if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
                raise self.refused(
                    f"{where} sha256 {shown(digest)} is not allowed: give 64 hexadecimal digits"
                )
            return Check(kind=kind, path=self.path(where, fields["path"]), sha256=digest.lower())
        # "command": the command alone, or {run: ..., timeout_seconds: ...}.
        run, timeout = value, 300.0
        if isinstance(value, dict):
            fields = self.fields(where, value, ("run",), ("timeout_seconds",))
            run = fields["run"]
            if "timeout_seconds" in fields:
                timeout = self.timeout(fields["timeout_seconds"], f"{where} timeout_seconds")
        if not isinstance(run, str) or not run.strip():
            raise self.refused(
                f"{where} {shown(run)} is not allowed: give a shell command that must exit 0"
            )
        return Check(kind=kind, command=run, timeout=timeout)


@dataclass
class _Answer:
    """The answer's checks of a case, as they are read."""

    matches: str | None = None
    schema: dict[str, Any] | None = None
    max_turns: int | None = None
    max_tokens: int | None = None


def _answer_check(reader: _Reader, where: str, kind: str, value: object, into: _Answer) -> None:
    if kind == "answer_matches":
        if not isinstance(value, str) or not value:
            raise reader.refused(
                f"{where} {shown(value)} is not allowed: give a regular expression"
            )
        try:
            re.compile(value)
        except re.error as e:
            raise reader.refused(
                f"{where} {shown(value)} is not a regular expression ({_one_line(str(e))})"
            ) from e
        into.matches = value
    elif kind == "answer_json_schema":
        if not isinstance(value, dict):
            raise reader.refused(
                f"{where} {shown(value)} is not allowed: give a JSON Schema as a mapping "
                "({type: object, required: [total]})"
            )
        try:
            jsonschema.Draft202012Validator.check_schema(value)
        except jsonschema.SchemaError as e:
            at = "/".join(str(part) for part in e.absolute_path)
            problem = _one_line(str(e.message))
            raise reader.refused(
                f"{where} is not a JSON Schema (draft 2020-12): {problem}"
                + (f" at {at}" if at else "")
            ) from e
        outside = _outside_reference(value)
        if outside is not None:
            raise reader.refused(
                f"{where} $ref {shown(outside)} is not allowed: refer only to a part of this "
                "schema (#/$defs/NAME): nothing is fetched, from the network or from a file"
            )
        into.schema = value
    elif kind == "max_turns":
        into.max_turns = reader.whole(where, value)
    else:
        into.max_tokens = reader.whole(where, value)


def _case(file: Path, place: int, raw: object) -> Case:
    """Case ``place`` (from 1) of ``file``."""
    reader = _Reader(file, f"case {place}")
    if not isinstance(raw, dict):
        raise reader.refused(
            f"{shown(raw)} is not a case: write each case as a mapping (- id: ..., prompt: ...)"
        )
    # Name the case by its id as soon as it has one worth naming it by.
    if isinstance(raw.get("id"), str) and ID.fullmatch(raw["id"]):
        reader.label = f"case {raw['id']!r}"
    for key in raw:
        if key not in CASE_KEYS:
            raise reader.refused(f"{shown(key)} is not one of {', '.join(CASE_KEYS)}")
    for key in ("id", "prompt"):
        if key not in raw:
            raise reader.refused(f"it has no {key!r}: every case has an id and a prompt")
    case_id = raw["id"]
    if not isinstance(case_id, str) or not ID.fullmatch(case_id):
        raise reader.refused(f"id {shown(case_id)} is not allowed: use {ID_ALLOWED}")
    prompt = reader.text(raw, "prompt")
    if "inputs" in raw and "repo" in raw:
        raise reader.refused(
            "it has both inputs and a repo: give one, as a run starts from one or the other"
        )
    inputs = reader.inputs(raw["inputs"]) if "inputs" in raw else ()
    repo = reader.repo(raw["repo"]) if "repo" in raw else None
    timeout = reader.timeout(raw["timeout_seconds"]) if "timeout_seconds" in raw else None
    rubric = reader.text(raw, "rubric") if "rubric" in raw else None
    checks = raw.get("checks", [])
    if not isinstance(checks, list):
        raise reader.refused(
            f"checks {shown(checks)} is not allowed: give a list of one-key mappings "
            "(- file_exists: out.txt)"
        )
    if not checks and rubric is None:
        raise reader.refused(
            "it has no checks and no rubric: give at least one, or every run of it passes"
        )
    sandbox: list[Check] = []
    answer = _Answer()
    given: set[str] = set()
    for number, check in enumerate(checks, start=1):
        if not isinstance(check, dict) or len(check) != 1:
            raise reader.refused(
                f"check {number} {shown(check)} is not allowed: write each check as a "
                "one-key mapping (- file_exists: out.txt)"
            )
        [(kind, value)] = check.items()
        if kind not in CHECKS:
            raise reader.refused(f"check {shown(kind)} is not one of {', '.join(CHECKS)}")
        where = f"check {number} ({kind})"
        if kind in SANDBOX_CHECKS:
            sandbox.append(reader.sandbox_check(where, kind, value))
            continue
        if kind in given:
            raise reader.refused(f"{where} is given twice: give each answer check once")
        given.add(kind)
        _answer_check(reader, where, kind, value, answer)
    return Case(
        id=case_id,
        prompt=prompt,
        inputs=inputs,
        repo=repo,
        sandbox_checks=tuple(sandbox),
        answer_matches=answer.matches,
        answer_json_schema=answer.schema,
        max_turns=answer.max_turns,
        max_tokens=answer.max_tokens,
        timeout_seconds=TIMEOUT_SECONDS if timeout is None else timeout,
        rubric=rubric,
        source=file,
    )
