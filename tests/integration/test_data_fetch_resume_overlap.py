"""``vigil data fetch`` run again from ``--from`` over a partial file (funding, then klines) that a
killed fetch of a later span left (through real ccxt, the simulator's REST on loopback): the fetch
starts at ``--from`` and its pages cover the stored rows again. Each was appended once more (the summary
counted them as fetched), a stored settlement a few ms off the exchange's was stored beside it (two
settlements 7 ms apart in the data dir), and a stored rate the exchange now gives otherwise was
replaced without a word. Now only settlements the partial file does not hold are appended, and a
stored row the exchange disagrees with is kept and said."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from test_sim_rest_support import running_server, utc_ms

from core.scaled_clock import ScaledClock
from market.recorded import load_funding, load_klines
from runner.data.command import fetch_into
from runner.data.fetch import FetchRequest

FIRST_MS = utc_ms(2025, 3, 1)
LATER_MS = utc_ms(2025, 3, 3)  # the killed fetch's --from
END_MS = utc_ms(2025, 3, 6)


def _recorded() -> pd.DataFrame:
    return load_funding("BTC/USDT").loc[FIRST_MS : END_MS - 1]


def _leave_partial(out: Path, rows: pd.DataFrame) -> None:
    """The partial file a fetch of ``rows``' span left when it was killed after a page."""
    partial = out / ".partial" / "BTCUSDT-funding.csv"
    partial.parent.mkdir(parents=True)
    lines = ["funding_time_ms,funding_rate"]
    lines += [f"{at},{rate!r}" for at, rate in rows["funding_rate"].items()]
    partial.write_text("\r\n".join(lines) + "\r\n")


async def _fetch(out: Path) -> tuple[int, int]:
    clock = ScaledClock(utc_ms(2025, 3, 10), speed=600.0)
    request = FetchRequest(("BTC/USDT",), "5m", FIRST_MS, END_MS, out, funding=True)
    async with running_server(clock) as server:
        exchange_url = server.url
        fetcher_results = await fetch_into(request, exchange_url, clock, io.StringIO())
    funding = fetcher_results[1]
    return funding.rows, funding.resumed_from_rows


async def test_a_restart_from_the_start_appends_only_the_settlements_not_stored(
    tmp_path: Path,
) -> None:
    out = tmp_path / "data"
    recorded = _recorded()
    later = recorded.loc[LATER_MS:]
    _leave_partial(out, later)
    fetched, resumed = await _fetch(out)
    assert (fetched, resumed) == (len(recorded) - len(later), len(later))
    pd.testing.assert_frame_equal(load_funding("BTC/USDT", out), recorded)


@pytest.mark.parametrize("change", ["time", "rate"])
async def test_a_stored_settlement_the_exchange_disagrees_with_is_kept_and_said(
    tmp_path: Path, change: str, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "data"
    recorded = _recorded()
    later = recorded.loc[LATER_MS:].copy()
    first = later.index[0]
    if change == "time":
        later = later.rename(index={first: first + 7})
    else:
        later.loc[first, "funding_rate"] = 0.0005
    _leave_partial(out, later)
    fetched, _ = await _fetch(out)
    stored = load_funding("BTC/USDT", out)
    assert fetched == len(recorded) - len(later)
    assert len(stored) == len(recorded)  # one row per settlement
    kept = later.index[0]
    assert stored.loc[kept, "funding_rate"] == later.loc[kept, "funding_rate"]
    said = [r.getMessage() for r in caplog.records if "disagree" in r.getMessage()]
    assert len(said) == 1 and str(kept) in said[0], said


def _leave_klines_partial(out: Path, rows: pd.DataFrame) -> None:
    partial = out / ".partial" / "BTCUSDT-5m.csv"
    partial.parent.mkdir(parents=True, exist_ok=True)
    lines = ["open_time_ms,open,high,low,close,volume"]
    lines += [",".join([str(at), *(repr(float(v)) for v in row)]) for at, row in rows.iterrows()]
    partial.write_text("\r\n".join(lines) + "\r\n")


@pytest.mark.parametrize("changed", [False, True])
async def test_a_klines_restart_from_the_start_appends_only_the_bars_not_stored(
    tmp_path: Path, changed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The same for klines: the stored bars were appended again and counted as fetched, and a
    stored bar the exchange now gives otherwise was replaced without a word."""
    out = tmp_path / "data"
    recorded = load_klines("BTC/USDT", "5m").loc[FIRST_MS : END_MS - 1]
    later = recorded.loc[LATER_MS:].copy()
    if changed:
        volume = later["volume"].to_numpy(copy=True)
        volume[0] += 1.0
        later["volume"] = volume
    _leave_klines_partial(out, later)
    clock = ScaledClock(utc_ms(2025, 3, 10), speed=600.0)
    request = FetchRequest(("BTC/USDT",), "5m", FIRST_MS, END_MS, out, funding=False)
    async with running_server(clock) as server:
        (klines,) = await fetch_into(request, server.url, clock, io.StringIO())
    assert (klines.rows, klines.resumed_from_rows) == (len(recorded) - len(later), len(later))
    stored = load_klines("BTC/USDT", "5m", out)
    pd.testing.assert_frame_equal(stored, pd.concat([recorded.loc[: LATER_MS - 1], later]))
    said = [r.getMessage() for r in caplog.records if "disagree" in r.getMessage()]
    assert len(said) == changed and all(str(LATER_MS) in s for s in said), said
