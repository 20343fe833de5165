"""A request's body as the routes read it: JSON or a form with files, each
field of the route's model (models.py) and of its JSON type, refused past
the route's limits with one ``Problem`` naming the value; uploaded files
packed as ``--input`` packs them, and nothing kept once packed or refused."""

import asyncio
import dataclasses
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from fastapi import Request
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException

from sandbox_agent_runtime.api.models import Fields
from sandbox_agent_runtime.api.problems import Problem
from sandbox_agent_runtime.archives import BadInput, inputs_of, size_text
from sandbox_agent_runtime.run_request import Input
from sandbox_agent_runtime.service import budgets_given, current
from sandbox_agent_runtime.shared import (
    INLINE_FILES_LIMIT,
    LONGEST_PROMPT,
    MOST_FILES,
    STORED_FILES_LIMIT,
)

# The most a JSON body may weigh (a prompt is at most LONGEST_PROMPT bytes).
LARGEST_JSON = LONGEST_PROMPT + 64 * 1024
# What a multipart body may weigh beside its files: its fields and the
# parts' headers.
MULTIPART_OVERHEAD = LONGEST_PROMPT + 1024 * 1024
# Without an object store, a run's request (or a follow-up) travels in
# history as one payload, which Temporal takes up to 2 MiB: its files,
# packed (each a gzipped tar in base64, with its name and checksum), weigh
# at most what is left beside the longest prompt. INLINE_FILES_LIMIT of
# files in one input fits; thousands of small ones may not.
INLINE_REQUEST = 2 * 1024 * 1024 - LONGEST_PROMPT - 64 * 1024


def json_types(model: type[Fields]) -> dict[str, type]:
    """Each field of ``model`` and the JSON type it takes: a string, a
    boolean, or (a budget: a JSON number, or a form's text) anything
    budgets_in() reads."""
    return {
        name: field.annotation if field.annotation in (str, bool) else object
        for name, field in model.model_fields.items()
    }


async def body_of(request: Request, limit: int) -> bytes:
    """The request's body, refused (413) past ``limit`` bytes before more is read."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise Problem(
            413, f"the body weighs {int(length):,} bytes, over the {limit:,} this route takes."
        )
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise Problem(413, f"the body weighs over {limit:,} bytes, the most this route takes.")
    return bytes(body)


def json_object(body: bytes, allowed: dict[str, type]) -> dict[str, Any]:
    """``body`` as a JSON object of ``allowed`` fields, each of its type."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise Problem(400, f"the body is not JSON ({e}): send a JSON object.") from e
    except RecursionError as e:
        raise Problem(
            400,
            "the body nests too deep to read: send a JSON object of this route's fields, "
            "each a string, a number or a boolean.",
        ) from e
    if not isinstance(value, dict):
        raise Problem(
            400, f"the body is a JSON {type(value).__name__}, not an object: send a JSON object."
        )
    for name, field_value in value.items():
        if isinstance(field_value, str):
            text_field(name, field_value)
        if name not in allowed:
            raise Problem(
                422, f"field {name[:40]!r} is not one of this route's: {', '.join(allowed)}."
            )
        kind = allowed[name]
        if not isinstance(field_value, kind) or (kind is int and isinstance(field_value, bool)):
            raise Problem(
                422,
                f"field {name!r} is a JSON {type(field_value).__name__}: it must be a "
                f"{'boolean' if kind is bool else 'string' if kind is str else kind.__name__}.",
            )
    return value


def text_field(name: str, value: str) -> str:
    """``value``, refused (422) when it holds a lone surrogate: JSON's
    ``\\ud800`` escape, half of a pair, which no UTF-8 carries (a run's
    request could not be sent to its worker)."""
    try:
        value.encode()
    except UnicodeEncodeError as e:
        raise Problem(
            422,
            f"field {name[:40]!r} holds a lone surrogate ({value[e.start]!r}) at character "
            f"{e.start}: send Unicode text; a surrogate only as half of a pair.",
        ) from e
    return value


def prompt_in(fields: dict[str, Any]) -> str:
    prompt = fields.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise Problem(422, "field 'prompt' is missing or blank: say what the agent should do.")
    if len(prompt.encode()) > LONGEST_PROMPT:
        raise Problem(
            413,
            f"field 'prompt' weighs {len(prompt.encode()):,} bytes, over the {LONGEST_PROMPT:,} a run "
            "takes (LONGEST_PROMPT): put the material in a file and ask about it instead.",
        )
    return prompt


def budgets_in(fields: dict[str, Any]) -> tuple[int | None, float | None]:
    """The request's own token and cost budgets (None: the service's)."""
    tokens = fields.get("token_budget")
    # A whole number written with a point (JSON's 1500.0) is a whole number.
    if isinstance(tokens, float) and tokens.is_integer() and abs(tokens) < 2**53:
        tokens = int(tokens)
    try:
        return budgets_given(
            tokens,
            fields.get("cost_budget_usd"),
            ("field 'token_budget'", "field 'cost_budget_usd'"),
            current().budget(),
        )
    except ValueError as e:
        raise Problem(422, f"{e}.") from e


