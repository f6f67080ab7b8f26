"""``vigil sim`` on a data dir of klines only: funding and Fear & Greed are optional there as in
a replay. The simulator's REST loaded both at start, so a data dir without them was exit 1 with a
traceback; now it starts, its funding endpoint answers no settlements and ``/fng/`` answers
alternative.me's error shape naming the missing file (the daemon's sources report them
unavailable)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import aiohttp
from fakes.daemon import daemon_env, sim_exchange
from replay_support import day_start_ms

from market.recorded import kline_path, load_klines


def _klines_only(root: Path) -> Path:
    five = load_klines("BTC/USDT", "5m")
    five = five[
        (five.index >= day_start_ms("2025-02-26")) & (five.index < day_start_ms("2025-03-04"))
    ]
    path = kline_path("BTC/USDT", "5m", root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as out:
        five.to_csv(out, index_label="open_time_ms", float_format="%.10g")
    return root


async def test_vigil_sim_serves_a_data_dir_without_funding_or_fear_greed(tmp_path: Path) -> None:
    env = daemon_env(
        tmp_path / "state",
        VIGIL_DATA_DIR=str(_klines_only(tmp_path / "data")),
        VIGIL_MARKET__TICKERS='["BTC/USDT"]',
        VIGIL_SIM__START="2025-03-02T00:00:00Z",
    )
    log = tmp_path / "sim.log"
    with sim_exchange(env, log) as proc:
        text = log.read_text()
        assert proc.poll() is None and "Traceback" not in text, text[-3000:]
        rest = re.search(r"REST (http://127\.0\.0\.1:\d+)", text)
        assert rest is not None, text
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{rest[1]}/fapi/v1/fundingRate?symbol=BTCUSDT") as answer:
                assert answer.status == 200 and await answer.json() == []
            async with session.get(f"{rest[1]}/fng/?limit=1") as answer:
                body = await answer.json()
        assert body["data"] == []
        assert "fear-greed-daily.csv" in body["metadata"]["error"]
