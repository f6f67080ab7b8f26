"""Suite-wide settings.

- Daemons built by tests bind their API on a free port (tests run in parallel, and a person's
  daemon may hold the default 8780).
- Daemons built inside the test process serve their API on their own loop (``isolation =
  "inline"``): a child process per in-process daemon would be spawned for nothing. Daemons run as
  processes (``fakes.daemon``) keep the default, an API process of their own, and
  ``tests/e2e/test_api_process.py`` and ``tests/integration/test_api_proxy.py`` test it.
- Hypothesis has no per-example deadline: its default (200 ms) fails a correct test on a loaded
  machine, and the suite must pass with another ``make test`` running beside it. Examples stay
  bounded by pytest-timeout.
"""

import os

from hypothesis import settings

os.environ.setdefault("VIGIL_API__PORT", "0")
os.environ.setdefault("VIGIL_API__ISOLATION", "inline")

settings.register_profile("vigil", deadline=None)
settings.load_profile("vigil")
