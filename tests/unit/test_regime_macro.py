"""Macro quadrant rules on hand-made monthly series, and the FRED snapshot source.

Every series here is a test fixture (round numbers built to put growth and inflation where a test
needs them), not real FRED data.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydantic import SecretStr
from test_regime_support import compounding, monthly_series, utc_ms

from core.clock import VirtualClock
from regime.config import RegimeConfig
from regime.fred import (
    FredSnapshotSource,
    FredSource,
    build_macro_source,
    load_snapshot_series,
)
from regime.macro import (
    MACRO_EXPOSURE,
    MacroDataError,
    MacroQuadrant,
    MacroRegime,
    MacroRule,
    classify_macro,
)

NOW_MS = utc_ms("2025-02-20")  # Dec 2024 figures are public, Jan 2025 ones not yet (lag 45 d)
MONTHS = 36  # 2022-01 .. 2024-12


def level(
    recent_pct: float, earlier_pct: float, months: int = MONTHS, recent: int = 4
) -> np.ndarray:
    """Index levels growing ``earlier_pct`` % a month, then ``recent_pct`` % for ``recent`` months."""
    steps = [earlier_pct] * (months - 1 - recent) + [recent_pct] * recent
    return compounding(100.0, steps)


GROWTH_RISING = level(recent_pct=0.5, earlier_pct=0.1)
GROWTH_FALLING = level(recent_pct=-0.2, earlier_pct=0.2)
INFLATION_RISING = level(recent_pct=0.6, earlier_pct=0.2)
INFLATION_FALLING = level(recent_pct=0.05, earlier_pct=0.4)


def classify(growth: np.ndarray, inflation: np.ndarray, now_ms: int = NOW_MS) -> MacroRegime:
    return classify_macro(
        monthly_series(growth, first_month="2022-01-01"),
        monthly_series(inflation, first_month="2022-01-01"),
        now_ms=now_ms,
        source="test",
    )


@pytest.mark.parametrize(
    ("growth", "inflation", "quadrant", "exposure"),
    [
        (GROWTH_RISING, INFLATION_FALLING, MacroQuadrant.GOLDILOCKS, 1.2),
        (GROWTH_RISING, INFLATION_RISING, MacroQuadrant.REFLATION, 1.0),
        (GROWTH_FALLING, INFLATION_RISING, MacroQuadrant.STAGFLATION, 0.6),
        (GROWTH_FALLING, INFLATION_FALLING, MacroQuadrant.DEFLATION, 0.9),
    ],
)
def test_quadrants(
    growth: np.ndarray, inflation: np.ndarray, quadrant: MacroQuadrant, exposure: float
) -> None:
    regime = classify(growth, inflation)
    assert regime.quadrant is quadrant and regime.exposure == exposure
    assert regime.reason is None and regime.source == "test"
    assert regime.as_of_ms == utc_ms("2024-12-01")


def test_the_figures_are_the_documented_yoy_changes() -> None:
    regime = classify(GROWTH_RISING, INFLATION_FALLING)
    yoy = 100.0 * (GROWTH_RISING[12:] / GROWTH_RISING[:-12] - 1.0)
    assert regime.growth_yoy_pct == pytest.approx(yoy[-1])
    assert regime.growth_trend_yoy_pct == pytest.approx(yoy[-12:].mean())
    cpi_yoy = 100.0 * (INFLATION_FALLING[12:] / INFLATION_FALLING[:-12] - 1.0)
    assert regime.inflation_yoy_pct == pytest.approx(cpi_yoy[-1])
    assert regime.inflation_prior_yoy_pct == pytest.approx(cpi_yoy[-4])


def test_equal_counts_as_not_rising() -> None:
    steady = level(recent_pct=0.2, earlier_pct=0.2)
    assert classify(steady, steady).quadrant is MacroQuadrant.DEFLATION


def test_a_figure_is_used_only_once_published() -> None:
    # January 2025: growth collapses (-5 % in the month), dated 2025-01-01, public ~mid February
    growth = np.append(GROWTH_RISING, GROWTH_RISING[-1] * 0.95)
    inflation = np.append(INFLATION_FALLING, INFLATION_FALLING[-1] * 1.004)
    before = classify(growth, inflation, now_ms=utc_ms("2025-02-10"))  # Jan + 45 d = Feb 15
    after = classify(growth, inflation, now_ms=utc_ms("2025-02-16"))
    assert before.quadrant is MacroQuadrant.GOLDILOCKS and before.as_of_ms == utc_ms("2024-12-01")
    assert after.quadrant is MacroQuadrant.DEFLATION and after.as_of_ms == utc_ms("2025-01-01")


def test_too_few_observations_is_unavailable() -> None:
    recent_only = monthly_series(GROWTH_RISING[-20:], first_month="2023-05-01")  # to 2024-12
    regime = classify_macro(
        recent_only,
        monthly_series(INFLATION_RISING, first_month="2022-01-01"),
        now_ms=NOW_MS,
        source="test",
    )
    assert regime.quadrant is MacroQuadrant.UNAVAILABLE and regime.exposure == 1.0
    assert regime.reason is not None and "INDPRO: need 12 consecutive" in regime.reason


def test_a_missing_month_in_the_window_is_unavailable() -> None:
    cpi = INFLATION_RISING.copy()
    cpi[-14] = np.nan  # FRED's "." -> NaN: breaks the YoY 3 months back
    regime = classify(GROWTH_RISING, cpi)
    assert regime.quadrant is MacroQuadrant.UNAVAILABLE
    assert regime.reason is not None and "CPIAUCSL" in regime.reason


def test_stale_and_unpublished_series_are_unavailable() -> None:
    stale = classify(GROWTH_RISING, INFLATION_RISING, now_ms=utc_ms("2025-06-01"))
    assert stale.quadrant is MacroQuadrant.UNAVAILABLE
    assert stale.reason is not None and "days old" in stale.reason
    early = classify(GROWTH_RISING, INFLATION_RISING, now_ms=utc_ms("2021-06-01"))
    assert early.quadrant is MacroQuadrant.UNAVAILABLE
    assert early.reason is not None and "no observation published" in early.reason


def test_a_non_monthly_series_is_unavailable() -> None:
    growth = monthly_series(GROWTH_RISING, first_month="2022-01-01")
    doubled = pd.concat(
        [growth, growth.iloc[-1:].set_axis([growth.index[-1] + pd.Timedelta(days=14)])]
    )
    regime = classify_macro(
        doubled,
        monthly_series(INFLATION_RISING, first_month="2022-01-01"),
        now_ms=NOW_MS,
        source="t",
    )
    assert regime.quadrant is MacroQuadrant.UNAVAILABLE
    assert regime.reason is not None and "not a monthly series" in regime.reason


def test_exposure_table_and_rule_defaults() -> None:
    assert MACRO_EXPOSURE == {
        MacroQuadrant.GOLDILOCKS: 1.2,
        MacroQuadrant.REFLATION: 1.0,
        MacroQuadrant.STAGFLATION: 0.6,
        MacroQuadrant.DEFLATION: 0.9,
        MacroQuadrant.UNAVAILABLE: 1.0,
    }
    rule = MacroRule()
    assert (rule.growth_series, rule.inflation_series) == ("INDPRO", "CPIAUCSL")
    assert rule.months_needed >= 12 + rule.growth_trend_months


# --- snapshot (replay) source -------------------------------------------------------------------


def write_snapshot(directory: Path, series_id: str, values: np.ndarray, header: str) -> None:
    """A CSV in FRED's download layout (test fixture values)."""
    dates = pd.date_range("2022-01-01", periods=len(values), freq="MS")
    lines = [f"{header},{series_id}"]
    lines += [
        f"{d:%Y-%m-%d},{'.' if np.isnan(v) else f'{v:.3f}'}"
        for d, v in zip(dates, values, strict=True)
    ]
    (directory / f"{series_id}.csv").write_text("\n".join(lines) + "\n")


