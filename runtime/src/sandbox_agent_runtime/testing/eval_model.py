"""A scripted model for evaluations: keyed by the case (its prompt) and the
repetition, so a test knows exactly what each attempt does, and so what the
report must say (a flaky case at --repeat 5 passing exactly 3 times).

A run's first model call takes the next repetition of its prompt; the first
command it asks for carries it (``: run-N;``, a shell no-op), so every later
call of the run, which sees that command in its input, is scripted for the
same repetition, however the runs interleave."""

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agents import ModelResponse

from sandbox_agent_runtime.testing.scripted_model import Call, ScriptedModel, user_messages

_MARK = re.compile(r": run-(\d+);")


class EvalModel(ScriptedModel):
    """``scripts``: a case's prompt -> its commands for repetition N (from 1)."""

    def __init__(self, scripts: Mapping[str, Callable[[int], Sequence[str]]]) -> None:
        super().__init__([])
        self.scripts = scripts
        # Runs started, by prompt.
        self.started: dict[str, int] = {}

    def _respond(self, input: str | list[Any]) -> ModelResponse:
        prompt = user_messages(input)[0]
        mark = _MARK.search(json.dumps(input))
        if mark is None:
            repetition = self.started[prompt] = self.started.get(prompt, 0) + 1
        else:
            repetition = int(mark.group(1))
        commands: list[str | Call] = list(self.scripts[prompt](repetition))
        if commands and isinstance(commands[0], str):
            commands[0] = f": run-{repetition}; {commands[0]}"
        # _respond runs whole between two awaits: no other run sees these.
        self.commands = commands
        return super()._respond(input)
