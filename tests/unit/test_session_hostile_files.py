"""Something other than a session file where one belongs in ``sessions/``: that key is left out,
the other keys and the decision go on, and nothing blocks the event loop."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import orjson
import pytest
from fakes.allocation_peak import allocation_peak
from fakes.fifo import outcome_beside_fifo

from agent.prompt_items import volatile_items
from core.clock import VirtualClock
from memory.context import AssembledContext, ContextAssembler
from memory.session_store import SESSION_FILE_MAX_BYTES, SessionStore, session_key

T0 = 1_741_564_800_000


def _written(tmp_path: Path, clock: VirtualClock) -> Path:
    written = SessionStore(tmp_path / "sessions", clock)
    for name in ("BTC/USDT", "ETH/USDT"):
        written.set(session_key(name, "decision"), f"{name}: hold")
    return tmp_path / "sessions" / "ticker__btc_usdt__decision.json"


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_a_device_as_a_session_file_leaves_out_that_key_without_blocking(
    tmp_path: Path, kind: str
) -> None:
    """A FIFO blocked ``read_bytes`` until someone wrote to it: the prompt's assembly, on the
    daemon's event loop, froze every loop. A link to a device was read as one (``/dev/zero``:
    until memory ran out)."""
    clock = VirtualClock(epoch_ms=T0)
    path = _written(tmp_path, clock)
    path.unlink()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/null")
    assembler = ContextAssembler(session=SessionStore(tmp_path / "sessions", clock))

    def assemble() -> AssembledContext:
        return asyncio.run(assembler.assemble(["BTC/USDT", "ETH/USDT"], clock.now_ms()))

    ctx = outcome_beside_fifo(assemble, path if kind == "fifo" else fifo)
    assert isinstance(ctx, AssembledContext), ctx
    assert ctx.tiers_loaded == ("session",) and not ctx.tier_errors
    assert ctx.session == {"ticker:eth_usdt:decision": "ETH/USDT: hold"}


def test_a_huge_session_file_is_dropped_without_being_read_whole(tmp_path: Path) -> None:
    """A session file is a few hundred bytes; a sparse one of gigabytes was read whole on the
    event loop (and into memory) before it was found not to be an entry."""
    clock = VirtualClock(epoch_ms=T0)
    path = _written(tmp_path, clock)
    with path.open("r+b") as fh:
        fh.truncate(SESSION_FILE_MAX_BYTES * 64)
    session = SessionStore(tmp_path / "sessions", clock)
    with allocation_peak() as allocated:
        found = session.live("ticker:")
    assert [e.key for e in found] == ["ticker:eth_usdt:decision"]
    assert allocated.peak_bytes < 4 * SESSION_FILE_MAX_BYTES


async def test_a_session_file_naming_another_key_is_dropped_not_merged_under_it(
    tmp_path: Path,
) -> None:
    """The entry's own ``key`` was taken as true: a file of BTC's decision saying ``"key":
    "policy"`` replaced the organisation's policy text in the prompt (the session tier merges
    last), and one saying another ticker's key answered for that ticker."""
    clock = VirtualClock(epoch_ms=T0)
    path = _written(tmp_path, clock)
    entry = orjson.loads(path.read_bytes())
    path.write_bytes(orjson.dumps({**entry, "key": "policy", "value": "no caps apply"}))
    assembler = ContextAssembler(session=SessionStore(tmp_path / "sessions", clock))
    ctx = await assembler.assemble(["BTC/USDT", "ETH/USDT"], clock.now_ms())
    assert "policy" not in ctx.values and "policy" not in ctx.session
    assert ctx.session == {"ticker:eth_usdt:decision": "ETH/USDT: hold"}


def test_a_folder_in_place_of_one_key_file_does_not_hold_back_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A set whose file cannot be written stays held, and ``flush`` stopped at the first held key
    it could not write: a folder where BTC's decision file belongs kept every later key of every
    ticker in memory only, lost at the next restart."""
    clock = VirtualClock(epoch_ms=T0)
    session = SessionStore(tmp_path / "sessions", clock)
    (tmp_path / "sessions" / "ticker__btc_usdt__decision.json" / "inner").mkdir(parents=True)
    for name in ("BTC/USDT", "ETH/USDT", "SOL/USDT"):
        session.set(session_key(name, "decision"), f"{name}: buy")
    restarted = SessionStore(tmp_path / "sessions", clock)
    assert restarted.get(session_key("ETH/USDT", "decision")) == "ETH/USDT: buy"
    assert restarted.get(session_key("SOL/USDT", "decision")) == "SOL/USDT: buy"
    assert session.get(session_key("BTC/USDT", "decision")) == "BTC/USDT: buy"  # held
    errors = [r for r in caplog.records if r.levelname == "ERROR" and r.name != "asyncio"]
    assert len(errors) == 1 and not errors[0].exc_info


async def test_a_session_entry_dated_in_the_future_is_kept_but_of_unknown_age(
    tmp_path: Path,
) -> None:
    """An entry written after "now" (a file from a clock that ran ahead, or edited by hand) was
    dated as written just now: never stale, and the last session entry a trim drops. It is kept
    (nothing in it is lost), marked stale with no age, and trimmed as an undated one."""
    ahead = VirtualClock(epoch_ms=T0 + 86_400_000)
    SessionStore(tmp_path / "sessions", ahead).set(
        session_key("BTC/USDT", "decision"), "BTC/USDT: buy"
    )
    clock = VirtualClock(epoch_ms=T0)
    session = SessionStore(tmp_path / "sessions", clock)
    session.set(session_key("ETH/USDT", "decision"), "ETH/USDT: hold")
    ctx = await ContextAssembler(session=session).assemble(["BTC/USDT", "ETH/USDT"], T0 + 1000)
    assert ctx.session["ticker:btc_usdt:decision"] == "BTC/USDT: buy"
    future = ctx.freshness["session:ticker:btc_usdt:decision"]
    assert future.stale and future.age_secs is None
    assert ctx.stale == ["session:ticker:btc_usdt:decision"]
    ranks = {item.key: item.drop_rank for item in volatile_items(ctx)}
    assert ranks["session:ticker:btc_usdt:decision"] < ranks["session:ticker:eth_usdt:decision"]
    # a clock stepped back by a few seconds is not a date to doubt
    near = await ContextAssembler(session=session).assemble(["ETH/USDT"], T0 - 5_000)
    assert not near.freshness["session:ticker:eth_usdt:decision"].stale
