"""What the API needs from a running daemon, as small Protocols the composition root implements.

``vigil serve`` (a state dir without a daemon) passes none of them: the API then answers from the
files, and says which figures need a running daemon.
"""

from __future__ import annotations

from typing import Protocol

from api.metrics import DaemonCounts
from api.models import AccountBody, AgentBody, GateBody, LoopBody, StreamBody, TradingBody
from state.edits import StateEditReport


class LiveDaemon(Protocol):
    def now_ms(self) -> int: ...

    def loops(self) -> list[LoopBody]: ...

    def streams(self) -> list[StreamBody]: ...

    def agent(self) -> AgentBody: ...

    def gate(self) -> GateBody: ...

    async def account(self) -> AccountBody: ...

    def counts(self) -> DaemonCounts: ...

    def poll_state(self) -> StateEditReport | None:
        """The store's look at runner_state.json now (merges a person's edit); None: unchanged."""
        ...


class TradingControl(Protocol):
    """The trading state (ACTIVE / HALTED) of a daemon that has one."""

    def trading(self) -> TradingBody: ...

    def halt(self, reason: str) -> TradingBody: ...

    def resume(self) -> TradingBody: ...


__all__ = ["LiveDaemon", "TradingControl"]
