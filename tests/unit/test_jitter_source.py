"""One source of jitter per daemon (``Ports.jitter``): a retry's or restart's wait is drawn from
it, seeded from ``--seed`` in a replay (where the wait moves the virtual clock) and fresh OS
entropy live (instances must not retry in lockstep)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from pathlib import Path

import pytest
from fakes.memory_support import T0, open_and_exit
from fakes.virtual_time import drive
from test_tracker_support import T0_MS, make_rig

from broker.paper import PaperBroker
from broker.port import PositionDetail
from core.backoff import Backoff
from core.bus import EventBus
from core.clock import VirtualClock
from derivatives.cache import CachedSource
from memory.config import MemoryConfig
from memory.embeddings import HashedNgramEmbedder
from memory.model import Trade
from memory.outbox import MemoryOutbox
from memory.port import StoreUnavailableError
from memory.sqlite_store import SqliteMemoryStore
from memory.writeback import STORE_RETRY, MemoryWriter
from runner.config import Settings
from runner.journals import open_journals
from runner.market_wiring import build_market_path, websocket_ports
from runner.replay.ports import replay_ports
from runner.supervision import supervise
from runner.warmup import look_back_window
from runner.wiring import build_decision_path
from sim.feed import SimFeed

SEEDS = (1, 2)  # their first draws are far apart (0.13, 0.96); 3 and 4 draw 0.238, 0.236


class ListingFailsOnce(PaperBroker):
    """A paper broker whose first position listing fails; it notes when it was asked."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock, starting_cash_usd=10_000)
        self._asked_clock = clock
        self.asked_ms: list[int] = []

    async def get_positions_detail(self) -> Sequence[PositionDetail]:
        self.asked_ms.append(self._asked_clock.now_ms())
        if len(self.asked_ms) == 1:
            raise ConnectionError("exchange unreachable")
        return await super().get_positions_detail()


async def _tracker_retry_wait_ms(tmp_path: Path, seed: int) -> int:
    clock = VirtualClock(T0_MS)
    broker = ListingFailsOnce(clock)
    rig = make_rig(tmp_path, broker=broker, clock=clock, rng=random.Random(seed))
    loop = asyncio.create_task(rig.tracker.run())
    try:
        await clock.advance(5)  # the retry is due within the 1 s base
    finally:
        loop.cancel()
        with pytest.raises(asyncio.CancelledError):
            await loop
    return broker.asked_ms[1] - broker.asked_ms[0]


async def test_a_failed_safety_check_retries_after_the_wait_its_rng_draws(
    tmp_path: Path,
) -> None:
    config = make_rig(tmp_path / "config").tracker.config
    backoff = Backoff(
        base_secs=config.retry_base_secs,
        cap_secs=config.retry_cap_secs,
        jitter_fraction=config.retry_jitter_fraction,
    )
    waits = [await _tracker_retry_wait_ms(tmp_path / str(seed), seed) for seed in SEEDS]
    for seed, wait_ms in zip(SEEDS, waits, strict=True):
        assert wait_ms == pytest.approx(
            backoff.delay_secs(0, random.Random(seed).random()) * 1000, abs=1
        )
    assert waits[0] != waits[1]


class DownOnce(SqliteMemoryStore):
    """A store whose first trade write finds it unavailable; it notes when it was written to."""

    clock: VirtualClock

    async def put_trade(self, trade: Trade) -> bool:
        self.put_ms.append(self.clock.now_ms())
        if len(self.put_ms) == 1:
            raise StoreUnavailableError("down")
        return await super().put_trade(trade)

    put_ms: list[int]


async def _store_retry_wait_ms(tmp_path: Path, seed: int) -> int:
    tmp_path.mkdir()
    clock = VirtualClock(T0)
    store = DownOnce(tmp_path / "memory.db")
    store.clock, store.put_ms = clock, []
    writer = MemoryWriter(
        clock,
        store,
        MemoryOutbox(tmp_path / "o.jsonl"),
        MemoryConfig(),
        HashedNgramEmbedder(),
        rng=random.Random(seed),
    )
    open_and_exit(writer, 0)
    assert await drive(clock, writer.flush()) == 1  # the retry sleeps on the virtual clock
    return store.put_ms[1] - store.put_ms[0]


async def test_a_store_write_retries_after_the_wait_its_rng_draws(tmp_path: Path) -> None:
    waits = [await _store_retry_wait_ms(tmp_path / str(seed), seed) for seed in SEEDS]
    for seed, wait_ms in zip(SEEDS, waits, strict=True):
        drawn_secs = STORE_RETRY.delay_secs(0, random.Random(seed).random())
        assert wait_ms == pytest.approx(drawn_secs * 1000, abs=1)
    assert waits[0] != waits[1]


def test_the_replay_seed_is_the_jitter_every_retry_draws_from(tmp_path: Path) -> None:
    """The composition root hands the ports' one source to every component that backs off.
    Their draws happen only on failure, so the wiring is checked where it lands."""
    settings = Settings(state_dir=tmp_path)
    seed = settings.regime.hmm.seed
    at_ms = settings.sim.start_ms
    clock, bus = VirtualClock(at_ms), EventBus()
    window = look_back_window(settings.market.history_days, at_ms, at_ms + 1)
    feed = SimFeed(settings.market.tickers, data_dir=settings.data_dir, window=window)
    ports = replay_ports(settings, clock, bus, feed, end_ms=at_ms + 1)
    journals = open_journals(settings, clock, bus)
    market = build_market_path(settings, clock, bus, ports)
    decision = build_decision_path(
        settings, clock, bus, market, journals.store, journals.decisions, ports
    )
    *_, supervisor = supervise(
        settings, clock, bus, journals, market, decision, jitter=ports.jitter
    )
    try:
        jitter = ports.jitter
        assert jitter.random() == random.Random(seed).random()
        assert decision.tracker._rng is jitter
        assert supervisor._rng is jitter
        assert decision.derivatives._rand == jitter.random
        sources = [f.source for f in decision.derivatives._fields]
        assert sources and all(isinstance(s, CachedSource) for s in sources)
        assert all(s._rand == jitter.random for s in sources)  # type: ignore[attr-defined]
        assert decision.memory is not None and decision.memory.writer is not None
        assert decision.memory.writer._rng is jitter
    finally:
        journals.decisions.close()
        journals.trades.close()


def test_live_daemons_draw_their_jitter_from_fresh_entropy(tmp_path: Path) -> None:
    """Two instances retrying in lockstep would hit a recovering peer together."""
    settings = Settings(state_dir=tmp_path)
    clock, bus = VirtualClock(), EventBus()
    one, other = (websocket_ports(settings, clock, bus, "ws://127.0.0.1:9", None) for _ in range(2))
    assert one.jitter is not other.jitter
    assert [one.jitter.random() for _ in range(3)] != [other.jitter.random() for _ in range(3)]
