"""The rule-based pipeline as a ``Decider``: it reads the same snapshot Claude would, plus the 4h
history the snapshot summarises, and says why it decided (``decider_reason``)."""

from __future__ import annotations

from collections.abc import Callable

from agent.decision import AgentDecision
from agent.fallback import FallbackPipeline
from agent.fallback_inputs import FallbackInputs, TickerInputs
from agent.fallback_memory import apply_memory_rule
from agent.fallback_nodes import OpenPosition
from agent.prompt_assembly import AssembledPrompt
from agent.snapshot import MarketSnapshot, PositionSnapshot
from broker.port import PositionDetail
from market.closes import CloseSeries

#: a ticker's closed 4h closes up to now (``market.closes.ClosesToNow`` in the daemon)
HistorySource = Callable[[str], CloseSeries]


class FallbackDecider:
    def __init__(self, pipeline: FallbackPipeline, history: HistorySource, reason: str) -> None:
        self._pipeline = pipeline
        self._history = history
        self.reason = reason

    async def decide(
        self, snapshot: MarketSnapshot, prompt: AssembledPrompt | None = None
    ) -> AgentDecision:
        # the prompt is Claude's; the rules read the snapshot (its memory fields included)
        return self.decide_now(snapshot, self.reason)

    def decide_now(self, snapshot: MarketSnapshot, reason: str) -> AgentDecision:
        """Synchronous form, for callers that fall back mid-flight (e.g. after a Claude failure)."""
        decision = self._pipeline.decide(
            fallback_inputs(snapshot, self._history), decider_reason=reason
        )
        return apply_memory_rule(decision, snapshot)  # no-op without memory in the snapshot


def fallback_inputs(snapshot: MarketSnapshot, history: HistorySource) -> FallbackInputs:
    positions = {p.ticker: p for p in snapshot.open_positions}
    regime = snapshot.regime
    tickers = tuple(
        TickerInputs.from_series(
            ticker,
            history(ticker),
            price=view.price,
            regime_label=regime.crypto.get(ticker, "unknown") if regime else "unknown",
            regime_exposure=regime.crypto_exposure.get(ticker, 1.0) if regime else 1.0,
            derivatives_signal=snapshot.derivatives_signal,
            derivatives_unavailable_reason=snapshot.unavailable.get("derivatives_signal", ""),
            position=_open_position(positions.get(ticker)),
            learned_draw=learned_draw(snapshot, ticker),
        )
        for ticker, view in sorted(snapshot.tickers.items())
    )
    return FallbackInputs(
        at_ms=snapshot.at_ms,
        tickers=tickers,
        portfolio_value=snapshot.portfolio_value or 0.0,
        cash=snapshot.cash or 0.0,
        # Each ticker already carries its own crypto-regime exposure; the combined scale contains
        # BTC's crypto exposure too, so passing it would count crypto twice. Macro is what is left.
        exposure_scale=regime.macro_exposure if regime else 1.0,
    )


def learned_draw(snapshot: MarketSnapshot, ticker: str) -> dict[str, float]:
    """The snapshot's Thompson draw for ``ticker`` (see ``agent.snapshot_builder.learner_view``);
    empty when the learner is out of the snapshot (``--no-memory``) or has learned nothing."""
    posteriors = snapshot.ts_posteriors or {}
    table = posteriors.get("tickers", {}).get(ticker, {})
    return {
        name: float(entry["draw"])
        for name, entry in table.get("signals", {}).items()
        if isinstance(entry, dict) and isinstance(entry.get("draw"), int | float)
    }


def _open_position(position: PositionSnapshot | None) -> OpenPosition | None:
    if position is None:
        return None
    detail = PositionDetail(
        ticker=position.ticker,
        quantity=position.quantity,
        entry_price=position.entry_price,
        mark_price=position.mark_price,
        opened_at_ms=position.opened_at_ms,
    )
    peak = position.peak_price or max(position.entry_price, position.mark_price or 0.0)
    return OpenPosition(detail=detail, peak_price=peak)