def test_snapshot_files_load_in_both_fred_layouts(tmp_path: Path) -> None:
    values = GROWTH_RISING.copy()
    values[3] = np.nan
    write_snapshot(tmp_path, "INDPRO", values, header="observation_date")
    write_snapshot(tmp_path, "CPIAUCSL", INFLATION_FALLING, header="DATE")
    growth = load_snapshot_series(tmp_path, "INDPRO")
    assert len(growth) == MONTHS and np.isnan(growth.iloc[3])
    assert growth.iloc[-1] == pytest.approx(GROWTH_RISING[-1], abs=1e-3)
    assert growth.index[0] == pd.Timestamp("2022-01-01")
    assert load_snapshot_series(tmp_path, "CPIAUCSL").iloc[0] == pytest.approx(100.0)


def test_bad_snapshot_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(MacroDataError, match="missing"):
        load_snapshot_series(tmp_path, "INDPRO")
    (tmp_path / "INDPRO.csv").write_text("when,what\n2022-01-01,1\n")
    with pytest.raises(MacroDataError, match="expected columns"):
        load_snapshot_series(tmp_path, "INDPRO")
    (tmp_path / "INDPRO.csv").write_text("observation_date,INDPRO\n2022-01-01,abc\n")
    with pytest.raises(MacroDataError, match="non-numeric"):
        load_snapshot_series(tmp_path, "INDPRO")
    (tmp_path / "INDPRO.csv").write_text("observation_date,INDPRO\n01/02/2022,1\n")
    with pytest.raises(MacroDataError, match="bad date"):
        load_snapshot_series(tmp_path, "INDPRO")


async def test_snapshot_source_classifies_as_of_the_clock(tmp_path: Path) -> None:
    write_snapshot(tmp_path, "INDPRO", GROWTH_FALLING, header="observation_date")
    write_snapshot(tmp_path, "CPIAUCSL", INFLATION_RISING, header="observation_date")
    clock = VirtualClock(epoch_ms=NOW_MS)
    source = FredSnapshotSource(clock, tmp_path)
    regime = await source.current()
    assert regime.quadrant is MacroQuadrant.STAGFLATION and regime.source == "snapshot"
    await clock.advance(200 * 86_400)  # the snapshot ends: the view goes stale, not invented
    later = await source.current()
    assert later.quadrant is MacroQuadrant.UNAVAILABLE and "days old" in (later.reason or "")


async def test_missing_snapshot_is_unavailable(tmp_path: Path) -> None:
    regime = await FredSnapshotSource(VirtualClock(epoch_ms=NOW_MS), tmp_path / "none").current()
    assert regime.quadrant is MacroQuadrant.UNAVAILABLE and regime.source == "snapshot"
    assert regime.reason is not None and "no FRED snapshot for INDPRO" in regime.reason


async def test_build_macro_source_picks_key_then_snapshot_then_nothing(tmp_path: Path) -> None:
    clock = VirtualClock(epoch_ms=NOW_MS)
    with_snapshot = RegimeConfig(fred_snapshot_dir=tmp_path)
    assert isinstance(build_macro_source(clock, with_snapshot, SecretStr("k")), FredSource)
    assert isinstance(build_macro_source(clock, with_snapshot, None), FredSnapshotSource)
    bare = build_macro_source(clock, RegimeConfig(), None)
    regime = await bare.current()
    assert regime.quadrant is MacroQuadrant.UNAVAILABLE
    assert regime.reason == "no FRED API key configured" and regime.exposure == 1.0
