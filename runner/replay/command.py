"""``vigil replay``: run a replay to its end, show progress, write the run folder's report.

The run folder is a state dir as the live daemon writes it (``logs/decisions.jsonl``,
``logs/trades.csv``, ``runner_state.json``, ``paper_broker.json``, the learner's model) plus
``report.json`` and ``report.html`` (``report.html``) and ``replay.json`` (what was asked,
how long it took: the only file with wall-clock figures, kept out of the journals).
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TextIO

from agent.claude_schema import WakeRules
from report.html import write_report
from runner.config import Settings
from runner.cost_projection import projection_text
from runner.logging_setup import configure_logging, show_clock_time
from runner.replay.build import Replay, ReplayOptions, build_replay
from runner.replay.driver import DriveResult
from runner.replay.estimate import expected_calls_text
from runner.replay.heap import frozen_start_up_heap
from runner.stop_signals import on_stop_signals
from runner.warm_paths import warm_up_paths
from state.atomic import atomic_write_bytes

log = logging.getLogger(__name__)

WARM_UP_TIMEOUT_SECS = 600.0
BAR_WIDTH = 24


@dataclass(frozen=True)
class ReplayOutcome:
    finished: bool
    wall_secs: float
    simulated_days: float
    ticks: int
    decisions: int
    fills: int
    steps: int  # instants released to the daemon's loops
    passed_over: int  # instants passed over: only idle periodic checks were due
    peak_rss_mb: float
    #: loops that failed and were restarted, by name: (restarts, the last error). The live daemon
    #: restarts a failed loop and goes on; a replay does too, but its figures are then not the
    #: daemon's (a market loop that crashed published no ticks meanwhile), so it does not pass
    loop_failures: Mapping[str, tuple[int, str]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Reached its end with every loop up throughout."""
        return not self.failure

    @property
    def failure(self) -> str:
        """Why the replay did not pass ("" when it did)."""
        if not self.finished:
            return "the replay stopped before its end"
        return self.loop_failures_text()

    def loop_failures_text(self) -> str:
        return "; ".join(
            f"loop {name} failed {restarts:,} time(s), last: {error}"
            for name, (restarts, error) in self.loop_failures.items()
        )

    @property
    def days_per_sec(self) -> float:
        return self.simulated_days / self.wall_secs if self.wall_secs > 0 else float("inf")

    @property
    def ticks_per_sec(self) -> float:
        return self.ticks / self.wall_secs if self.wall_secs > 0 else float("inf")


