"""``vigil replay --data-dir``: data dirs fetched from the simulator and imported from archive-format
files made here replay; a 15m-base dir with a planted gap reports the gap and builds no candle across
it; a missing or malformed file is refused with exit 78 naming it (never a traceback)."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from replay_support import day_start_ms, default_settings, replay_options

from core.events import CandleClosed, Event, MarketGap, Topic
from core.scaled_clock import ScaledClock
from market.recorded import load_klines, resample
from runner.data.command import fetch_into
from runner.data.fetch import FetchRequest
from runner.replay.build import build_replay, replay_settings
from runner.replay.command import run_replay
from runner.replay.data import RecordedData
from sim.exchange import SimExchange

TICKERS = ("BTC/USDT", "ETH/USDT")
DAY = "2025-03-02"
HISTORY_FROM = "2025-02-20"
REPO = Path(__file__).resolve().parents[2]
GAP_FROM_MS = day_start_ms(DAY) + 10 * 3_600_000  # BTC 15m bars 10:00 .. 10:45 are dropped
GAP_TO_MS = GAP_FROM_MS + 3_600_000


def snapshots(run_dir: Path) -> list[dict[str, object]]:
    with (run_dir / "logs" / "decisions.jsonl").open("rb") as handle:
        return [orjson.loads(line)["snapshot"] for line in handle]


def replay(
    settings_dir: Path, data_dir: Path, out: Path, **overrides: object
) -> tuple[RecordedData, list[Event]]:
    """One day replayed in process; the bus's closes and gaps recorded on the side."""
    settings = default_settings(settings_dir).model_copy(update={"data_dir": data_dir})
    options = replay_options(out, DAY, 1, tickers=TICKERS, **overrides)
    seen: list[Event] = []

    async def run() -> RecordedData:
        built = build_replay(replay_settings(settings, options), options)
        for topic in (Topic.CANDLE_CLOSED, Topic.MARKET_GAP):
            built.bus.subscribe(topic, seen.append, name=f"test_{topic}")
        outcome = await run_replay(built)
        assert outcome.finished and outcome.decisions > 0
        # the data ends with the replayed day: its ticks end 75 s before the run does, and the
        # market loop that returned was restarted as a failure, 7 times ("not the daemon's run")
        assert outcome.passed, outcome.failure
        return built.data

    return asyncio.run(run()), seen


def test_a_data_dir_fetched_from_the_simulator_replays_with_funding(tmp_path: Path) -> None:
    data_dir = tmp_path / "fetched"

    async def fetch() -> None:
        clock = ScaledClock(day_start_ms("2025-03-04"), speed=600.0)
        async with SimExchange(clock, TICKERS) as sim:
            request = FetchRequest(
                tickers=TICKERS,
                interval="5m",
                start_ms=day_start_ms(HISTORY_FROM),
                end_ms=day_start_ms("2025-03-03"),
                out_dir=data_dir,
            )
            await fetch_into(request, sim.rest_url, clock, io.StringIO())

    asyncio.run(fetch())
    data, _ = replay(tmp_path, data_dir, tmp_path / "run")
    assert data.base_interval == "5m" and data.gaps == ()
    assert list(data.unavailable) == ["fear_greed"]  # funding was fetched
    last = snapshots(tmp_path / "run")[-1]
    assert isinstance(last["funding_rates"], dict) and set(last["funding_rates"]) == set(TICKERS)
    assert "fear_greed" in last["unavailable"]  # type: ignore[operator]


def test_an_imported_15m_dir_with_a_gap_reports_it_and_builds_no_candle_across_it(
    tmp_path: Path,
) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    first, end = day_start_ms(HISTORY_FROM), day_start_ms("2025-03-03")
    for ticker in TICKERS:
        bars = resample(load_klines(ticker, "5m").loc[first : end - 1], "5m", "15m")
        if ticker == "BTC/USDT":
            bars = bars.drop(bars.loc[GAP_FROM_MS : GAP_TO_MS - 1].index)
        symbol = ticker.replace("/", "")
        rows = [
            f"{t},{o!r},{h!r},{lo!r},{c!r},{v!r},{t + 899_999},0,0,0,0,0"
            for t, o, h, lo, c, v in bars.itertuples(name=None)
        ]
        (archive / f"{symbol}-15m-2025-02.csv").write_text("\n".join(rows) + "\n")
    data_dir = tmp_path / "imported"
    cli = [sys.executable, "-m", "runner.cli"]
    files = sorted(str(p) for p in archive.iterdir())
    subprocess.run([*cli, "data", "import", *files, "--out", str(data_dir)], cwd=REPO, check=True)
    checked = subprocess.run(
        [*cli, "data", "check", str(data_dir)],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 1 and "1 gap(s), 4 missing" in checked.stdout

    data, seen = replay(tmp_path, data_dir, tmp_path / "run")
    assert data.base_interval == "15m" and data.feed.update_interval_ms == 225_000
    assert [(g.ticker, g.from_ms, g.to_ms) for g in data.gaps] == [
        ("BTC/USDT", GAP_FROM_MS, GAP_TO_MS)
    ]
    closes = [e for e in seen if isinstance(e, CandleClosed) and e.ticker == "BTC/USDT"]
    assert len([c for c in closes if c.timeframe == "15m"]) == 96 - 4
    inside = [
        c
        for c in closes
        if c.candle.open_time_ms < GAP_TO_MS
        and c.candle.open_time_ms + {"15m": 900_000, "1h": 3_600_000, "4h": 14_400_000}[c.timeframe]
        > GAP_FROM_MS
    ]
    assert inside == []  # no candle overlapping the hole was closed, on any timeframe
    gaps = [e for e in seen if isinstance(e, MarketGap)]
    assert {g.timeframe for g in gaps} == {"15m", "1h", "4h"}
    assert all(g.ticker == "BTC/USDT" for g in gaps)
    eth = [e for e in seen if isinstance(e, CandleClosed) and e.ticker == "ETH/USDT"]
    assert sum(1 for c in eth if c.timeframe == "15m") == 96  # the other ticker is whole


@pytest.mark.parametrize("defect", ["missing", "malformed"])
def test_a_missing_or_malformed_file_is_refused_with_78_naming_it(
    tmp_path: Path, defect: str
) -> None:
    data_dir = tmp_path / "data" / "binance-usdm"
    data_dir.mkdir(parents=True)
    bars = load_klines("BTC/USDT", "5m").loc[day_start_ms(DAY) : day_start_ms("2025-03-03") - 1]
    bars.to_csv(data_dir / "BTCUSDT-5m.csv.gz")
    bad = data_dir / "ETHUSDT-5m.csv.gz"
    if defect == "malformed":
        bad.write_text("open_time_ms,open\n1,abc\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "runner.cli",
            "replay",
            "--data-dir",
            str(tmp_path / "data"),
            "--from",
            DAY,
            "--to",
            DAY,
            "--out",
            str(tmp_path / "run"),
            "--tickers",
            *TICKERS,
        ],
        cwd=REPO,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 78, result.stderr
    assert "Traceback" not in result.stderr
    named = str(bad) if defect == "malformed" else "ETHUSDT-5m.csv.gz"
    assert named in result.stderr and "refusing to start" in result.stderr
