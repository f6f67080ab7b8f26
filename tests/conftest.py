"""Suite-wide: daemons built by tests bind their API on a free port (tests run in parallel, and a
person's daemon may hold the default 8780)."""

import os

os.environ.setdefault("VIGIL_API__PORT", "0")
