"""The snapshot's ``historical_insights``: what the trading memory says about now.

Per ticker: the situation now (``memory.model.Situation`` from the snapshot's own numbers), the
posterior win rate of the most similar past trades of this ticker in this regime (and the entry
scale the fallback's memory rule derives from it), the regime's trade statistics, and the top-k
insights with their score parts; all within ``snapshot_budget_chars``. ``None`` only with a reason:
memory off, store down, or nothing in memory yet.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import orjson

from agent.memo import IdentityMemo
from agent.snapshot import MarketSnapshot
from core.clock import Clock
from core.rounding import scaled_round
from memory.config import MemoryConfig
from memory.model import RegimeStats, Situation
from memory.port import MemoryStore, StoreUnavailableError, reading
from memory.retrieval import Retriever, Row, row_ranked, row_score

log = logging.getLogger(__name__)

SituationSink = Callable[[str, Situation, str], None]


def situation_of(snapshot: MarketSnapshot, ticker: str) -> Situation:
    view = snapshot.tickers[ticker]
    one_h, four_h = view.multi_tf.get("1h"), view.multi_tf.get("4h")
    funding = (snapshot.funding_rates or {}).get(ticker)
    fear_greed = (snapshot.fear_greed or {}).get("value")
    regime = snapshot.regime.crypto.get(ticker, "unknown") if snapshot.regime else "unknown"
    return Situation.from_features(
        {
            "return_zscore_15m": view.return_zscore,
            "return_1h_pct": view.change_1h_pct,
            "return_4h_pct": view.return_4h_pct,
            "return_24h_pct": view.return_24h_pct,
            "rsi_1h": one_h.rsi if one_h else None,
            "rsi_4h": four_h.rsi if four_h else None,
            "percent_b_1h": one_h.bollinger_position if one_h else None,
            "funding_pct": funding * 100 if funding is not None else None,
            "fear_greed": float(fear_greed) if isinstance(fear_greed, int | float) else None,
        },
        regime,
    )


class MemoryInsights:
    """Attaches ``historical_insights`` to a built snapshot (and tells the writer the situation)."""

    def __init__(
        self,
        store: MemoryStore,
        retriever: Retriever,
        config: MemoryConfig,
        situation_sink: SituationSink | None = None,
        *,
        clock: Clock | None = None,
        rest_after_failure_secs: float = 60.0,
    ) -> None:
        self._clock = clock
        self._rest_secs = rest_after_failure_secs
        self._resting_until: float | None = None
        self._last_failure = ""
        self._store = store
        self._retriever = retriever
        self._config = config
        self._sink = situation_sink
        rule = config.fallback_rule
        self._prior = f"Beta({rule.prior_wins:g},{rule.prior_losses:g})"
        self.reads = 0  # items put in snapshots (the replay report's "insights read")
        #: each ticker's situation at the last snapshot (the prompt's insights rank by it too)
        self.situations: dict[str, Situation] = {}
        #: a regime_stats answer's JSON dump, by the very (frozen) object: the store hands out
        #: the same objects until a trade closes, and each snapshot asks for three
        self._stats_dumps: IdentityMemo[RegimeStats, dict[str, Any]] = IdentityMemo(64)

    async def attach(self, snapshot: MarketSnapshot) -> MarketSnapshot:
        unavailable = dict(snapshot.unavailable)
        unavailable.pop("historical_insights", None)
        now = self._clock.monotonic_secs() if self._clock is not None else None
        items: list[dict[str, Any]] | None
        if now is not None and self._resting_until is not None and now < self._resting_until:
            # a down store costs one decision its timeout, not every decision until it is back
            items = None
            unavailable["historical_insights"] = (
                f"memory store unavailable: {self._last_failure} "
                f"(next try in {self._resting_until - now:.0f} s)"
            )
            return snapshot.model_copy(
                update={
                    "historical_insights": None,
                    "unavailable": dict(sorted(unavailable.items())),
                }
            )
        try:
            items = await self._items(snapshot)
            self._resting_until = None
        except StoreUnavailableError as exc:
            log.warning("memory: store unavailable for the snapshot: %s", exc)
            self._last_failure = str(exc)[:200]
            if now is not None:
                self._resting_until = now + self._rest_secs
            items, unavailable["historical_insights"] = None, f"memory store unavailable: {exc}"
        if items is not None and not items:
            items, unavailable["historical_insights"] = None, "memory is empty: no closed trade yet"
        if items:
            self.reads += sum(1 for i in items if i["kind"] == "insight")
        return snapshot.model_copy(
            update={"historical_insights": items, "unavailable": dict(sorted(unavailable.items()))}
        )

    def situation_vector(self, ticker: str) -> tuple[float, ...] | None:
        situation = self.situations.get(ticker)
        return situation.vector if situation is not None else None

    async def _items(self, snapshot: MarketSnapshot) -> list[dict[str, Any]]:
        head: list[dict[str, Any]] = []
        tail: list[tuple[str, Row]] = []
        with reading(self._store):  # one look for another process's writes, not nine
            for ticker in sorted(snapshot.tickers):
                await self._ticker_items(snapshot, ticker, head, tail)
        # best score first, a stable sort as on the items; only those within the budget are made
        tail.sort(key=_by_score)
        return _within_budget(head, tail, self._config.snapshot_budget_chars)

    async def _ticker_items(
        self,
        snapshot: MarketSnapshot,
        ticker: str,
        head: list[dict[str, Any]],
        tail: list[tuple[str, Row]],
    ) -> None:
        rule = self._config.fallback_rule
        macro = snapshot.regime.macro if snapshot.regime else "unavailable"
        situation = self.situations[ticker] = situation_of(snapshot, ticker)
        if self._sink is not None:
            self._sink(ticker, situation, macro)
        regime = situation.regime
        neighbours = await self._store.neighbour_summary(
            ticker=ticker, regime=regime, vector=situation.vector, n=rule.neighbours
        )
        if neighbours.trades:
            wins = neighbours.wins
            mean = (rule.prior_wins + wins) / (
                rule.prior_wins + rule.prior_losses + neighbours.trades
            )
            scale = min(rule.max_scale, max(rule.min_scale, 2.0 * mean))
            head.append(
                {
                    "kind": "posterior",
                    "ticker": ticker,
                    "regime": regime,
                    "similar_trades": neighbours.trades,
                    "wins": wins,
                    "posterior_win_rate": scaled_round(mean, 4, 1e4),  # round(mean, 4)
                    "entry_scale": scaled_round(scale, 4, 1e4),
                    "prior": self._prior,
                    "mean_sim": scaled_round(neighbours.sim_sum / neighbours.trades, 4, 1e4),
                }
            )
        for stats in await self._store.regime_stats(ticker=ticker, regime=regime):
            dumped = self._stats_dumps.get(stats)
            if dumped is None:
                dumped = stats.model_dump(mode="json")
                self._stats_dumps.put(stats, dumped)
            head.append({"kind": "regime_stats", **dumped})
        for row in await self._retriever.rows(
            now_ms=snapshot.at_ms, ticker=ticker, vector=situation.vector
        ):
            tail.append((ticker, row))


def _by_score(entry: tuple[str, Row]) -> float:
    return -row_score(entry[1])


def _insight_item(ticker: str, row: Row) -> dict[str, Any]:
    hit = row_ranked(row)
    return {
        "kind": "insight",
        "id": hit.insight.insight_id,
        "ticker": ticker,
        "insight_kind": hit.insight.kind,
        "text": hit.insight.text,
        # ``**hit.parts()``, without the dict in between
        "sim": hit.sim,
        "role_weight": hit.role_weight,
        "age_days": hit.age_days,
        "salience": hit.salience,
        "score": hit.score,
    }


def _within_budget(
    head: list[dict[str, Any]], tail: list[tuple[str, Row]], budget: int
) -> list[dict[str, Any]]:
    """The items in order (``head``, then ``tail`` made into items) up to the first that would
    pass ``budget`` (JSON characters): a tail item is made only when it is reached (a snapshot
    keeps one or two of its fifteen)."""
    kept: list[dict[str, Any]] = []
    used = 0
    for item in head:
        size = len(orjson.dumps(item))
        if used + size > budget:
            return kept
        kept.append(item)
        used += size
    for ticker, row in tail:
        item = _insight_item(ticker, row)
        size = len(orjson.dumps(item))
        if used + size > budget:
            break
        kept.append(item)
        used += size
    return kept


class MemoryOff:
    """Memory disabled: the field says so (``--no-memory``, ``VIGIL_MEMORY__ENABLED=false``)."""

    reads = 0

    def __init__(self, reason: str = "memory is off (--no-memory)") -> None:
        self.reason = reason

    async def attach(self, snapshot: MarketSnapshot) -> MarketSnapshot:
        unavailable = {**snapshot.unavailable, "historical_insights": self.reason}
        return snapshot.model_copy(update={"unavailable": dict(sorted(unavailable.items()))})
