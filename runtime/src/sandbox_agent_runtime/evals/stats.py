"""How sure a pass rate is: the Wilson score interval, and the rule that
tells a real drop from noise.

With a handful of repetitions a rate alone misleads (3 passes of 5 is
"60%", yet anything from 23% to 88% fits it), so every rate in a report
carries its 95% interval, and a comparison calls a drop a regression only
when the two rates lie outside each other's intervals (``clear_drop``).
The Wilson interval stays inside [0, 1] and is sound at 0 and at all
passes, where the textbook normal interval collapses to a point.
"""

import math

# The z of a two-sided 95% interval.
Z95 = 1.96


def wilson(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` in ``trials`` (low, high);
    (0.0, 1.0), knowing nothing, for no trials."""
    if trials <= 0:
        return (0.0, 1.0)
    if not 0 <= successes <= trials:
        raise ValueError(f"{successes} successes in {trials} trials")
    rate = successes / trials
    z2 = z * z
    centre = (rate + z2 / (2 * trials)) / (1 + z2 / trials)
    half = (z / (1 + z2 / trials)) * math.sqrt(
        rate * (1 - rate) / trials + z2 / (4 * trials * trials)
    )
    # Exact at the ends: rounding must not put 5 of 5 below 1.0.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return (low, high)


def clear_drop(
    old_rate: float,
    old_interval: tuple[float, float],
    new_rate: float,
    new_interval: tuple[float, float],
) -> bool:
    """Whether a pass rate fell by more than chance explains: the new rate
    is below the old one's interval, and the old rate above the new one's."""
    return new_rate < old_interval[0] and old_rate > new_interval[1]
