"""A stray bar far from the replayed days (a 2099 row in a data dir) costs the replay nothing: the
feed keeps the replayed span and its look-back only, and the decisions are those of the same data
without the stray row. Before, the feed's dense arrays spanned the years up to the stray bar (a
3-day file took 1.2 GB)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
from replay_support import day_start_ms, default_settings, replay_in_process, replay_options

from core.clock import DAY_MS
from market.recorded import kline_path, load_klines
from runner.replay.data import open_recorded_data, replay_window

TICKERS = ("BTC/USDT",)
DAY = "2025-03-02"
STRAY_MS = day_start_ms("2099-06-01")
BAR_MS = 15 * 60_000


def _data_dir(root: Path, *, stray: bool) -> Path:
    """The bundled BTC bars of 2025-02-26 .. 03-03 as 15m bars, with or without a 2099 bar."""
    five = load_klines("BTC/USDT", "5m")
    five = five[
        (five.index >= day_start_ms("2025-02-26")) & (five.index < day_start_ms("2025-03-04"))
    ]
    bucket = five.index // BAR_MS * BAR_MS
    frame = five.groupby(bucket).agg(
        {"open": "first", "high": "max", "low": "min", "close": "last", "volume": "sum"}
    )
    if stray:
        frame = pd.concat([frame, frame.iloc[[-1]].set_axis([STRAY_MS])])
    path = kline_path("BTC/USDT", "15m", root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as out:
        frame.to_csv(out, index_label="open_time_ms", float_format="%.10g")
    return root


def test_a_far_future_bar_loads_only_the_replayed_span(tmp_path: Path) -> None:
    settings = default_settings(tmp_path)
    data_dir = _data_dir(tmp_path / "stray", stray=True)
    options = replay_options(tmp_path / "run", DAY, 1, tickers=TICKERS)
    data = open_recorded_data(data_dir, options, replay_window(settings, options))
    series = data.feed._series["BTC/USDT"]
    # the recording's own 6 days (all inside the look-back), padded to whole 4h rows
    assert series.slots <= 7 * DAY_MS // BAR_MS
    assert series.bars.shape == (series.slots, 5)
    # the stray bar still bounds the recording's span, and the hole before it is still a gap
    assert data.feed.span_ms("BTC/USDT")[1] == STRAY_MS + BAR_MS - 1


def test_a_far_future_bar_leaves_the_decisions_as_they_were(tmp_path: Path) -> None:
    runs = []
    for stray in (False, True):
        # one folder, rewritten: the snapshot names the data dir (Fear & Greed's missing file)
        settings = default_settings(tmp_path).model_copy(
            update={"data_dir": _data_dir(tmp_path / "data", stray=stray)}
        )
        out = tmp_path / f"run-{stray}"
        outcome = replay_in_process(settings, replay_options(out, DAY, 1, tickers=TICKERS))
        assert outcome.finished and outcome.decisions > 0
        runs.append((out / "logs" / "decisions.jsonl").read_bytes())
    assert runs[0] == runs[1]
