"""Over Chat Completions, the agent's freeform tool (the sandbox's
apply_patch) is offered as a function of one string and the model's call of
it comes back as the freeform call the tool takes, the earlier calls in the
conversation turned the same way; and no context_management (the Responses
API's compaction) reaches the endpoint (model_api.FreeformToolsAsFunctions)."""

import json
from typing import Any

from agents import CustomTool, FunctionTool, ModelResponse, ModelSettings, Usage
from agents.models.interface import Model
from openai.types.responses import ResponseCustomToolCall, ResponseFunctionToolCall

from sandbox_agent_runtime.model_api import FreeformToolsAsFunctions

PATCH = "*** Begin Patch\n*** Add File: a.txt\n+é\n*** End Patch\n"


class Recording(Model):
    """A Chat Completions model stand-in: it records what it is given and
    calls the tool named ``apply_patch`` with PATCH."""

    def __init__(self) -> None:
        self.given: dict[str, Any] = {}

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        self.given = {"input": input, "settings": model_settings, "tools": tools}
        call = ResponseFunctionToolCall(
            arguments=json.dumps({"input": PATCH}),
            call_id="call_2",
            name="apply_patch",
            type="function_call",
            id="fc_2",
        )
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def test_a_freeform_tool_goes_as_a_function_and_its_call_comes_back_freeform() -> None:
    inner = Recording()
    patch_tool = CustomTool(
        name="apply_patch", description="Edit files.", on_invoke_tool=lambda *_: None
    )
    earlier: Any = [
        {"role": "user", "content": "Write a.txt."},
        {
            "type": "custom_tool_call",
            "call_id": "call_1",
            "name": "apply_patch",
            "input": PATCH,
            "id": "ctc_1",
        },
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Done"},
    ]
    settings = ModelSettings(extra_args={"context_management": [{"type": "compaction"}], "seed": 7})
    response = await FreeformToolsAsFunctions(inner).get_response(
        None,
        earlier,
        settings,
        [patch_tool],
        None,
        [],
        None,
        previous_response_id=None,
        conversation_id=None,
        prompt=None,
    )

    [tool] = inner.given["tools"]
    assert isinstance(tool, FunctionTool) and tool.name == "apply_patch"
    assert tool.params_json_schema["required"] == ["input"]
    assert inner.given["input"][1] == {
        "type": "function_call",
        "call_id": "call_1",
        "name": "apply_patch",
        "arguments": json.dumps({"input": PATCH}),
        "id": "ctc_1",
    }
    assert inner.given["input"][2] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "Done",
    }
    assert inner.given["settings"].extra_args == {"seed": 7}
    [call] = response.output
    assert (
        isinstance(call, ResponseCustomToolCall)
        and call.input == PATCH
        and call.call_id == "call_2"
    )
