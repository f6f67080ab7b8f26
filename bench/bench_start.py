"""The daemon's start-up: ``vigil run --sim`` from a fresh state dir until it is ready to decide.

Ready is the warm-up's last line (``warm-up: crypto regimes ...``): the recent candles seeded, the
4h history fetched through ccxt from the simulator's REST, and every ticker's regime model fitted.
Each round starts the daemon as a user does, in a new state dir with no regime-fit cache (a
restarted daemon fits again at start-up unless ``regime.fit_cache_dir`` is set), then stops it
with SIGTERM. Printed per round and as the median: the wall seconds to ready, and the CPU seconds
of the whole run (start-up and the stop), the daemon's and every process it waited for (its API
process and its regime fit process) included.

Run: ``python -m bench start [--rounds N]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

READY_LINE = b"warm-up: crypto regimes"
READY_TIMEOUT_SECS = 300.0
POLL_SECS = 0.05


def one_start(scratch: Path) -> tuple[float, float]:
    """(wall seconds to ready, CPU seconds of the daemon and what it waited for)."""
    state, log = scratch / "state", scratch / "stderr.log"
    vigil = Path(sys.executable).with_name("vigil")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    started = time.monotonic()
    with log.open("wb") as stderr:
        daemon = subprocess.Popen(
            [str(vigil), "--state-dir", str(state), "run", "--sim"],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=env,
        )
    try:
        while READY_LINE not in log.read_bytes():
            if daemon.poll() is not None:
                raise RuntimeError(f"the daemon exited with {daemon.returncode}: {log.read_text()}")
            if time.monotonic() - started > READY_TIMEOUT_SECS:
                raise TimeoutError(f"not ready after {READY_TIMEOUT_SECS:.0f} s")
            time.sleep(POLL_SECS)
        ready_secs = time.monotonic() - started
    finally:
        daemon.send_signal(signal.SIGTERM)
    _, status, usage = os.wait4(daemon.pid, 0)
    daemon.returncode = os.waitstatus_to_exitcode(status)  # waited here, not by Popen
    return ready_secs, usage.ru_utime + usage.ru_stime


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench start")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(list(argv))
    ready: list[float] = []
    cpu: list[float] = []
    for round_no in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory(prefix="bench_start_") as scratch:
            wall_secs, cpu_secs = one_start(Path(scratch))
        ready.append(wall_secs)
        cpu.append(cpu_secs)
        print(
            f"  round {round_no}: ready in {wall_secs:.2f} s, {cpu_secs:.2f} s of CPU", flush=True
        )
    print(
        f"vigil run --sim, 3 tickers, no fit cache: ready in {statistics.median(ready):.2f} s "
        f"(median of {args.rounds}), {statistics.median(cpu):.2f} s of CPU with its child processes"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
