"""The organisation tier's caps and banned tickers, applied by the risk caps at every decision.

The organisation's policy (``memory.tiers.OrganisationTier``: a shared folder every vigil instance of
a team reads) may only tighten this instance's caps, never loosen them: each cap is the smaller of
the two, and a banned ticker leaves the whitelist. The policy is re-read when its files change; an
unreadable policy keeps the last good one in force (and says so in the log), so a broken edit of a
shared file never loosens a running daemon's caps.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from agent.risk import RiskConfig
from memory.tiers import OrganisationPolicy, OrganisationTier, TierError, tighten

log = logging.getLogger(__name__)


class OrganisationCaps:
    def __init__(self, tier: OrganisationTier, base: RiskConfig) -> None:
        self._tier = tier
        self._base = base
        self._last: OrganisationPolicy | None = None

    def policy(self) -> OrganisationPolicy | None:
        try:
            self._last = self._tier.load()
        except TierError as exc:
            log.warning("organisation policy unreadable, the last good one stays in force: %s", exc)
        return self._last

    def config(self) -> RiskConfig:
        """This instance's caps, tightened by the organisation's."""
        policy = self.policy()
        if policy is None:
            return self._base
        instance = {
            "max_position_pct": self._base.max_position_pct,
            "max_total_exposure_pct": self._base.max_total_exposure_pct,
        }
        return self._base.model_copy(update=tighten(instance, policy))

    def whitelist(self, tickers: Sequence[str]) -> tuple[str, ...]:
        """``tickers`` without the organisation's banned ones."""
        policy = self.policy()
        if policy is None or not policy.banned_tickers:
            return tuple(tickers)
        banned = set(policy.banned_tickers)  # read as the caps name tickers (OrganisationPolicy)
        return tuple(t for t in tickers if t not in banned)


__all__ = ["OrganisationCaps"]
