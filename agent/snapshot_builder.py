"""Assembles a MarketSnapshot from the daemon's live views. Reads caches; fetches nothing itself.

Each view is a small Protocol so tests build snapshots from fakes. A view that raises or is absent
turns into ``None`` plus a reason: one broken source never stops a decision.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from agent.indicator_state import IndicatorState
from agent.indicators import TimeframeSummary
from agent.snapshot import (
    MarketSnapshot,
    TickerSnapshot,
    merge_unavailable,
    require_reasons,
)
from agent.snapshot_finite import non_finite, ticker_finite
from agent.snapshot_portfolio import (
    Portfolio,
    pending_order,
    pending_order_key,
    position_snapshot,
)
from broker.port import Broker
from core.clock import Clock
from core.errors import HaltTradingError
from derivatives.fields import CONTEXT_FIELDS
from market.aggregator import CandleArrays
from market.features import TickFeatures
from regime.gold_hedge import read_gold_hedge
from regime.snapshot import RegimeSnapshot

log = logging.getLogger(__name__)

BTC = "BTC/USDT"
#: the learner keeps 50 closed trades for its posteriors; the decider reads the newest few (50 of
#: them were ~13 KB, two thirds of every snapshot and its journal line, and ~4k tokens per call)
RECENT_TRADES_SHOWN = 10

SUMMARY_TIMEFRAMES = ("15m", "1h", "4h")


class MarketView(Protocol):
    def last_price(self, ticker: str) -> float | None: ...

    def closed_arrays(self, ticker: str, timeframe: str) -> CandleArrays: ...


class FeaturesView(Protocol):
    def features(self, ticker: str) -> TickFeatures | None: ...


class ContextReading(Protocol):
    values: Mapping[str, Any]
    unavailable: Mapping[str, str]


class ContextSource(Protocol):
    """Outside data for some of ``CONTEXT_FIELDS`` (derivatives, sentiment, ...)."""

    name: str

    async def read(self) -> ContextReading: ...


#: a source's ``read_now``: the reading it holds in memory, taken without waiting (so without the
#: timeout armed and cancelled around ``read``, ~12 us a decision)
InstantRead = Callable[[], ContextReading]


class InsightsView(Protocol):
    """Attaches ``historical_insights`` (agent.memory_view) to a built snapshot."""

    async def attach(self, snapshot: MarketSnapshot) -> MarketSnapshot: ...


class LearnerView(Protocol):
    def posteriors(self, regime: str | None) -> dict[str, Any]: ...

    def draw(self, regime: str | None, rng: random.Random) -> dict[str, float]: ...

    def recent_trades(self, last: int | None = None) -> list[dict[str, Any]]: ...


#: what the snapshot says when a part is not wired into this daemon
NOT_WIRED = {
    "context": "no outside-data source is configured",
    "learner": "learning is off for this run (--no-memory keeps the learner out of the snapshot)",
    "insights": "the trading memory graph is not built yet",
}


class SnapshotBuilder:
    def __init__(
        self,
        clock: Clock,
        *,
        tickers: Sequence[str],
        market: MarketView,
        features: FeaturesView,
        broker: Broker,
        agent_memory: Callable[[], str],
        peak_prices: Callable[[], Mapping[str, float]],
        regime: Callable[[], Awaitable[RegimeSnapshot | None]],
        context_sources: Sequence[ContextSource] = (),
        learner: LearnerView | None = None,
        draw_seed: int = 0,
        source_timeout_secs: float = 5.0,
        insights: InsightsView | None = None,
    ) -> None:
        """``draw_seed``: the run's seed; each snapshot's Thompson draw is seeded from it and the
        decision id, so a replay draws the same numbers every time."""
        self._clock = clock
        self._tickers = tuple(sorted(dict.fromkeys(tickers)))
        self._market = market
        self._features = features
        self._broker = broker
        self._agent_memory = agent_memory
        self._peak_prices = peak_prices
        self._regime = regime
        self._sources = tuple((source, _instant_read(source)) for source in context_sources)
        self._learner = learner
        self._draw_seed = draw_seed
        self._summaries: dict[tuple[str, str], _SeriesIndicators] = {}
        #: ticker -> (the 1h arrays object, the 24h volume summed from it)
        self._volumes: dict[str, tuple[CandleArrays, float | None]] = {}
        self._source_timeout_secs = source_timeout_secs
        self._insights = insights

    async def build(self, wake_reasons: Sequence[str], *, decision_id: str = "") -> MarketSnapshot:
        """``decision_id`` seeds the Thompson draw (with the run's seed); without one (``vigil
        prompt``) the instant stands in for it."""
        at_ms = self._clock.now_ms()
        unavailable: dict[str, str] = {}
        tickers = {t: self._ticker_or_reason(t, unavailable) for t in self._tickers}
        btc = tickers.get(BTC)
        if btc is None:
            unavailable["btc_price"] = f"{BTC} is not among the configured tickers"
        portfolio = await self._portfolio(at_ms, unavailable)
        regime = await self._regime_or_reason(unavailable)
        context = await self._context(unavailable)
        if regime is not None:
            hedge = read_gold_hedge(context.get("paxg"), btc.return_4h_pct if btc else None)
            regime = regime.model_copy(update={"gold_hedge": hedge})
        learner = self._learning(regime, decision_id or f"t{at_ms}", unavailable)
        unavailable["historical_insights"] = NOT_WIRED["insights"]
        fields: dict[str, Any] = {
            "at_ms": at_ms,
            "tickers": tickers,
            "btc_price": btc.price if btc else None,
            "btc_change_1h_pct": btc.change_1h_pct if btc else None,
            "btc_change_24h_pct": btc.return_24h_pct if btc else None,
            "regime": regime,
            "exposure_scale": regime.exposure_scale if regime is not None else 1.0,
            "agent_memory": self._agent_memory(),
            "open_positions": portfolio.positions,
            "pending_orders": portfolio.pending_orders,
            "portfolio_value": portfolio.value,
            "cash": portfolio.cash,
            "gate_wake_reasons": list(wake_reasons),
            **context,
            **learner,
        }
        require_reasons(fields, unavailable)
        snapshot = MarketSnapshot(**fields, unavailable=merge_unavailable(unavailable))
        return snapshot if self._insights is None else await self._insights.attach(snapshot)

    def _ticker_or_reason(self, ticker: str, unavailable: dict[str, str]) -> TickerSnapshot:
        """One ticker's figures, or none of them with the reason: a bad number in one ticker
        (or a view that fails on it) must not stop the decision on the others."""
        reasons: dict[str, str] = {}
        try:
            snapshot = self._ticker(ticker, reasons)
            if not ticker_finite(snapshot):
                bad = non_finite(snapshot.model_dump())
                raise ValueError(f"non-finite {', '.join(bad)}")
        except Exception as exc:
            log.warning("snapshot: %s unavailable: %r", ticker, exc)
            unavailable[f"tickers.{ticker}"] = f"market data unusable: {type(exc).__name__}: {exc}"
            return TickerSnapshot(
                price=None,
                change_1h_pct=None,
                return_4h_pct=None,
                return_24h_pct=None,
                volume_24h=None,
                volume_ratio=None,
                return_zscore=None,
            )
        unavailable.update(reasons)
        return snapshot

    def _ticker(self, ticker: str, unavailable: dict[str, str]) -> TickerSnapshot:
        feats = self._features.features(ticker)
        if feats is None:
            unavailable[f"tickers.{ticker}"] = "no market data received yet"
        else:
            for name, why in feats.unavailable.items():
                unavailable[f"tickers.{ticker}.{name}"] = why
        hourly = self._market.closed_arrays(ticker, "1h")
        volume_24h = self._volume_24h(ticker, hourly)
        if volume_24h is None:
            unavailable[f"tickers.{ticker}.volume_24h"] = (
                f"needs 24 closed 1h candles, have {len(hourly.volume)}"
            )
        multi_tf = {tf: self._summary(ticker, tf) for tf in SUMMARY_TIMEFRAMES}
        return TickerSnapshot(
            price=self._market.last_price(ticker),
            change_1h_pct=feats.change_1h_pct if feats else None,
            return_4h_pct=feats.change_4h_pct if feats else None,
            return_24h_pct=feats.change_24h_pct if feats else None,
            volume_24h=volume_24h,
            volume_ratio=feats.volume_ratio if feats else None,
            return_zscore=feats.return_zscore if feats else None,
            multi_tf=multi_tf,
        )

    def _volume_24h(self, ticker: str, hourly: CandleArrays) -> float | None:
        """The last 24 closed 1h volumes summed, again only after a 1h close: the aggregator
        hands out the same read-only arrays object until then (about 8 decisions an hour)."""
        known = self._volumes.get(ticker)
        if known is not None and known[0] is hourly:
            return known[1]
        volume = float(hourly.volume[-24:].sum()) if len(hourly.volume) >= 24 else None
        self._volumes[ticker] = (hourly, volume)
        return volume

    def _summary(self, ticker: str, timeframe: str) -> TimeframeSummary:
        """Indicators of the closed candles, updated only when a candle has closed: the
        aggregator hands out the same arrays object until then (most decisions come between
        closes), and a close adds one candle to the running indicators."""
        arrays = self._market.closed_arrays(ticker, timeframe)
        series = self._summaries.get((ticker, timeframe))
        if series is None:
            series = self._summaries[(ticker, timeframe)] = _SeriesIndicators()
        return series.summary(arrays)

    async def _portfolio(self, at_ms: int, unavailable: dict[str, str]) -> Portfolio:
        """All from the broker or none of it: the risk caps must never see positions without the
        resting orders that will add to them (with no portfolio value they buy nothing)."""
        try:
            details = await self._broker.get_positions_detail()
            orders = await self._broker.get_open_orders()
            value = await self._broker.get_portfolio_value()
            cash = await self._broker.get_cash()
        except HaltTradingError:
            raise  # the broker says stop (a short position): the routine halts, not "unavailable"
        except Exception as exc:
            log.warning("snapshot: broker unavailable: %s", exc)
            reason = f"broker unavailable: {type(exc).__name__}: {exc}"
            for name in ("open_positions", "pending_orders", "portfolio_value", "cash"):
                unavailable[name] = reason
            return Portfolio([], [], None, None)
        peaks = self._peak_prices()
        return Portfolio(
            positions=[position_snapshot(d, peaks.get(d.ticker), at_ms) for d in details],
            pending_orders=sorted((pending_order(o) for o in orders), key=pending_order_key),
            value=value,
            cash=cash,
        )

    async def _regime_or_reason(self, unavailable: dict[str, str]) -> RegimeSnapshot | None:
        try:
            regime = await self._regime()
        except Exception as exc:
            log.warning("snapshot: regime unavailable: %s", exc)
            unavailable["regime"] = f"regime model failed: {type(exc).__name__}: {exc}"
            return None
        if regime is None:
            unavailable["regime"] = "no regime estimate yet (needs 4h history)"
        return regime

    async def _context(self, unavailable: dict[str, str]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        reasons: dict[str, str] = {}
        for source, read_now in self._sources:
            try:
                if read_now is not None:
                    reading = read_now()
                else:
                    async with asyncio.timeout(self._source_timeout_secs):
                        reading = await source.read()
            except Exception as exc:
                for name in CONTEXT_FIELDS:
                    reasons.setdefault(name, f"{source.name} failed: {type(exc).__name__}: {exc}")
                continue
            values.update({k: v for k, v in reading.values.items() if k in CONTEXT_FIELDS})
            reasons.update(reading.unavailable)
        for name in CONTEXT_FIELDS:
            if values.get(name) is None:
                unavailable[name] = reasons.get(name, NOT_WIRED["context"])
        return {name: values.get(name) for name in CONTEXT_FIELDS}

    def _learning(
        self, regime: RegimeSnapshot | None, decision_id: str, unavailable: dict[str, str]
    ) -> dict[str, Any]:
        if self._learner is None:
            unavailable["ts_posteriors"] = unavailable["recent_trades"] = NOT_WIRED["learner"]
            return {"ts_posteriors": None, "recent_trades": None}
        return {
            "ts_posteriors": learner_view(
                self._learner, self._tickers, regime, f"{self._draw_seed}:{decision_id}"
            ),
            # a view may hand out more than asked; the newest are shown
            "recent_trades": self._learner.recent_trades(RECENT_TRADES_SHOWN)[
                -RECENT_TRADES_SHOWN:
            ],
        }


def _instant_read(source: ContextSource) -> InstantRead | None:
    """The source's ``read_now`` when it has one (optional: a source that fetches has not)."""
    read_now = getattr(source, "read_now", None)
    return read_now if callable(read_now) else None


