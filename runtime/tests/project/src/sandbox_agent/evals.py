"""The evaluation command (sandbox-agent-eval): runs the datasets of evals/
through the service, several times each, with the agent's model, and writes
what each case scored and cost (runs.PRICES) to eval-report/ (docs/evaluations.md).

    uv run sandbox-agent-eval evals/ --repeat 3
"""

from collections.abc import Sequence
from typing import NoReturn

from sandbox_agent_runtime import Price, evals_main, exit_after

from sandbox_agent import agent, runs


def main(argv: Sequence[str] | None = None) -> None:
    """The command, with ``argv`` for its arguments (the tests call this):
    the agent's model and settings (a rubric's grader too), its tokens
    priced by runs.PRICES. cli() runs this: what it is given, it is given here."""
    evals_main(
        argv,
        model=agent.MODEL,
        model_settings=agent.MODEL_SETTINGS,
        prices={model: Price(**price) for model, price in runs.PRICES.items()},
    )


def cli() -> NoReturn:
    """The installed command: main(), then exit with its status."""
    exit_after(main)


if __name__ == "__main__":
    cli()
