"""Replay speed and memory: the whole daemon over the recording on the virtual clock (issue #8).

``build_replay`` + ``run_replay`` exactly as ``vigil replay`` runs them (fallback decider, memory on,
3 tickers, as fast as the machine allows), into a temporary run folder. Prints simulated days per
wall second, ticks/s through the whole daemon, decisions, fills, the journal's size, and memory:
VmRSS after warm-up (the first clock step), at the end, its simulated-daily samples' growth, and
the peak (``VmHWM`` and ``getrusage`` ``ru_maxrss``; both are process-wide highs, so they include
loading the recording).

Runs:
- ``python -m bench replay`` (and ``make bench``): a short form, ``DEFAULT_DAYS`` from ``SHORT_FROM``;
- ``python -m bench replay --full``: the bundled year, 2025-01-01 .. 2025-12-31 (365 days);
- ``python -m bench replay --days N [--from YYYY-MM-DD] [--out DIR]``; ``VIGIL_BENCH_REPLAY_DAYS``
  sets N when no flag does.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from core.clock import DAY_MS
from runner.config import load_settings
from runner.logging_setup import configure_logging, show_clock_time
from runner.replay.build import Replay, ReplayOptions, build_replay, replay_settings
from runner.replay.command import ReplayOutcome, run_replay

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
FULL_FROM = date(2025, 1, 1)
#: the short form replays a steady-state week: the regime models have their full 180-day 4h
#: history and refit daily, as over most of the year (January has too little history to fit)
SHORT_FROM = date(2025, 9, 1)
FULL_DAYS = 365  # 2025-01-01 .. 2025-12-31 inclusive: the bundled recording's one whole year
DEFAULT_DAYS = 7  # the full year took 17-27 min on 2 cores, far longer than make bench should
MIN_SAMPLES_FOR_GROWTH = 30  # a slope over fewer daily samples measures start-up, not leaks
DAYS_ENV = "VIGIL_BENCH_REPLAY_DAYS"
KIB_PER_MIB = 1024


def _proc_status_mib(key: str) -> float | None:
    """``VmRSS`` / ``VmHWM`` from /proc/self/status in MiB (None off Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / KIB_PER_MIB
    except OSError:
        return None
    return None


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / KIB_PER_MIB  # KiB on Linux


@dataclass
class Sampler:
    """Driver step hook: the first step's wall time (warm-up done), VmRSS once a simulated day,
    and a progress line every ``report_every_days`` so a long run's log shows partial figures."""

    replay: Replay
    start_ms: int
    report_every_days: int
    started_wall: float = field(default_factory=time.perf_counter)
    first_step_wall: float | None = None
    first_step_rss_mib: float | None = None
    samples: list[tuple[float, float]] = field(default_factory=list)  # (simulated day, MiB)
    _next_day_ms: int = 0

    def on_step(self, now_ms: int) -> None:
        if self.first_step_wall is None:
            self.first_step_wall = time.perf_counter()
            self.first_step_rss_mib = _proc_status_mib("VmRSS")
            self._next_day_ms = self.start_ms + DAY_MS
        if now_ms < self._next_day_ms:
            return
        day = (now_ms - self.start_ms) / DAY_MS
        rss = _proc_status_mib("VmRSS")
        if rss is not None:
            self.samples.append((day, rss))
        self._next_day_ms = self.start_ms + (int(day) + 1) * DAY_MS
        if int(day) % self.report_every_days == 0:
            self._progress(now_ms, day, rss)

    def _progress(self, now_ms: int, day: float, rss: float | None) -> None:
        assert self.first_step_wall is not None
        drive_secs = max(1e-9, time.perf_counter() - self.first_step_wall)
        routine = self.replay.decision.routine
        ticks = self.replay.ticks.stats.ticks_published
        when = datetime.fromtimestamp(now_ms / 1000, UTC).strftime("%Y-%m-%d")
        print(
            f"  .. {when}  day {day:5.1f}  drive {drive_secs:7.1f} s  "
            f"{day / drive_secs:5.2f} days/s  {ticks / drive_secs:8,.0f} ticks/s  "
            f"decisions {routine.runs:,}  fills {self.replay.counts.fills:,}  "
            f"VmRSS {_fmt_mib(rss)}",
            flush=True,
        )


def _fmt_mib(mib: float | None) -> str:
    return "unavailable" if mib is None else f"{mib:,.1f} MiB"


def _slope_mib_per_100_days(samples: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares VmRSS growth over the later half of the daily samples (the first days grow
    caches and histories up to their caps; a leak keeps growing after that)."""
    if len(samples) < MIN_SAMPLES_FOR_GROWTH:
        return None
    tail = samples[len(samples) // 2 :]
    n = len(tail)
    mean_x = sum(x for x, _ in tail) / n
    mean_y = sum(y for _, y in tail) / n
    var_x = sum((x - mean_x) ** 2 for x, _ in tail)
    if var_x == 0:
        return None
    cov = sum((x - mean_x) * (y - mean_y) for x, y in tail)
    return cov / var_x * 100


def _day_ms(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


async def _measure(options: ReplayOptions, report_every_days: int) -> None:
    settings = replay_settings(load_settings(), options)
    built_at = time.perf_counter()
    replay = build_replay(settings, options)
    build_secs = time.perf_counter() - built_at
    show_clock_time(replay.clock)
    sampler = Sampler(replay, options.start_ms, report_every_days)
    # run_replay installs its hook only when given a progress line, so this one stays
    replay.driver.on_step = sampler.on_step
    outcome = await run_replay(replay)
    finished_at = time.perf_counter()
    end_rss = _proc_status_mib("VmRSS")
    gc.collect()
    end_rss_after_gc = _proc_status_mib("VmRSS")
    _print_outcome(options, outcome, sampler, build_secs, finished_at)
    journal = options.out_dir / "logs" / "decisions.jsonl"
    journal_mib = journal.stat().st_size / KIB_PER_MIB**2 if journal.exists() else None
    trades = options.out_dir / "logs" / "trades.csv"
    trades_kib = trades.stat().st_size / KIB_PER_MIB if trades.exists() else None
    print(
        f"  decisions.jsonl  {_fmt_mib(journal_mib)}"
        + (
            f" ({journal_mib * KIB_PER_MIB / outcome.decisions:.2f} KiB per decision)"
            if journal_mib is not None and outcome.decisions
            else ""
        )
        + (f"; trades.csv {trades_kib:,.1f} KiB" if trades_kib is not None else "")
    )
    print(f"  VmRSS after warm-up (first clock step)  {_fmt_mib(sampler.first_step_rss_mib)}")
    print(f"  VmRSS at the end                        {_fmt_mib(end_rss)}")
    print(f"  VmRSS at the end after gc.collect()     {_fmt_mib(end_rss_after_gc)}")
    if sampler.samples:
        low = min(sampler.samples, key=lambda s: s[1])
        high = max(sampler.samples, key=lambda s: s[1])
        print(
            f"  VmRSS daily samples: {len(sampler.samples)}, "
            f"min {low[1]:,.1f} MiB (day {low[0]:.0f}), max {high[1]:,.1f} MiB (day {high[0]:.0f})"
        )
    slope = _slope_mib_per_100_days(sampler.samples)
    print(
        "  VmRSS growth over the later half: "
        + (
            f"unavailable (needs >= {MIN_SAMPLES_FOR_GROWTH} daily samples)"
            if slope is None
            else f"{slope:+,.1f} MiB per 100 days"
        )
    )
    print(f"  peak VmHWM {_fmt_mib(_proc_status_mib('VmHWM'))}, ru_maxrss {_maxrss_mib():,.1f} MiB")


def _print_outcome(
    options: ReplayOptions,
    outcome: ReplayOutcome,
    sampler: Sampler,
    build_secs: float,
    finished_at: float,
) -> None:
    warm_secs = (
        None if sampler.first_step_wall is None else sampler.first_step_wall - sampler.started_wall
    )
    drive_secs = None if sampler.first_step_wall is None else finished_at - sampler.first_step_wall
    print(
        f"  finished {outcome.finished}: {outcome.simulated_days:.2f} simulated days in "
        f"{outcome.wall_secs:.1f} wall s (warm-up included)"
    )
    if outcome.loop_failures:  # its figures are not the daemon's: say so beside them
        print(f"  NOT A FAITHFUL RUN: {outcome.loop_failures_text()}")
    print(
        f"  {outcome.days_per_sec:.3f} days/s, {outcome.ticks:,} ticks, "
        f"{outcome.ticks_per_sec:,.0f} ticks/s, {outcome.steps:,} clock steps"
    )
    days = max(outcome.simulated_days, 1e-9)
    print(
        f"  decisions {outcome.decisions:,} ({outcome.decisions / days:,.1f}/day), "
        f"fills {outcome.fills:,}"
        + (
            f", {outcome.wall_secs / outcome.decisions * 1000:.1f} wall ms per decision (all in)"
            if outcome.decisions
            else ""
        )
    )
    phases = [f"build (load recording, wire) {build_secs:.2f} s"]
    if warm_secs is not None and drive_secs is not None:
        phases.append(f"warm-up (to the first clock step) {warm_secs:.2f} s")
        phases.append(
            f"drive + stop {drive_secs:.1f} s ({outcome.simulated_days / drive_secs:.3f} days/s, "
            f"{outcome.ticks / drive_secs:,.0f} ticks/s)"
        )
    print("  phases: " + ", ".join(phases))


def _parse(argv: Sequence[str]) -> tuple[argparse.Namespace, int]:
    parser = argparse.ArgumentParser(prog="python -m bench replay", description=__doc__)
    parser.add_argument("--full", action="store_true", help=f"the whole year ({FULL_DAYS} days)")
    parser.add_argument("--days", type=int, help=f"simulated days (default {DEFAULT_DAYS})")
    parser.add_argument(
        "--from",
        dest="start",
        type=date.fromisoformat,
        help=f"first day (default {FULL_FROM} with --full, else {SHORT_FROM})",
    )
    parser.add_argument("--out", type=Path, help="keep the run folder here (default: a temp dir)")
    args = parser.parse_args(list(argv))
    if args.full and args.days is not None:
        parser.error("--full and --days exclude each other")
    env_days = os.environ.get(DAYS_ENV)
    days = FULL_DAYS if args.full else args.days or (int(env_days) if env_days else DEFAULT_DAYS)
    if days <= 0:
        parser.error(f"--days must be > 0, got {days}")
    return args, days


def main(argv: Sequence[str] = ()) -> None:
    args, days = _parse(argv)
    configure_logging("WARNING")  # as vigil replay without --verbose: problems only
    start: date = args.start or (FULL_FROM if args.full else SHORT_FROM)
    form = "full year" if days == FULL_DAYS and start == FULL_FROM else "short form"
    print(
        f"replay: {len(TICKERS)} tickers, fallback decider, memory on, {days} days from {start} "
        f"({form}; the full year is `python -m bench replay --full`)",
        flush=True,
    )
    with ExitStack() as cleanup:
        if args.out is None:
            scratch = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="bench_replay_"))
            out_dir = Path(scratch) / "run"
        else:
            out_dir = args.out
        options = ReplayOptions(
            start_ms=_day_ms(start),
            end_ms=_day_ms(start + timedelta(days=days)),
            out_dir=out_dir,
            tickers=TICKERS,
        )
        asyncio.run(_measure(options, report_every_days=max(1, days // 20)))


if __name__ == "__main__":
    main(sys.argv[1:])
