"""Suite-wide settings.

- Daemons built by tests bind their API on a free port (tests run in parallel, and a person's
  daemon may hold the default 8780).
- Hypothesis has no per-example deadline: its default (200 ms) fails a correct test on a loaded
  machine, and the suite must pass with another ``make test`` running beside it. Examples stay
  bounded by pytest-timeout.
"""

import os

from hypothesis import settings

os.environ.setdefault("VIGIL_API__PORT", "0")

settings.register_profile("vigil", deadline=None)
settings.load_profile("vigil")
