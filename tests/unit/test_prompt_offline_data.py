"""``vigil prompt`` before any decision builds its snapshot from the data dir: one it cannot
build from (no 5m bars, as a data dir of 15m bars replay takes; no bars before ``sim.start``; a
malformed file) is refused naming the file, exit 78, instead of exit 1 with a traceback."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.errors import EXIT_REFUSE_TO_START
from market.recorded import kline_path, load_klines
from runner.cli import main
from runner.config import MarketConfig, Settings, SimConfig
from runner.prompt_cmd import build_offline_snapshot

FIRST_MS = 1_740_528_000_000  # 2025-02-26
END_MS = 1_741_046_400_000  # 2025-03-04


def _bars(root: Path, interval: str, body: Callable[[], str] | None = None) -> Path:
    five = load_klines("BTC/USDT", "5m")
    five = five[(five.index >= FIRST_MS) & (five.index < END_MS)]
    if interval == "15m":
        bucket = five.index // 900_000 * 900_000
        five = five.groupby(bucket).agg(
            {"open": "first", "high": "max", "low": "min", "close": "last", "volume": "sum"}
        )
    path = kline_path("BTC/USDT", interval, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as out:
        if body is None:
            five.to_csv(out, index_label="open_time_ms", float_format="%.10g")
        else:
            out.write(body())
    return path


CASES: dict[str, tuple[str, str, Callable[[], str] | None, str]] = {
    # (interval written, sim.start, body, what the refusal says)
    "15m bars only": ("15m", "2025-03-02T00:00:00Z", None, "BTCUSDT-5m.csv.gz missing"),
    "start before the bars": ("5m", "2025-01-01T00:00:00Z", None, "no recorded 5m candles"),
    "malformed bars": (
        "5m",
        "2025-03-02T00:00:00Z",
        lambda: "open_time_ms,open,high,low,close,volume\n1740873600000,1,0.5,2,1,1\n",
        "BTCUSDT-5m.csv.gz",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_data_dir_the_offline_snapshot_cannot_use_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: str,
) -> None:
    interval, start, body, said = CASES[case]
    _bars(tmp_path / "data", interval, body)
    monkeypatch.setenv("VIGIL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("VIGIL_MARKET__TICKERS", '["BTC/USDT"]')
    monkeypatch.setenv("VIGIL_SIM__START", start)
    code = main(["--state-dir", str(tmp_path / "state"), "prompt"])
    err = capsys.readouterr().err
    assert code == EXIT_REFUSE_TO_START, err[-2000:]
    assert said in err and "vigil prompt" in err


async def test_the_open_candle_is_built_from_the_last_bars_behind_a_hole_at_the_start(
    tmp_path: Path,
) -> None:
    """The 5m step was read off the file's first two bars: a first bar weeks before the rest made
    it weeks long, and the open candle was built from that first bar's close, weeks old."""
    five = load_klines("BTC/USDT", "5m")
    kept = five[
        (five.index == 1_735_689_600_000) | ((five.index >= FIRST_MS) & (five.index < END_MS))
    ]
    path = kline_path("BTC/USDT", "5m", tmp_path / "data")
    path.parent.mkdir(parents=True)
    with gzip.open(path, "wt") as out:
        kept.to_csv(out, index_label="open_time_ms", float_format="%.10g")
    at = datetime(2025, 3, 2, 0, 10, tzinfo=UTC)
    settings = Settings(
        state_dir=tmp_path / "state",
        data_dir=tmp_path / "data",
        market=MarketConfig(tickers=("BTC/USDT",)),
        sim=SimConfig(start=at),
    )
    snap = await build_offline_snapshot(settings)
    at_ms = int(at.timestamp() * 1000)
    assert snap.tickers["BTC/USDT"].price == float(five["close"].loc[at_ms - 300_000])
