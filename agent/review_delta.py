"""Delta gating for the tracker's position reviews: no model call for a position that has not
changed materially since Claude last reviewed it.

A review runs every 3 minutes while a position is open (about 360 a day with one position), and most
of them look at the same position as the one before. A position is "unchanged" when, since the
review Claude last gave it (younger than ``review_max_unchanged_secs``):
- its mark moved less than ``review_min_move_pct``;
- its crypto regime is the same;
- its P&L kept its sign: a winner that turned into a loser (or back) is a different question for
  a trader (cut a loser or let a winner run), whatever the size of the move that crossed break-even;
- if it is at risk — losing, in a regime other than the one it was entered in, so the thesis it was
  opened on no longer holds — its loss deepened by less than ``review_at_risk_move_pct``: a
  position held without its thesis is watched more closely than one that still has it.
An unchanged position keeps HOLD (decided_by ``unchanged``), and the tracker's 30-second safety
layer (stop loss, trailing stop) runs as always. Anything else, a new position or an old review
asks Claude again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent.materiality import DeltaConfig
from tracker.ports import PositionReview, ReviewAction, ReviewVerdict

UNCHANGED = "unchanged"


@dataclass(frozen=True)
class _Seen:
    mark_price: float
    regime: str
    at_secs: float
    pnl_pct: float


class ReviewDelta:
    def __init__(self, config: DeltaConfig) -> None:
        self.config = config
        self._seen: dict[str, _Seen] = {}
        self.skipped = 0

    def split(
        self, positions: Sequence[PositionReview], now_secs: float
    ) -> tuple[list[PositionReview], list[ReviewVerdict]]:
        """(the positions to ask about, HOLD verdicts for the unchanged ones)."""
        if not self.config.enabled:
            return list(positions), []
        ask: list[PositionReview] = []
        keep: list[ReviewVerdict] = []
        for position in positions:
            reason = self._unchanged(position, now_secs)
            if reason is None:
                ask.append(position)
            else:
                keep.append(
                    ReviewVerdict(
                        ticker=position.ticker,
                        action=ReviewAction.HOLD,
                        reason=reason,
                        decided_by=UNCHANGED,
                    )
                )
        self.skipped += len(keep)
        return ask, keep

    def reviewed(self, positions: Sequence[PositionReview], now_secs: float) -> None:
        """Claude answered about ``positions``: what it saw is the new reference."""
        for p in positions:
            self._seen[p.ticker] = _Seen(p.mark_price, p.regime_now, now_secs, p.pnl_pct)

    def forget(self, open_tickers: Sequence[str]) -> None:
        for ticker in set(self._seen) - set(open_tickers):
            del self._seen[ticker]

    def _unchanged(self, position: PositionReview, now_secs: float) -> str | None:
        seen = self._seen.get(position.ticker)
        if seen is None or seen.mark_price <= 0:
            return None
        age_secs = now_secs - seen.at_secs
        if age_secs >= self.config.review_max_unchanged_secs:
            return None
        if position.regime_now != seen.regime:
            return None
        if (position.pnl_pct < 0) != (seen.pnl_pct < 0):
            return None  # crossed break-even since the review
        move_pct = abs(position.mark_price / seen.mark_price - 1.0) * 100.0
        if move_pct >= self.config.review_min_move_pct:
            return None
        if _at_risk(position) and (
            seen.pnl_pct - position.pnl_pct >= self.config.review_at_risk_move_pct
        ):
            return None
        return (
            f"no material change since Claude's review {age_secs:.0f} s ago "
            f"(price moved {move_pct:.2f} % < {self.config.review_min_move_pct:g} %, "
            f"P&L {seen.pnl_pct:+.2f} % -> {position.pnl_pct:+.2f} %)"
        )


def _at_risk(position: PositionReview) -> bool:
    """Losing in a regime other than its entry's: the thesis it was opened on is gone."""
    return position.pnl_pct < 0 and position.regime_now != position.regime_at_entry


__all__ = ["UNCHANGED", "ReviewDelta"]