class Progress:
    """One status line: simulated date, a bar, equity, decisions and fills so far.

    On a terminal it redraws in place a few times a second; otherwise (a log file, CI) it prints
    a line at every tenth of the span."""

    def __init__(
        self,
        replay: Replay,
        stream: TextIO,
        *,
        wall_secs: Callable[[], float] = time.monotonic,
        redraw_secs: float = 0.25,
    ) -> None:
        self._replay = replay
        self._stream = stream
        self._tty = stream.isatty()
        self._wall_secs = wall_secs
        self._redraw_secs = redraw_secs
        self._started = wall_secs()
        self._last_draw = float("-inf")
        self._next_tenth = 1

    def on_step(self, now_ms: int) -> None:
        options = self._replay.options
        done = (now_ms - options.start_ms) / (options.end_ms - options.start_ms)
        if self._tty:
            wall = self._wall_secs()
            if wall - self._last_draw >= self._redraw_secs:
                self._last_draw = wall
                self._stream.write("\r" + self.line(now_ms, done))
                self._stream.flush()
        elif done * 10 >= self._next_tenth:
            self._next_tenth = int(done * 10) + 1
            self._stream.write(self.line(now_ms, done) + "\n")
            self._stream.flush()

    def line(self, now_ms: int, done: float) -> str:
        replay = self._replay
        filled = int(BAR_WIDTH * min(1.0, done))
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        elapsed = max(1e-9, self._wall_secs() - self._started)
        days = (now_ms - replay.options.start_ms) / 86_400_000
        equity = replay.decision.broker_parts.equity()
        when = datetime.fromtimestamp(now_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")
        return (
            f"{when} [{bar}] {done:4.0%}  equity {equity}  "
            f"decisions {replay.decision.routine.runs:,}  fills {replay.counts.fills:,}  "
            f"{days / elapsed:.2f} days/s"
        )

    def finish(self) -> None:
        if self._tty:
            self._stream.write("\n")
            self._stream.flush()


async def run_replay(replay: Replay, *, progress: Progress | None = None) -> ReplayOutcome:
    """Warm up, drive the clock to the end, stop the loops in order (journals flushed, state and
    learner saved)."""
    try:
        return await _run(replay, progress)
    finally:
        if replay.fit_ahead is not None:
            log.info("regime fits ahead: %s", replay.fit_ahead.stats)
        if replay.fit_pool is not None:
            replay.fit_pool.close()
        if replay.tick_pool is not None:
            replay.tick_pool.shutdown(wait=True, cancel_futures=True)
        if replay.desk_pool is not None:  # flushed by the supervisor's shutdown hook
            replay.desk_pool.shutdown(wait=True, cancel_futures=True)


async def _run(replay: Replay, progress: Progress | None) -> ReplayOutcome:
    started = time.monotonic()
    settings, options = replay.settings, replay.options
    await warm_up_paths(
        settings,
        replay.clock,
        replay.market,
        replay.decision,
        timeout_secs=WARM_UP_TIMEOUT_SECS,
    )
    if progress is not None:
        replay.driver.on_step = progress.on_step
    with frozen_start_up_heap():
        result = await _drive(replay)
    if progress is not None:
        progress.finish()
    reached_ms = replay.clock.now_ms()
    return ReplayOutcome(
        finished=result is not None and result.finished,
        wall_secs=time.monotonic() - started,
        simulated_days=(reached_ms - options.start_ms) / 86_400_000,
        ticks=replay.ticks.stats.ticks_published,
        decisions=replay.decision.routine.runs,
        fills=replay.counts.fills,
        steps=replay.driver.steps,
        passed_over=replay.clock.passed_over,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        loop_failures={
            name: (status.restarts, status.last_error or "")
            for name, status in replay.supervisor.status.items()
            if status.restarts
        },
    )


async def _drive(replay: Replay) -> DriveResult | None:
    """Run the loops and the driver to the end (or to a stop signal: then None)."""
    supervised = asyncio.create_task(replay.supervisor.run(), name="replay supervisor")
    driving = asyncio.create_task(replay.driver.run(), name="replay driver")
    done, _ = await asyncio.wait({supervised, driving}, return_when=asyncio.FIRST_COMPLETED)
    if driving in done:
        result = driving.result()
        replay.supervisor.request_stop("replay reached its end")
        await supervised
        return result
    # the supervisor stopped first (a signal): stop driving
    driving.cancel()
    await asyncio.wait({driving})
    return None


def replay_main(
    settings: Settings,
    options: ReplayOptions,
    *,
    verbose: bool = False,
    stream: TextIO = sys.stderr,
) -> int:
    """The CLI's replay: build, run, report. Returns the exit code. Logs warnings and errors
    only unless ``verbose`` (a day of INFO lines is thousands: the progress line says enough)."""
    configure_logging(
        settings.log_level if verbose else "WARNING", settings.secret_values(), config=settings.log
    )
    if options.decider in ("claude", "debate"):
        print(f"vigil replay: {expected_calls_text(options, settings)}", file=stream)
    if options.decider == "claude":  # one call a pass with tiers; the debate's text says its own
        journal = options.out_dir / "logs" / "decisions.jsonl"
        wake = WakeRules.of(options.tickers, settings.gate.max_wake_conditions)
        text = projection_text(settings.agent, journal, wake, len(options.tickers))
        print(f"vigil replay: {text}", file=stream)
    outcome = asyncio.run(_replay_and_report(settings, options, stream))
    return 0 if outcome.passed else 1


async def _replay_and_report(
    settings: Settings, options: ReplayOptions, stream: TextIO
) -> ReplayOutcome:
    replay = build_replay(settings, options)
    show_clock_time(replay.clock)
    _print_data_notes(replay, stream)
    loop = asyncio.get_running_loop()
    # stops the loops in order (journals flushed, state and learner saved); the run folder and its
    # report then cover the part replayed
    on_stop_signals(loop, replay.supervisor.request_stop)
    outcome = await run_replay(replay, progress=Progress(replay, stream))
    write_replay_json(replay, outcome)
    report = write_report(options.out_dir)
    total = report.metrics.total_return_pct
    print(
        ("" if outcome.finished else "stopped early: ")
        + f"replayed {outcome.simulated_days:.1f} days in {outcome.wall_secs:.1f} s "
        f"({outcome.days_per_sec:.2f} days/s, {outcome.ticks:,} ticks, "
        f"{outcome.ticks_per_sec:,.0f} ticks/s): {outcome.decisions:,} decisions, "
        f"{outcome.fills:,} fills, total return "
        + ("unavailable" if total is None else f"{total:+.2f} %"),
        file=stream,
    )
    print(f"report: {options.out_dir / 'report.html'}", file=stream)
    if outcome.loop_failures:
        print(
            f"vigil replay: not the daemon's run: {outcome.loop_failures_text()} "
            "(restarted each time; the log above has the tracebacks)",
            file=stream,
        )
    return outcome


def _print_data_notes(replay: Replay, stream: TextIO) -> None:
    """What the data dir lacks or has holes in, before the run (replay.json keeps it too)."""
    data = replay.data
    if data.base_interval != "5m":
        print(f"base bar: {data.base_interval} (15m, 1h, 4h candles built from it)", file=stream)
    for gap in data.gaps_json():
        print(
            f"market gap: {gap['ticker']} {gap['missing_bars']} {data.base_interval} bar(s) "
            f"missing {gap['from']} .. {gap['to']} UTC: no candle is built across it",
            file=stream,
        )
    for name, why in data.unavailable.items():
        print(f"unavailable: {name}: {why}", file=stream)


def write_replay_json(replay: Replay, outcome: ReplayOutcome) -> None:
    options = replay.options
    document = {
        "from_ms": options.start_ms,
        "to_ms": options.end_ms,
        "tickers": list(options.tickers),
        "decider": options.decider,
        "memory": options.memory,
        "seed": options.seed,
        "data_dir": str(replay.data.data_dir.resolve()),
        "base_interval": replay.data.base_interval,
        "config_digest": replay.settings.digest(),
        "update_interval_ms": replay.data.feed.update_interval_ms,
        "market_gaps": replay.data.gaps_json(),
        "unavailable": replay.data.unavailable,
        "finished": outcome.finished,
        "wall_secs": round(outcome.wall_secs, 3),
        "ticks": outcome.ticks,
        "decisions": outcome.decisions,
        "fills": outcome.fills,
        "clock_steps": outcome.steps,
        "clock_passed_over": outcome.passed_over,
        "peak_rss_mb": round(outcome.peak_rss_mb, 1),
        "loop_failures": {
            name: {"restarts": restarts, "last_error": error}
            for name, (restarts, error) in outcome.loop_failures.items()
        },
    }
    # a fresh temporary name renamed into place: written by name, a symlink planted in the run's
    # folder (the API makes it before the replay runs) was followed; a rerun needs no fsync
    data = (json.dumps(document, indent=2) + "\n").encode()
    atomic_write_bytes(options.out_dir / "replay.json", data, durable=False)


__all__ = ["Progress", "ReplayOutcome", "replay_main", "run_replay", "write_replay_json"]
