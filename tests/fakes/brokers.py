"""An account with 10,000 USD of cash and nothing else: no positions, no resting orders; orders
sent to it are answered with nothing. Subclass to record or answer what a test needs."""

from __future__ import annotations

from collections.abc import Sequence

from broker.port import OpenOrder, OrderIntent, OrderResult, PositionDetail

CASH_USD = 10_000.0


class IdleBroker:
    async def execute_decisions(self, intents: Sequence[OrderIntent]) -> Sequence[OrderResult]:
        return ()

    async def get_positions_detail(self) -> Sequence[PositionDetail]:
        return ()

    async def get_portfolio_value(self) -> float:
        return CASH_USD

    async def get_cash(self) -> float:
        return CASH_USD

    async def get_open_orders(self) -> Sequence[OpenOrder]:
        return ()

    async def cancel(self, client_order_id: str) -> OrderResult | None:
        return None

    async def lookup(self, client_order_id: str) -> OrderResult | None:
        return None
