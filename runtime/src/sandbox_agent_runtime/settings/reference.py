"""The settings' reference page, made from their declarations.

``python -m sandbox_agent_runtime.settings.reference > docs/settings.md``
writes it; ``--json`` writes the data a render's ``.env.example`` is made
from (``docs/settings.json``). The runtime's tests fail when either
committed file differs from what the declarations make.
"""

import json
import sys

from sandbox_agent_runtime.backends import Option, backend_module, variable
from sandbox_agent_runtime.service import BACKENDS
from sandbox_agent_runtime.settings.declared import COMMANDS, SETTINGS, Command, Setting

_WHEN = {
    "": "",
    "approvals": " (with approvals)",
    "host-bound backend": " (with a host-bound backend: local, docker)",
    "docker backend": " (with the docker backend)",
}
_TITLES: dict[Command, str] = {
    "worker": "The worker",
    "starter": "The starter (and the evaluations)",
    "codec server": "The codec server",
    "API": "The API (and the starter's settings)",
}


def _row(setting: Setting) -> str:
    allowed = setting.allowed()
    return (
        f"| `{setting.name}`{_WHEN[setting.when]} | {setting.shown_default()} | "
        f"{allowed}{'.' if allowed and not allowed.endswith('.') else ''} | {setting.help} |"
    )


def _option_default(option: Option) -> str:
    if option.default is None:
        return f"the service's workflow execution timeout, at most {option.high}"
    if callable(option.default):
        return "the service's name"
    if option.default == "":
        return option.shown(option.default)
    return f"`{option.shown(option.default)}`"


def page() -> str:
    """The reference page, in Markdown."""
    lines = [
        "# Settings",
        "",
        "<!-- Made by `uv run python -m sandbox_agent_runtime.settings.reference`"
        " from the declarations in src/sandbox_agent_runtime/settings/declared.py:"
        " edit those, not this page. -->",
        "",
        "Every environment variable the runtime's commands read themselves, read once at start."
        " A value a command cannot use stops it before it does anything, with one line naming"
        " the variable, the value and what is allowed (the worker exits 1, the starter with its"
        " bad-usage status, the codec server and the API with theirs). Unset, a variable takes"
        " its default; set to nothing (`NAME=`) it is refused like any other bad value: leave it"
        " out, or its line commented, for the default. A value that may hold a credential is"
        " never printed whole.",
        "",
        "Not here: Temporal's own connection settings (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`,"
        " `TEMPORAL_API_KEY`, ...: Temporal's environment configuration), the credentials the"
        " worker checks (`OPENAI_API_KEY`, each backend's), and what each SDK reads itself"
        " (`OPENAI_BASE_URL`, `DOCKER_HOST`, the AWS credentials and `AWS_ENDPOINT_URL`).",
    ]
    for command in COMMANDS:
        lines += [
            "",
            f"## {_TITLES[command]}",
            "",
            "| Variable | Default | Allowed | What it does |",
            "|---|---|---|---|",
            *(_row(setting) for setting in SETTINGS if command in setting.readers),
        ]
    lines += [
        "",
        "## Each backend's options (the worker, with that backend)",
        "",
        "Declared in each backend's module (`backends/`); recorded in each run's history.",
        "",
        "| Variable | Default | Allowed |",
        "|---|---|---|",
    ]
    for backend in BACKENDS:
        for key, option in backend_module(backend).OPTIONS.items():
            lines.append(
                f"| `{variable(backend, key)}` | {_option_default(option)} | "
                f"{option.description()}. |"
            )
    return "\n".join(lines) + "\n"


def _example(setting: Setting) -> str:
    """The value ``.env.example`` shows on its commented line."""
    if setting.default is not None:
        return str(setting.default)
    if setting.kind in ("address", "url"):
        return setting.example
    return ""


def data() -> str:
    """The declarations a render's template reads, as JSON."""
    return (
        json.dumps(
            [
                {
                    "name": setting.name,
                    "readers": list(setting.readers),
                    "when": setting.when,
                    "help": setting.help,
                    "example": _example(setting),
                }
                for setting in SETTINGS
            ],
            indent=1,
        )
        + "\n"
    )


def main() -> None:
    """Print the page, or (``--json``) the data."""
    sys.stdout.write(data() if sys.argv[1:] == ["--json"] else page())


if __name__ == "__main__":
    main()
