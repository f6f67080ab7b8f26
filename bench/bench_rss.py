"""Resident memory (issue #18): the sim daemon in steady state and a week's replay at its peak.

Each figure is a process of its own, started as a user starts it:

- daemon: ``vigil run --sim`` (fallback decider, paper broker, the simulator in-process) in a fresh
  state dir; once its journal holds ``--decisions`` lines (default 20), its VmRSS and VmHWM from
  /proc, and the RSS of each of its children at that moment (the regime fit process lives only
  while a day's fits run; multiprocessing's resource tracker stays). Then SIGTERM.
- replay: ``vigil replay --from 2025-03-01 --to 2025-03-07`` (fallback decider) into a temp folder,
  in a wrapper process that prints its own VmHWM after ``runner.cli.main`` returns: the replay
  process's peak, the fit pool's workers not included (their peak is printed beside it).
- ``--holders``: what each large dependency costs on its own, VmRSS before and after importing it
  in a fresh interpreter (numpy first, as in the daemon), and the recorded feed of 3 tickers.

Runs: ``python -m bench rss`` (both), ``python -m bench rss --daemon`` / ``--replay`` /
``--holders`` (one), ``--decisions N``, ``--from`` / ``--to`` for the replay's span.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

TARGET_MIB = 250.0
DAEMON_TIMEOUT_SECS = 600.0
POLL_SECS = 0.5
KIB_PER_MIB = 1024

_REPLAY_WRAPPER = """
import resource, sys
from runner.cli import main
code = main(sys.argv[1:])
status = open("/proc/self/status").read()
hwm = next(int(l.split()[1]) for l in status.splitlines() if l.startswith("VmHWM:"))
children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(f"RSS-PEAK {hwm} {children} {code}", flush=True)
"""

_HOLDER_PROBE = """
import importlib, sys
def rss():
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith("VmRSS:"))
import numpy
before = rss()
for name in sys.argv[1:]:
    if name == "slim-ccxt":
        from market.ccxt_slim import exchange_class
        exchange_class("binanceusdm")
    else:
        importlib.import_module(name)
print(rss() - before)
"""

_FEED_PROBE = """
import gc
def rss():
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith("VmRSS:"))
from runner.config import load_settings
from sim.feed import SimFeed
settings = load_settings()
gc.collect()
before = rss()
feed = SimFeed(("BTC/USDT", "ETH/USDT", "SOL/USDT"), data_dir=settings.data_dir)
gc.collect()
print(rss() - before)
"""

#: (label, modules imported after numpy, in a fresh interpreter)
HOLDERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pandas", ("pandas",)),
    ("scikit-learn + SciPy (hmmlearn.hmm, the fit)", ("hmmlearn.hmm",)),
    ("hmmlearn._hmmc (the predict)", ("hmmlearn._hmmc",)),
    ("ccxt.async_support, every exchange", ("ccxt.async_support",)),
    ("ccxt binanceusdm alone (market.ccxt_slim)", ("slim-ccxt",)),
    ("fastapi + uvicorn (operator API)", ("fastapi", "uvicorn")),
)


def _status_kib(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _children(pid: int) -> list[int]:
    """Every thread's children: a child started from a worker thread is listed under that thread."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return sorted(set(found))


def _mib(kib: int | None) -> str:
    return "n/a" if kib is None else f"{kib / KIB_PER_MIB:,.1f} MiB"


def _verdict(kib: int | None) -> str:
    if kib is None:
        return ""
    return "  (target <= 250 MiB: " + ("met)" if kib / KIB_PER_MIB <= TARGET_MIB else "NOT met)")


def _journal_lines(path: Path) -> int:
    try:
        with path.open("rb") as handle:
            return sum(1 for _ in handle)
    except OSError:
        return 0


def measure_daemon(decisions: int) -> None:
    vigil = Path(sys.executable).with_name("vigil")
    with tempfile.TemporaryDirectory(prefix="bench_rss_") as scratch:
        state = Path(scratch) / "state"
        command = [str(vigil), "--state-dir", str(state), "run", "--sim"]
        started = time.monotonic()
        daemon = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            journal = state / "logs" / "decisions.jsonl"
            while _journal_lines(journal) < decisions:
                if daemon.poll() is not None:
                    print(f"  the daemon exited early (code {daemon.returncode})")
                    return
                if time.monotonic() - started > DAEMON_TIMEOUT_SECS:
                    print(f"  no {decisions} decisions within {DAEMON_TIMEOUT_SECS:.0f} s")
                    return
                time.sleep(POLL_SECS)
            rss = _status_kib(daemon.pid, "VmRSS")
            hwm = _status_kib(daemon.pid, "VmHWM")
            children = [(child, _status_kib(child, "VmRSS")) for child in _children(daemon.pid)]
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=120)
    print(f"  vigil run --sim after {decisions} decisions ({time.monotonic() - started:.0f} s):")
    print(f"  daemon VmRSS {_mib(rss)}{_verdict(rss)}, VmHWM {_mib(hwm)}")
    for child, child_rss in children:
        print(f"  child {child}: VmRSS {_mib(child_rss)}")
    if not children:
        print("  no child process at that moment")


def measure_replay(start: str, end: str) -> None:
    with tempfile.TemporaryDirectory(prefix="bench_rss_") as scratch:
        argv = ["replay", "--from", start, "--to", end, "--out", str(Path(scratch) / "run")]
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-c", _REPLAY_WRAPPER, *argv],
            capture_output=True,
            text=True,
            check=False,
        )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RSS-PEAK")), None)
    if line is None:
        print(f"  the replay failed (code {done.returncode}): {done.stderr[-500:]}")
        return
    _, hwm, children, code = line.split()
    print(
        f"  vigil replay --from {start} --to {end} (exit {code}, {time.monotonic() - started:.0f} s):"
    )
    print(f"  replay process peak VmHWM {_mib(int(hwm))}{_verdict(int(hwm))}")
    print(f"  largest fit worker's peak {_mib(int(children))}")


def measure_holders() -> None:
    print("  resident memory each holder adds (fresh interpreter, numpy already imported):")
    for label, modules in HOLDERS:
        kib = _probe([sys.executable, "-c", _HOLDER_PROBE, *modules])
        print(f"  {label:48s} {_mib(kib)}")
    kib = _probe([sys.executable, "-c", _FEED_PROBE])
    print(f"  {'recorded feed, 3 tickers (sim.feed.SimFeed)':48s} {_mib(kib)}")


def _probe(command: list[str]) -> int | None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    try:
        return int(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        print(f"  probe failed: {done.stderr[-300:]}")
        return None


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench rss", description=__doc__)
    parser.add_argument("--daemon", action="store_true", help="only the sim daemon")
    parser.add_argument("--replay", action="store_true", help="only the week's replay")
    parser.add_argument("--holders", action="store_true", help="only the per-holder figures")
    parser.add_argument("--decisions", type=int, default=20, help="daemon: decisions to wait for")
    parser.add_argument("--from", dest="start", default="2025-03-01", help="replay: first day")
    parser.add_argument("--to", dest="end", default="2025-03-07", help="replay: last day")
    args = parser.parse_args(list(argv))
    every = not (args.daemon or args.replay or args.holders)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    if every or args.daemon:
        measure_daemon(args.decisions)
    if every or args.replay:
        measure_replay(args.start, args.end)
    if every or args.holders:
        measure_holders()


if __name__ == "__main__":
    main(sys.argv[1:])
