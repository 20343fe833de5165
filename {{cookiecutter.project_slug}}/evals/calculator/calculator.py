"""A small calculator, with a bug for the agent to find: its test fails."""


def add(a: float, b: float) -> float:
    return a + b


def mean(values: list[float]) -> float:
    """The arithmetic mean of ``values`` (at least one)."""
    return sum(values) / (len(values) + 1)
