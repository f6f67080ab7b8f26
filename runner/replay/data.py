"""The recorded data a replay runs on: the data dir opened, checked, and what it lacks.

``vigil replay --data-dir DIR`` (or ``data_dir`` in the settings) points replay at a folder of the
documented layout (``market.recorded``). The base bar is the finest recorded for every ticker
(1m, 3m, 5m or 15m); 15m / 1h / 4h candles are built from it and each bar is walked in
``UPDATES_PER_BAR`` updates unless ``--update-secs`` says otherwise. Funding and Fear & Greed are
optional: without them those snapshot fields are unavailable, with the missing file named. A missing
base file, a malformed file or bars off the grid refuse the replay (exit 78) naming the file.
Holes in the base bars are listed as market gaps: no candle is built across them. Only the bars
of the replay's window (``replay_window``) are kept in memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from core.config_path import require_folder
from core.errors import RefuseToStartError
from market.recorded import (
    BASE_INTERVAL_MS,
    DataUnavailableError,
    MalformedDataError,
    base_interval,
    default_data_dir,
    load_fear_greed,
)
from runner.config import Settings
from runner.warmup import look_back_window
from sim.feed import SimFeed
from sim.feed_series import Gap
from sim.rest_payloads import FearGreedBook

if TYPE_CHECKING:
    from runner.replay.build import ReplayOptions


@dataclass(frozen=True)
class RecordedData:
    feed: SimFeed
    data_dir: Path
    base_interval: str
    gaps: tuple[Gap, ...]
    fear_greed: FearGreedBook | str  # the index, or why there is none
    #: optional series the data dir lacks, by name, with the reason (reported, never invented)
    unavailable: dict[str, str] = field(default_factory=dict)

    def gaps_json(self) -> list[dict[str, object]]:
        return [
            {
                "ticker": g.ticker,
                "from": _iso(g.from_ms),
                "to": _iso(g.to_ms),
                "from_ms": g.from_ms,
                "to_ms": g.to_ms,
                "missing_bars": (g.to_ms - g.from_ms) // self.feed.bar_ms,
            }
            for g in self.gaps
        ]


def optional_fear_greed(data_dir: Path | None) -> FearGreedBook | str:
    """The recorded index, or why the data dir has none; a malformed file refuses."""
    try:
        return FearGreedBook(load_fear_greed(data_dir))
    except DataUnavailableError as exc:
        return str(exc)
    except MalformedDataError as exc:
        raise RefuseToStartError(f"malformed recorded data: {exc}") from None


def replay_window(settings: Settings, options: ReplayOptions) -> tuple[int, int]:
    """(first ms, end ms) of the recording a replay can read: its span, and before it what its
    warm-up fetches (the 4h history's ``history_days``, the seed's ``SEED_SECS``), a day to spare
    on each side (a candle reaching over the edge)."""
    return look_back_window(settings.market.history_days, options.start_ms, options.end_ms)


def open_recorded_data(
    data_dir: Path | None, options: ReplayOptions, window: tuple[int, int] | None = None
) -> RecordedData:
    """Open the data dir for ``options``, keeping the bars of ``window`` (None: all of them):
    every failure is a refusal naming the file."""
    folder = data_dir or default_data_dir()
    require_folder(folder, "data dir")
    try:
        base = options.base_interval or base_interval(options.tickers, data_dir)
        if base not in BASE_INTERVAL_MS:
            raise RefuseToStartError(
                f"base bar {base!r}: replay runs on {', '.join(BASE_INTERVAL_MS)} bars"
            )
        bar_ms = BASE_INTERVAL_MS[base]
        update_ms = options.update_ms(bar_ms)
        if bar_ms % update_ms or bar_ms // update_ms < 4:
            raise RefuseToStartError(
                f"--update-secs {update_ms / 1000:g} must divide the {base} base bar "
                f"({bar_ms // 1000} s) at least 4 times"
            )
        feed = SimFeed(
            options.tickers,
            data_dir=data_dir,
            update_interval_ms=update_ms,
            base_interval=base,
            window=window,
        )
    except DataUnavailableError as exc:
        raise RefuseToStartError(f"recorded data unavailable: {exc}") from None
    except MalformedDataError as exc:
        raise RefuseToStartError(f"malformed recorded data: {exc}") from None
    fear_greed = optional_fear_greed(data_dir)
    unavailable = {
        f"funding {t}": why for t in options.tickers if (why := feed.funding_missing(t)) is not None
    }
    if isinstance(fear_greed, str):
        unavailable["fear_greed"] = fear_greed
    gaps = tuple(
        gap
        for t in options.tickers
        for gap in feed.gaps(t)
        if gap.to_ms > options.start_ms and gap.from_ms < options.end_ms
    )
    return RecordedData(feed, folder, base, gaps, fear_greed, unavailable)


def _iso(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


__all__ = [
    "RecordedData",
    "open_recorded_data",
    "optional_fear_greed",
    "replay_window",
]
