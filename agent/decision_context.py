"""The decision's context around the decider: analysts before, prompt assembly, write-back after.

Before a decision: the analysts make the day summaries that are due (``AnalystDesk.roll``) and
write their reports from this snapshot, then the prompt is assembled from every tier. After it:
the session tier keeps each ticker's last decision and the open thesis per position (bought: the
reasoning; sold: dropped), and the project's MEMORY.md gets one auto line per day and ticker that
traded. A failure here is logged and reported in the journal line; it never fails the decision.
"""

from __future__ import annotations

import logging

from agent.decision import AgentDecision
from agent.prompt_assembly import AssembledPrompt, PromptAssembler
from agent.snapshot import MarketSnapshot
from broker.port import Action
from core.failure_streak import FailureStreak
from memory.analyst_model import utc_day
from memory.analysts import AnalystDesk
from memory.session_store import SessionStore, session_key
from memory.tiers import ProjectTier, TierError

log = logging.getLogger(__name__)

THESIS_TTL_SECS = 30 * 86_400.0  # an open position's thesis lives as long as a position may
DECISION_TTL_SECS = 86_400.0


class DecisionContext:
    def __init__(
        self,
        prompts: PromptAssembler,
        *,
        analysts: AnalystDesk | None = None,
        session: SessionStore | None = None,
        project: ProjectTier | None = None,
    ) -> None:
        self.prompts = prompts
        self.analysts = analysts
        self.session = session
        self.project = project
        self._analysts_failing = FailureStreak()

    def _analysts_failed(self, exc: Exception) -> None:
        """A full analysts.db fails every decision's reports the same way: its traceback is
        logged once, not every decision; another error is logged with its own."""
        why = f"{type(exc).__name__}: {exc}"
        if self._analysts_failing.failed(why):
            log.exception(
                "analysts failed (%s); the prompts go without them until they work again", why
            )

    async def prepare(self, snapshot: MarketSnapshot) -> AssembledPrompt:
        sent = snapshot.as_sent()
        if self.analysts is not None:
            try:
                await self.analysts.roll(snapshot.at_ms)
                self.analysts.observe(sent, snapshot.at_ms, snapshot.to_json_bytes)
            except Exception as exc:
                self._analysts_failed(exc)
            else:
                if self._analysts_failing.ended():
                    log.warning("analysts work again; their reports are written again")
        return await self.prompts.assemble(snapshot, sent)

    def flush(self) -> None:
        """Commit what the analysts' store holds back (a non-durable store batches reports) and
        write the session files held back (write-behind)."""
        if self.analysts is not None:
            self.analysts.flush()
        if self.session is not None:
            self.session.flush()

    def after(self, decision: AgentDecision, at_ms: int) -> None:
        """The write-back; a MEMORY.md that cannot take its line does not stop the other
        tickers' (``TierError``, raised once every ticker had its turn)."""
        failed: TierError | None = None
        for trade in decision.decisions:
            reasoning = " ".join(trade.reasoning.split())[:300]
            if self.session is not None:
                self.session.set(
                    session_key(trade.ticker, "decision"),
                    {
                        "action": trade.action.value,
                        "position_pct": trade.position_pct,
                        "reasoning": reasoning,
                        "at_ms": at_ms,
                    },
                    DECISION_TTL_SECS,
                )
                thesis = session_key(trade.ticker, "analysis", "thesis")
                if trade.action is Action.BUY:
                    self.session.set(thesis, reasoning or "no reasoning given", THESIS_TTL_SECS)
                elif trade.action is Action.SELL:
                    self.session.delete(thesis)
            if self.project is not None and trade.action is not Action.HOLD:
                try:
                    self.project.remember(
                        utc_day(at_ms),
                        trade.ticker,
                        f"{trade.action.value} {trade.position_pct:.0%} by {decision.decided_by}: {reasoning}",
                    )
                except TierError as exc:
                    failed = failed or exc
        if failed is not None:
            raise failed
