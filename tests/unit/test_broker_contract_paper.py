"""The Broker contract suite run on the PaperBroker (with and without a state file)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.paper import PaperBroker
from contract.broker_contract import BrokerContract
from contract.broker_harness import BrokerHarness
from contract.paper_support import paper_harness


class TestPaperBrokerContract(BrokerContract):
    @pytest.fixture
    def harness(self) -> BrokerHarness:
        return paper_harness()[0]


class TestPersistentPaperBrokerContract(BrokerContract):
    """Same contract with every change saved; and the file always resumes to the same state."""

    @pytest.fixture
    def harness(self, tmp_path: Path) -> Iterator[BrokerHarness]:
        path = tmp_path / "paper_broker.json"
        harness, broker, market = paper_harness(state_path=path)
        yield harness
        resumed = PaperBroker(market.clock, state_path=path)
        assert resumed.ledger == broker.ledger
        assert resumed.open_orders() == broker.open_orders()
