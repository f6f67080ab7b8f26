"""Suite-wide settings.

- Daemons built by tests bind their API on a free port (tests run in parallel, and a person's
  daemon may hold the default 8780).
- Daemons built inside the test process serve their API on their own loop (``isolation =
  "inline"``): a child process per in-process daemon would be spawned for nothing. Daemons run as
  processes (``fakes.daemon``) keep the default, an API process of their own, and
  ``tests/e2e/test_api_process.py`` and ``tests/integration/test_api_proxy.py`` test it.
- Logging is put back as it was after each test: an in-process ``vigil`` command
  (``runner.cli.main``) configures it as a process would, its root handler writing to that
  test's captured stderr. Left in place, every later test on that worker failed each log line on
  the closed stream and printed its traceback (33,499 of them in one run, whose property tests
  then ran past their timeout).
- Regime fits are cached for the run, not in the user's ``~/.cache``: ``XDG_CACHE_HOME`` points
  every test process (xdist workers, and the replays and daemons they start) at one folder of
  this run's base temp dir, and ``fakes.daemon`` gives the daemons it starts that fit cache. A
  fit is a pure function of its candles and settings (``regime.fit_cache``), so a warm-up the
  ~30 daemon starts share is fitted once per run, not ~9 CPU-seconds each time; and what a run
  fits never depends on what an earlier run left (a clean CI machine has no cache).
- Hypothesis has no per-example deadline: its default (200 ms) fails a correct test on a loaded
  machine, and the suite must pass with another ``make test`` running beside it. Examples stay
  bounded by pytest-timeout.
- ``HYPOTHESIS_PROFILE=ci`` (set by ``.ci/run``) derandomizes Hypothesis: each property
  test draws the same examples on every run, so a CI result follows from the commit alone and
  a red run is reproducible. A plain ``make test`` draws fresh examples each time, to explore.
  (Not a ``VIGIL_`` name: the daemon refuses an unknown ``VIGIL_`` variable as a mistyped setting.)
- ``HYPOTHESIS_PROFILE=deep`` (set by ``make fuzz``) is ``vigil`` with 1000 examples per
  property test, to find what the default 100 miss. A test whose own ``@settings`` names
  ``max_examples`` names it through ``property_budget.examples``: at most 100 in ``make test``,
  its own number or 1000, whichever is more, under ``deep`` (the decorator wins over a profile).
"""

import logging
import os
from collections.abc import Iterator

import pytest
from hypothesis import settings
from property_budget import DEEP_MIN

from runner import logging_setup

# fixtures several modules share (state_dir, no_host_settings, own_config)
pytest_plugins = ["fakes.api_support", "fakes.host_settings"]

os.environ.setdefault("VIGIL_API__PORT", "0")
os.environ.setdefault("VIGIL_API__ISOLATION", "inline")

# derandomize is explicit: a profile leaves an unset value to whichever profile is loaded,
# so under ``ci`` a ``deep`` inheriting an unset one would have read derandomized too.
settings.register_profile("vigil", deadline=None, derandomize=False)
settings.register_profile("ci", settings.get_profile("vigil"), derandomize=True)
settings.register_profile("deep", settings.get_profile("vigil"), max_examples=DEEP_MIN)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "vigil"))


def _pytests(handler: logging.Handler) -> bool:
    """pytest's own capture handlers: it adds and removes them around each test phase."""
    return type(handler).__module__.startswith("_pytest")


@pytest.fixture(scope="session", autouse=True)
def _one_fit_cache_for_the_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    base = tmp_path_factory.getbasetemp()
    run_root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # xdist: shared
    cache = run_root / "xdg-cache"
    cache.mkdir(exist_ok=True)
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    yield
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = [h for h in root.handlers if not _pytests(h)], root.level
    noisy = {name: logging.getLogger(name).level for name in logging_setup.NOISY_LOGGERS}
    clock, redactor = logging_setup._filter.clock, logging_setup._redacting.redactor
    yield
    for handler in root.handlers:
        if not _pytests(handler) and handler not in handlers:
            handler.close()  # a test's: its stream or file is that test's
    root.handlers[:] = [*(h for h in root.handlers if _pytests(h)), *handlers]
    root.setLevel(level)
    for name, noisy_level in noisy.items():
        logging.getLogger(name).setLevel(noisy_level)
    logging_setup._filter.clock, logging_setup._redacting.redactor = clock, redactor
