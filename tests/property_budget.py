"""How many examples a property test that names its own count runs, by Hypothesis profile.

A test's ``@settings(max_examples=N)`` wins over the loaded profile, so the counts written into
the tests (up to 3,000, chosen to reach rare floats and orders) were what every ``make test``
ran: about a fifth of the suite's CPU time. ``examples(N)`` keeps the author's ``N`` where it
is wanted and bounds it where it is not:

- ``vigil`` (a plain ``make test``) and ``ci`` (``.ci/run``): at most ``SUITE_MAX`` (Hypothesis's
  own default), so the suite stays within its time; ``ci`` still draws the same examples each run.
- ``deep`` (``make fuzz``): ``N`` or the profile's 1000, whichever is more.
"""

from __future__ import annotations

import os

SUITE_MAX = 100
DEEP_MIN = 1000


def examples(wanted: int) -> int:
    if os.environ.get("HYPOTHESIS_PROFILE") == "deep":
        return max(wanted, DEEP_MIN)
    return min(wanted, SUITE_MAX)
