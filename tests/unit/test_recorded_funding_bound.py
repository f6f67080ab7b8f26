"""A recorded funding rate the live reader refuses (past +/- 10 % an interval,
``derivatives.binance``) refuses the replay naming the file, and ``vigil data check`` lists it.
Before, it loaded: replayed, the premiumIndex answer holding it was refused whole by the live
parser, so every ticker's funding was unavailable until the next settlement, no file named."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples
from pydantic import ValidationError
from test_recorded_hostile import T0_MS, good_rows, write_klines

from core.errors import RefuseToStartError
from derivatives.binance import PremiumIndexRow
from market.datacheck import check_data_dir
from market.recorded import MalformedDataError, load_funding
from runner.replay.build import ReplayOptions
from runner.replay.data import open_recorded_data

HOUR_MS = 3_600_000


def write_funding(data_dir: Path, rate: str) -> Path:
    path = data_dir / "binance-usdm" / "BTCUSDT-funding.csv.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = f"funding_time_ms,funding_rate\n{T0_MS},0.0001\n{T0_MS + 8 * HOUR_MS},{rate}\n"
    path.write_bytes(gzip.compress(rows.encode()))
    return path


def test_a_funding_rate_the_live_reader_refuses_refuses_the_replay(tmp_path: Path) -> None:
    write_klines(tmp_path, good_rows(12 * 24))
    path = write_funding(tmp_path, "0.5")
    options = ReplayOptions(T0_MS, T0_MS + 12 * HOUR_MS, tmp_path / "run", ("BTC/USDT",))
    with pytest.raises(RefuseToStartError, match=rf"{path}: 1 row\(s\) with a rate outside"):
        open_recorded_data(tmp_path, options)


def test_data_check_lists_it(tmp_path: Path) -> None:
    write_funding(tmp_path, "-0.2")
    [check] = check_data_dir(tmp_path)
    assert check.bad_rows == ["1 with a rate outside -0.1 .. 0.1, the first 2025-03-01 08:00"]


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(rate=st.floats(-1.0, 1.0) | st.sampled_from([0.1, -0.1, 0.1000001, -0.1000001]))
def test_a_rate_loads_exactly_when_the_live_reader_takes_it(tmp_path: Path, rate: float) -> None:
    write_funding(tmp_path, repr(rate))
    try:
        PremiumIndexRow.model_validate(
            {"symbol": "BTCUSDT", "markPrice": "1", "lastFundingRate": repr(rate), "time": T0_MS}
        )
        live = True
    except ValidationError:
        live = False
    try:
        load_funding("BTC/USDT", tmp_path)
        loads = True
    except MalformedDataError:
        loads = False
    assert loads == live
