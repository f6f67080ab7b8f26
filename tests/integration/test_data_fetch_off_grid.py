"""``vigil data fetch``: a kline row whose open time is off the interval's grid (a garbled answer)
is dropped and counted like any garbled row, never stored; it was stored, and replay then refused
the whole file ("bar opening at ... is off the 5m grid")."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from test_sim_rest_support import running_server, utc_ms

from core.scaled_clock import ScaledClock
from market.recorded import load_klines
from runner.data.command import fetch_into
from runner.data.fetch import FetchRequest
from sim.feed import SimFeed

FIRST_MS = utc_ms(2025, 3, 1)
END_MS = utc_ms(2025, 3, 3)
SHIFTED = (3, 7)


def off_grid(body: Any) -> Any:
    rows = [list(row) for row in body]
    for i in SHIFTED:
        rows[i][0] = rows[i][0] + 1
    return rows


async def test_an_off_grid_kline_is_dropped_not_stored(tmp_path: Path) -> None:
    clock = ScaledClock(utc_ms(2025, 3, 10), speed=600.0)
    out = tmp_path / "data"
    request = FetchRequest(("BTC/USDT",), "5m", FIRST_MS, END_MS, out, funding=False)
    async with running_server(clock) as server:
        server.faults.rewrite_next(off_grid, path="/fapi/v1/klines")
        [klines] = await fetch_into(request, server.url, clock, io.StringIO())
    recorded = load_klines("BTC/USDT", "5m").loc[FIRST_MS : END_MS - 1]
    stored = load_klines("BTC/USDT", "5m", out)
    assert list(stored.index) == [t for i, t in enumerate(recorded.index) if i not in SHIFTED]
    assert (klines.rows, klines.dropped) == (len(recorded) - 2, 2)
    SimFeed(["BTC/USDT"], data_dir=out)  # replay loads it: the gap is a gap
