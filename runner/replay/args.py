"""``vigil replay``'s arguments as ReplayOptions: dates, tickers, speed, interval, checked."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

from core.clock import FIRST_RECORDING_DAY, LAST_RECORDING_DAY
from market.recorded import BASE_INTERVAL_MS
from regime.config import SEED_MAX
from runner.replay.build import ReplayOptions


def parse_day(text: str | None, flag: str) -> date:
    if not text:
        raise ValueError(f"{flag} is required (a day, e.g. 2025-03-01)")
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{flag} {text!r} is not a day like 2025-03-01") from None
    check_day(day, flag)
    return day


def check_day(day: date, what: str) -> None:
    """A day a replay may ask for: any recording lies in the range, and the day after its last is
    still a date (9999-12-31 + 1 day is not)."""
    if not FIRST_RECORDING_DAY <= day <= LAST_RECORDING_DAY:
        raise ValueError(f"{what} {day} is outside {FIRST_RECORDING_DAY} .. {LAST_RECORDING_DAY}")


#: the fewest seconds between a replay's kline updates: 1 ms was accepted (it divides every bar),
#: 300,000 updates a 5m bar, and the tick worker's chunk held Ctrl-C off while it grew to 6.6 GiB
MIN_UPDATE_SECS = 1


def update_ms_from_secs(secs: float | None, flag: str = "--update-secs") -> int | None:
    """Seconds between kline updates as ms, or why not: at least ``MIN_UPDATE_SECS``, and it
    must divide a base bar."""
    if secs is None:
        return None
    if math.isfinite(secs) and 0 < secs < MIN_UPDATE_SECS:
        raise ValueError(f"{flag} {secs:g} is under {MIN_UPDATE_SECS} s between kline updates")
    update_ms = round(secs * 1000) if math.isfinite(secs) else 0
    if update_ms <= 0 or all(bar % update_ms for bar in BASE_INTERVAL_MS.values()):
        raise ValueError(
            f"{flag} {secs:g} must divide 300 (a 5m base bar), "
            "or 60 (1m), 180 (3m) or 900 (15m) seconds"
        )
    return update_ms


def _day_ms(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


def parse_speed(text: str) -> float | None:
    if text == "max":
        return None
    try:
        speed = float(text)
    except ValueError:
        raise ValueError(f"--speed {text!r}: 'max' or a number of times real time") from None
    if not speed > 0:
        raise ValueError(f"--speed must be > 0, got {text}")
    return speed


def options_from_args(args: argparse.Namespace, configured: Sequence[str]) -> ReplayOptions:
    """``--to`` is inclusive: the replay runs to the end of that day (UTC)."""
    start = parse_day(args.replay_from, "--from")
    end = parse_day(args.replay_to, "--to")
    if end < start:
        raise ValueError(f"--to {end} is before --from {start}")
    if args.out is None:
        raise ValueError("--out is required (the run folder to create, e.g. runs/march)")
    update_ms = update_ms_from_secs(args.update_secs)
    if not 0 <= args.seed <= SEED_MAX:  # set without validation (model_copy) in the replay
        raise ValueError(f"--seed {args.seed} is not 0 to {SEED_MAX:,}")
    return ReplayOptions(
        start_ms=_day_ms(start),
        end_ms=_day_ms(end + timedelta(days=1)),
        out_dir=args.out,
        tickers=tuple(args.tickers) if args.tickers else tuple(configured),
        decider=args.decider,
        memory=not args.no_memory,
        speed=parse_speed(args.replay_speed),
        seed=args.seed,
        update_interval_ms=update_ms,
        base_interval=getattr(args, "base_interval", None),
    )