def learner_view(
    learner: LearnerView,
    tickers: Sequence[str],
    regime: RegimeSnapshot | None,
    draw_seed: str,
) -> dict[str, Any]:
    """Per ticker, the posteriors in force for the ticker's crypto regime (the regime its exits
    are learned under), each signal's mean beside this decision's Thompson draw.

    One ``random.Random(draw_seed)`` draws for the whole decision, tickers in name order; a
    string seed is hashed with SHA-512, so the draw is the same in every process."""
    rng = random.Random(draw_seed)
    view: dict[str, Any] = {}
    for ticker in sorted(tickers):
        label = regime.crypto.get(ticker) if regime is not None else None
        table = learner.posteriors(label)
        drawn = learner.draw(label, rng)
        table["signals"] = {
            name: {**posterior, "draw": drawn[name]} for name, posterior in table["signals"].items()
        }
        view[ticker] = table
    return {"draw_seed": draw_seed, "tickers": view}


class _SeriesIndicators:
    """One series' running indicators, fed the closes that are new in each arrays object."""

    __slots__ = ("_arrays", "_last_open_ms", "_state", "_summary")

    def __init__(self) -> None:
        self._arrays: CandleArrays | None = None
        self._state = IndicatorState()
        self._last_open_ms: int | None = None
        self._summary = self._state.summary()

    def summary(self, arrays: CandleArrays) -> TimeframeSummary:
        if arrays is self._arrays:
            return self._summary
        start = self._continues_at(arrays)
        if start is None:  # first sight, or not this series' continuation: start over
            self._state, start = IndicatorState(), 0
        self._state.extend(arrays.close[start:].tolist())
        self._arrays = arrays
        self._last_open_ms = int(arrays.open_time_ms[-1]) if len(arrays.close) else None
        self._summary = self._state.summary()
        return self._summary

    def _continues_at(self, arrays: CandleArrays) -> int | None:
        """Index of the first close after the last one folded in, when ``arrays`` holds that
        close unchanged (closes are appended; the newest can be corrected, which starts over)."""
        last = self._last_open_ms
        if last is None:
            return None
        index = int(np.searchsorted(arrays.open_time_ms, last))
        if index >= len(arrays.close) or int(arrays.open_time_ms[index]) != last:
            return None
        return index + 1 if float(arrays.close[index]) == self._state.last_close else None
