"""CryptoRegimeTracker: refit cadence on a VirtualClock, per-ticker models, failures kept local."""

from __future__ import annotations

import logging
import threading

import pandas as pd
import pytest
from test_regime_support import last_180_days, recorded_4h

from core.clock import VirtualClock
from regime.crypto_hmm import (
    CryptoHmmConfig,
    CryptoLabel,
    CryptoRegime,
    CryptoRegimeModel,
    FitReport,
)
from regime.tracker import CryptoRegimeTracker

DAY_SECS = 86_400.0
FOUR_HOURS_SECS = 14_400.0
EPOCH_MS = 1_740_787_200_000  # 2025-03-01 00:00 UTC


class FakeModel:
    """Counts fits; "fits" when the frame has at least ``min_rows`` rows."""

    def __init__(self, min_rows: int = 1, fail: bool = False) -> None:
        self.min_rows = min_rows
        self.fail = fail
        self.fits: list[tuple[int, int | None]] = []  # (rows, fitted_at_ms)
        self.fit_threads: list[int] = []
        self.fitted = False

    def fit(self, frame: pd.DataFrame, *, fitted_at_ms: int | None = None) -> FitReport:
        self.fit_threads.append(threading.get_ident())
        self.fits.append((len(frame), fitted_at_ms))
        if self.fail:
            raise RuntimeError("boom")
        if len(frame) < self.min_rows:
            return FitReport(
                fitted=False, n_rows=len(frame), n_segments=1, reason="too little data"
            )
        self.fitted = True
        return FitReport(fitted=True, n_rows=len(frame), n_segments=1, chosen_n_states=2)

    def predict(self, frame: pd.DataFrame) -> CryptoRegime:
        if not self.fitted:
            return CryptoRegime.unknown("no fitted regime model")
        return CryptoRegime(label=CryptoLabel.HIGH, exposure=0.6, state=1, n_states=2)


def frame_of(rows: int) -> pd.DataFrame:
    return recorded_4h("BTC/USDT").iloc[:rows]


async def test_refits_on_the_first_close_then_once_a_day() -> None:
    clock = VirtualClock(epoch_ms=EPOCH_MS)
    models: list[FakeModel] = []

    def factory() -> FakeModel:
        models.append(FakeModel())
        return models[-1]

    tracker = CryptoRegimeTracker(clock, factory, refit_every_secs=DAY_SECS)
    regime = await tracker.on_4h_close("BTC/USDT", frame_of(50))
    assert regime.label is CryptoLabel.HIGH and tracker.current("BTC/USDT") == regime
    assert models[0].fits == [(50, EPOCH_MS)]
    for _ in range(5):  # the next five closes of the day: no refit
        await clock.advance(FOUR_HOURS_SECS)
        await tracker.on_4h_close("BTC/USDT", frame_of(50))
    assert len(models[0].fits) == 1
    assert not tracker.refit_due("BTC/USDT")
    await clock.advance(FOUR_HOURS_SECS)  # 24 h after the first fit
    assert tracker.refit_due("BTC/USDT")
    await tracker.on_4h_close("BTC/USDT", frame_of(51))
    assert models[0].fits[-1] == (51, EPOCH_MS + int(DAY_SECS * 1000))
    assert len(models) == 1  # the same model refitted
    assert tracker.last_fit("BTC/USDT") is not None


async def test_fit_runs_in_a_worker_thread() -> None:
    model = FakeModel()
    tracker = CryptoRegimeTracker(VirtualClock(), lambda: model)
    await tracker.on_4h_close("BTC/USDT", frame_of(20))
    assert model.fit_threads and model.fit_threads[0] != threading.get_ident()


async def test_each_ticker_has_its_own_model_and_cadence() -> None:
    clock = VirtualClock(epoch_ms=EPOCH_MS)
    models: dict[int, FakeModel] = {}

    def factory() -> FakeModel:
        models[len(models)] = FakeModel()
        return models[len(models) - 1]

    tracker = CryptoRegimeTracker(clock, factory, refit_every_secs=DAY_SECS)
    await tracker.on_4h_close("BTC/USDT", frame_of(30))
    await clock.advance(12 * 3600)
    await tracker.on_4h_close("ETH/USDT", frame_of(30))
    await clock.advance(12 * 3600)  # BTC is due, ETH is not
    await tracker.on_4h_close("BTC/USDT", frame_of(30))
    await tracker.on_4h_close("ETH/USDT", frame_of(30))
    assert len(models) == 2
    assert len(models[0].fits) == 2 and len(models[1].fits) == 1


async def test_a_failed_fit_is_retried_at_the_next_close() -> None:
    clock = VirtualClock(epoch_ms=EPOCH_MS)
    model = FakeModel(min_rows=100)
    tracker = CryptoRegimeTracker(clock, lambda: model)
    regime = await tracker.on_4h_close("SOL/USDT", frame_of(40))
    assert regime.label is CryptoLabel.UNKNOWN and regime.reason is not None
    report = tracker.last_fit("SOL/USDT")
    assert report is not None and not report.fitted
    await clock.advance(FOUR_HOURS_SECS)
    assert tracker.refit_due("SOL/USDT")
    regime = await tracker.on_4h_close("SOL/USDT", frame_of(120))
    assert len(model.fits) == 2 and regime.label is CryptoLabel.HIGH
    assert not tracker.refit_due("SOL/USDT")


async def test_a_fit_that_raises_is_logged_and_the_close_still_predicts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = FakeModel(fail=True)
    tracker = CryptoRegimeTracker(VirtualClock(), lambda: model)
    with caplog.at_level(logging.ERROR, logger="regime.tracker"):
        regime = await tracker.on_4h_close("BTC/USDT", frame_of(40))
    assert regime.label is CryptoLabel.UNKNOWN
    assert any("fit raised" in r.getMessage() for r in caplog.records)
    assert tracker.refit_due("BTC/USDT")


def test_current_before_any_close_is_unknown_with_a_reason() -> None:
    tracker = CryptoRegimeTracker(VirtualClock())
    regime = tracker.current("ETH/USDT")
    assert regime.label is CryptoLabel.UNKNOWN and regime.exposure == 1.0
    assert regime.reason == "no 4h close of ETH/USDT processed yet"
    with pytest.raises(ValueError):
        CryptoRegimeTracker(VirtualClock(), refit_every_secs=0)


async def test_with_the_real_model_on_recorded_data() -> None:
    clock = VirtualClock(epoch_ms=EPOCH_MS)
    config = CryptoHmmConfig(n_states_max=3, restarts=1)
    tracker = CryptoRegimeTracker(clock, lambda: CryptoRegimeModel(config))
    frame = last_180_days("ETH/USDT")
    regime = await tracker.on_4h_close("ETH/USDT", frame)
    report = tracker.last_fit("ETH/USDT")
    assert report is not None and report.fitted and report.fitted_at_ms == EPOCH_MS
    assert regime.label is not CryptoLabel.UNKNOWN
    assert regime.fitted_at_ms == EPOCH_MS and regime.as_of_ms == int(frame.index[-1])