def boolean(fields: dict[str, Any], name: str) -> bool:
    value = fields.get(name, False)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off", ""):
        return False
    raise Problem(422, f"field {name!r} is {str(value)[:40]!r}: use true or false.")


def file_path(name: str) -> list[str]:
    """An uploaded file's name, as the workspace takes it: a plain name (a
    file at the top), or a path of plain names (``skills/notes/SKILL.md``: a
    file in a directory at the top, the directory an input as the starter's
    ``--input skills/``); nothing that climbs or hides. Its parts."""
    parts = name.split("/")
    if (
        not name
        or len(name.encode()) > 4096
        or "\\" in name
        or not name.isprintable()
        or any(part in ("", ".", "..") or len(part.encode()) > 255 for part in parts)
    ):
        raise Problem(
            400,
            f"file name {name[:80]!r} is not allowed: use a plain name, or a path of plain "
            "names under a directory (no '\\', '..', '.' or empty parts, no characters that do "
            "not print), each at most 255 bytes.",
        )
    return parts


def saved_at(directory: Path, parts: list[str]) -> Path:
    """Where an uploaded file of ``parts`` is saved in ``directory``, its
    directories made; refused when a file already has its path, or one of
    its directories'."""
    path = directory.joinpath(*parts)
    for above in [*reversed(path.parents[: len(parts) - 1]), path]:
        if above.is_file() or (above == path and above.exists()):
            taken = "/".join(above.relative_to(directory).parts)
            raise Problem(400, f"two files are named {taken!r}: each must have its own name.")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


class Body:
    """A run's or a follow-up's request: its fields and, from a multipart
    body, its files, saved in a directory of their own until they are packed."""

    def __init__(self, fields: dict[str, Any], inputs: list[Input]) -> None:
        self.fields = fields
        self.inputs = inputs


async def read_body(request: Request, model: type[Fields], has_store: bool) -> Body:
    """A JSON or ``multipart/form-data`` body with ``model``'s fields, and
    files (``files`` parts) packed as ``--input`` packs them, with the same
    limits; nothing of it is kept once packed or refused."""
    allowed = json_types(model)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        return Body(json_object(await body_of(request, LARGEST_JSON), allowed), [])
    if kind not in ("multipart/form-data", "application/x-www-form-urlencoded"):
        raise Problem(
            415,
            f"content type {kind or 'none'!r} is not taken here: send application/json, or "
            "multipart/form-data (with files) or application/x-www-form-urlencoded.",
        )
    files_limit = STORED_FILES_LIMIT if has_store else INLINE_FILES_LIMIT
    length = request.headers.get("content-length")
    if length is None or not length.isdigit():
        raise Problem(411, "a form's body needs a Content-Length: send its length.")
    if int(length) > files_limit + MULTIPART_OVERHEAD:
        how = (
            "through the object store"
            if has_store
            else "without an object store (OBJECT_STORE_URL)"
        )
        raise Problem(
            413,
            f"the body weighs {int(length):,} bytes; a run takes at most "
            f"{size_text(files_limit)} of files {how}.",
        )
    directory = Path(tempfile.mkdtemp(prefix="api-inputs-"))
    try:
        try:
            form = await request.form(max_files=MOST_FILES, max_fields=len(allowed) + 1)
        except HTTPException as e:
            raise Problem(
                400, f"the multipart body cannot be read: {str(e.detail).rstrip('.')}."
            ) from e
        try:
            fields: dict[str, Any] = {}
            paths: list[str] = []
            for name, value in form.multi_items():
                if isinstance(value, UploadFile):
                    if name != "files":
                        raise Problem(
                            422, f"part {name[:40]!r} holds a file: send files as 'files' parts."
                        )
                    parts = file_path(value.filename or "")
                    path = saved_at(directory, parts)
                    with path.open("wb") as out:
                        await asyncio.to_thread(shutil.copyfileobj, value.file, out)
                    # Each input once: a file, or the directory at the top.
                    top = str(directory / parts[0])
                    if top not in paths:
                        paths.append(top)
                    continue
                if name not in allowed or name in fields:
                    raise Problem(
                        422,
                        f"part {name[:40]!r} is not one of this route's (once each): "
                        f"{', '.join([*allowed, 'files'])}.",
                    )
                fields[name] = text_field(name, value)
        finally:
            await form.close()
        try:
            inputs = await asyncio.to_thread(inputs_of, paths, has_store)
        except BadInput as e:
            text = str(e).replace(str(directory) + "/", "").replace("--input", "file")
            raise Problem(413 if "weigh" in text else 422, text + ".") from e
        if not has_store:
            packed = len(json.dumps([dataclasses.asdict(each) for each in inputs]))
            if packed > INLINE_REQUEST:
                raise Problem(
                    413,
                    f"field 'files': {len(inputs):,} files pack to {size_text(packed)}, over the "
                    f"{size_text(INLINE_REQUEST)} a request carries without an object store "
                    "(OBJECT_STORE_URL): send fewer files (many small ones as one archive), or "
                    "set OBJECT_STORE_URL.",
                )
        return Body(fields, inputs)
    finally:
        await asyncio.to_thread(shutil.rmtree, directory, True)
