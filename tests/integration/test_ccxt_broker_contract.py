"""The Broker contract suite run on the CcxtBroker against the simulator's order endpoints."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_ccxt_broker_support import ccxt_sim, running_broker

from contract.broker_contract import BrokerContract
from contract.broker_harness import BrokerHarness


class TestCcxtBrokerContract(BrokerContract):
    @pytest.fixture
    async def harness(self, tmp_path: Path) -> AsyncIterator[BrokerHarness]:
        async with ccxt_sim(tmp_path) as sim, running_broker(sim) as broker:
            yield sim.harness(broker)
