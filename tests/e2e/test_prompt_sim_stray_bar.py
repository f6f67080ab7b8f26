"""A stray bar far from the simulated instant (a 2099 row in a data dir) costs ``vigil prompt``
and ``vigil sim`` nothing: their feed keeps the look-back before their start and, for the
simulator, the bars reached from its start without a hole of more than
``sim.feed.LONGEST_SERVED_HOLE_MS``. Before, the feed's dense arrays spanned every year up to the
stray bar (about a gigabyte a ticker). Peak resident size (VmHWM) is measured in a fresh
interpreter (it depends on what is held, not on the machine's speed)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pandas as pd
from fakes.daemon import daemon_env, sim_exchange
from fakes.prompt_peak import prompt_with_peak
from replay_support import day_start_ms

from core.clock import DAY_MS
from market.recorded import (
    fear_greed_path,
    funding_path,
    kline_path,
    load_funding,
    load_klines,
)
from runner.config import MarketConfig, Settings, SimConfig
from runner.sim_boot import daemon_clock
from sim.feed import LONGEST_SERVED_HOLE_MS

STRAY_MS = day_start_ms("2099-06-01")
PEAK_MIB = 400  # 165 MiB; the stray bar's feed took 1,151 MiB


def _peak_kib(pid: int) -> int:
    """The process's peak resident size since its exec (``ru_maxrss`` carries the forking
    parent's over the exec: this test process's, grown by the tests before it)."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    return int(next(line for line in status if line.startswith("VmHWM")).split()[1])


def _data_dir(root: Path) -> Path:
    """The bundled BTC 5m bars and funding of 2025-02-26 .. 03-03 and a 2099 bar; the bundled
    Fear & Greed."""
    five = load_klines("BTC/USDT", "5m")
    five = five[
        (five.index >= day_start_ms("2025-02-26")) & (five.index < day_start_ms("2025-03-04"))
    ]
    frame = pd.concat([five, five.iloc[[-1]].set_axis([STRAY_MS])])
    path = kline_path("BTC/USDT", "5m", root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as out:
        frame.to_csv(out, index_label="open_time_ms", float_format="%.10g")
    funding = load_funding("BTC/USDT")
    with gzip.open(funding_path("BTC/USDT", root), "wt") as out:
        funding.loc[day_start_ms("2025-02-26") : day_start_ms("2025-03-04")].to_csv(
            out, index_label="funding_time_ms"
        )
    fear_greed_path(root).parent.mkdir(parents=True)
    shutil.copy(fear_greed_path(), fear_greed_path(root))
    return root


def _env(tmp_path: Path) -> dict[str, str]:
    return daemon_env(
        tmp_path / "state",
        VIGIL_DATA_DIR=str(_data_dir(tmp_path / "data")),
        VIGIL_MARKET__TICKERS='["BTC/USDT"]',
        VIGIL_SIM__START="2025-03-02T00:00:00Z",
    )


def test_vigil_prompt_with_a_far_future_bar_keeps_its_look_back_only(tmp_path: Path) -> None:
    run = prompt_with_peak(_env(tmp_path))
    assert run.code == 0
    assert "BTC/USDT" in json.loads(run.request)["messages"][0]["content"][0]["text"]
    assert run.peak_kib < PEAK_MIB * 1024, f"peak {run.peak_kib // 1024} MiB"


def test_vigil_sim_with_a_far_future_bar_serves_its_start_without_the_years_between(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    log = tmp_path / "sim.log"
    with sim_exchange(env, log) as proc:
        assert proc.poll() is None, log.read_text()[-3000:]
        peak_kib = _peak_kib(proc.pid)
    assert peak_kib < PEAK_MIB * 1024, f"peak {peak_kib // 1024} MiB"
    assert "BTC/USDT's bars from 2099-06-01 00:00 on are not served" in log.read_text()


def test_vigil_run_sim_keeps_its_look_back_and_the_bars_before_a_long_hole(
    tmp_path: Path,
) -> None:
    settings = Settings(
        state_dir=tmp_path / "state",
        data_dir=_data_dir(tmp_path / "data"),
        market=MarketConfig(source="sim", tickers=("BTC/USDT",)),
        sim=SimConfig(start=day_start_ms("2025-03-02") // 1000),
    )
    feed = daemon_clock(settings).feed
    series = feed._series["BTC/USDT"]
    assert series.slots <= 7 * DAY_MS // feed.bar_ms  # the recording's 6 days, whole 4h rows
    assert feed.left_out_ms("BTC/USDT") == STRAY_MS
    assert STRAY_MS - day_start_ms("2025-03-04") > LONGEST_SERVED_HOLE_MS
    # the recording's span is still the whole file's: a start in 2099 is not refused as outside
    assert feed.span_ms("BTC/USDT")[1] == STRAY_MS + feed.bar_ms - 1
