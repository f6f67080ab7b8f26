"""Which long-term memory the daemon gives the debate, and the prompt's insight source: the memory
graph when memory is on, in the process (said so) when the store is off, none with --no-memory."""

from __future__ import annotations

from pathlib import Path

from agent.debate_memory import InProcessMemory
from agent.debate_store import GraphDebateMemory
from agent.memory_view import MemoryOff
from contract.memory_contract import make_insight
from core.clock import VirtualClock
from memory.config import MemoryConfig
from memory.insight_source import RetrieverInsights
from runner.config import Settings
from runner.memory_wiring import build_memory

T0 = 1_740_000_000_000


async def test_memory_on_gives_the_debate_the_graph_and_the_prompt_its_lessons(
    tmp_path: Path,
) -> None:
    clock = VirtualClock(epoch_ms=T0 + 3_600_000)
    parts = build_memory(Settings(state_dir=tmp_path), clock, enabled=True)
    memory, description = parts.debate_memory(enabled=True)
    assert isinstance(memory, GraphDebateMemory)
    assert description == "memory graph (sqlite, read-write)"
    assert parts.store is not None
    await parts.store.put_insight(make_insight("SOL: stops under the 4h low saved the long."))
    source = parts.insight_source(clock)
    assert isinstance(source, RetrieverInsights)
    (item,) = await source.top_insights("SOL/USDT", "medium_volatility", 5)
    assert item.text.startswith("SOL: stops") and item.ticker == "SOL/USDT"
    await parts.store.close()


def test_a_store_that_is_off_leaves_the_debate_in_process_and_says_so(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path, memory=MemoryConfig(enabled=False))
    parts = build_memory(settings, VirtualClock(), enabled=True)
    memory, description = parts.debate_memory(enabled=True)
    assert isinstance(memory, InProcessMemory)
    assert description == "in-process, lost at exit (memory.enabled is false)"
    assert parts.insight_source(VirtualClock()) is None
    assert isinstance(parts.insights, MemoryOff)  # the snapshot names the setting, not --no-memory
    assert parts.insights.reason == "memory is off (memory.enabled = false)"


def test_no_memory_means_no_long_term_memory(tmp_path: Path) -> None:
    parts = build_memory(Settings(state_dir=tmp_path), VirtualClock(), enabled=False)
    assert parts.debate_memory(enabled=False) == (None, "off (--no-memory)")


async def test_write_back_off_reads_the_graph_but_writes_nothing(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path, memory=MemoryConfig(write_back=False))
    parts = build_memory(settings, VirtualClock(), enabled=True)
    memory, description = parts.debate_memory(enabled=True)
    assert isinstance(memory, GraphDebateMemory)
    assert description.endswith("read-only: memory.write_back is off)")
    assert parts.store is not None
    await parts.store.close()
