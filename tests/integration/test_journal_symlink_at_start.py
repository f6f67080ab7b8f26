"""A symlink at a journal's or a write-ahead file's own path (``logs/decisions.jsonl``,
``logs/trades.csv``, ``outbox/exits.jsonl``, the order journal) refuses the start naming the file:
the daemon appended through it, to whatever it named (a dangling one made that file), and its
torn-tail repair cut it. A symlinked ``logs/`` folder (the journals on another disk) is an
operator's setup and keeps working: only the last component is not followed."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.daemon import daemon_env, refused_sim_start

from broker.order_journal import OrderJournal
from core.bus import EventBus
from core.clock import VirtualClock
from core.errors import RefuseToStartError
from runner.app import build_daemon
from runner.config import MarketConfig, Settings
from runner.journals import open_journals
from state.fsynced_lines import append_line

pytestmark = pytest.mark.timeout(120)

#: the other file a link names, with a torn last line the repair would have cut
_OTHER = b'{"kept": 1}\nno newline'


def _linked(tmp_path: Path, name: str, *, dangling: bool = False) -> tuple[Path, Path]:
    """The state dir with a symlink at ``name``, and the file it names."""
    state_dir = tmp_path / "state"
    link = state_dir / name
    link.parent.mkdir(parents=True)
    other = tmp_path / "elsewhere" / "other.txt"
    other.parent.mkdir()
    if not dangling:
        other.write_bytes(_OTHER)
    link.symlink_to(other)
    return state_dir, other


@pytest.mark.parametrize("name", ["logs/decisions.jsonl", "logs/trades.csv"])
@pytest.mark.parametrize("dangling", [False, True])
def test_a_symlinked_journal_refuses_the_start_naming_it(
    tmp_path: Path, name: str, dangling: bool
) -> None:
    state_dir, other = _linked(tmp_path, name, dangling=dangling)
    with pytest.raises(RefuseToStartError) as refused:
        open_journals(Settings(state_dir=state_dir), VirtualClock(0), EventBus())
    assert str(state_dir / name) in str(refused.value) and " is a symlink" in str(refused.value)
    if dangling:
        assert not other.exists()
    else:
        assert other.read_bytes() == _OTHER
    assert (state_dir / name).is_symlink()


@pytest.mark.parametrize("dangling", [False, True])
async def test_a_symlinked_outbox_refuses_the_start_naming_it(
    tmp_path: Path, dangling: bool
) -> None:
    name = "outbox/exits.jsonl"
    state_dir, other = _linked(tmp_path, name, dangling=dangling)
    settings = Settings(state_dir=state_dir, market=MarketConfig(source="binance"))
    with pytest.raises(RefuseToStartError) as refused:
        await build_daemon(settings)
    assert str(state_dir / name) in str(refused.value) and " is a symlink" in str(refused.value)
    assert other.read_bytes() == _OTHER if not dangling else not other.exists()


def test_a_symlinked_order_journal_is_refused_and_never_appended_through(tmp_path: Path) -> None:
    state_dir, other = _linked(tmp_path, "orders.jsonl")
    with pytest.raises(RefuseToStartError) as refused:
        OrderJournal(state_dir / "orders.jsonl").load()
    assert " is a symlink" in str(refused.value)
    assert other.read_bytes() == _OTHER


def test_a_symlinked_logs_folder_keeps_working(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    disk = tmp_path / "other-disk" / "logs"
    disk.mkdir(parents=True)
    (state_dir / "logs").symlink_to(disk, target_is_directory=True)
    journals = open_journals(Settings(state_dir=state_dir), VirtualClock(0), EventBus())
    journals.decisions.append({"at_ms": 0, "kind": "test"})
    journals.decisions.close()
    journals.trades.close()
    assert (disk / "decisions.jsonl").read_bytes().startswith(b"{")
    assert (disk / "trades.csv").exists()


def test_the_daemon_refuses_with_exit_78_and_no_traceback(tmp_path: Path) -> None:
    state_dir, other = _linked(tmp_path, "logs/decisions.jsonl")
    stderr = refused_sim_start(daemon_env(state_dir))
    assert str(state_dir / "logs/decisions.jsonl") in stderr and " is a symlink" in stderr
    assert other.read_bytes() == _OTHER


def test_a_link_planted_after_the_start_is_not_appended_through(tmp_path: Path) -> None:
    state_dir, other = _linked(tmp_path, "outbox/exits.jsonl", dangling=True)
    with pytest.raises(OSError):
        append_line(state_dir / "outbox/exits.jsonl", b"{}\n")
    assert not other.exists()
