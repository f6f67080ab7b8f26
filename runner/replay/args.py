"""``vigil replay``'s arguments as ReplayOptions: dates, tickers, speed, interval, checked."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

from market.recorded import BASE_INTERVAL_MS
from regime.config import SEED_MAX
from runner.replay.build import ReplayOptions


def parse_day(text: str | None, flag: str) -> date:
    if not text:
        raise ValueError(f"{flag} is required (a day, e.g. 2025-03-01)")
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{flag} {text!r} is not a day like 2025-03-01") from None


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
    update_ms = None if args.update_secs is None else round(args.update_secs * 1000)
    if update_ms is not None and (
        update_ms <= 0 or all(bar % update_ms for bar in BASE_INTERVAL_MS.values())
    ):
        raise ValueError(
            f"--update-secs {args.update_secs:g} must divide 300 (a 5m base bar), "
            "or 60 (1m), 180 (3m) or 900 (15m) seconds"
        )
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
