"""A symlink planted where the heartbeat is written (``heartbeat.tmp`` beside the daemon's beat,
or ``heartbeat`` itself in a replay's run folder) was followed: every beat overwrote whatever it
pointed at (a state file, a journal). The daemon's beat now goes to a fresh temporary name made
with ``O_EXCL`` and is renamed into place; the replay's in-place write refuses a symlink."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from core.clock import VirtualClock
from runner.heartbeat import Heartbeat

_VICTIM = b'{"cash": 10000}\n'


def _beat(path: Path, *, atomic: bool) -> Heartbeat:
    heartbeat = Heartbeat(VirtualClock(epoch_ms=1_700_000_000_000), path, 30.0, atomic=atomic)
    heartbeat.beat()
    return heartbeat


@pytest.mark.parametrize("planted", ["heartbeat.tmp", "heartbeat"])
def test_the_daemons_beat_never_writes_through_a_planted_symlink(
    tmp_path: Path, planted: str
) -> None:
    victim = tmp_path / "runner_state.json"
    victim.write_bytes(_VICTIM)
    path = tmp_path / "heartbeat"
    (tmp_path / planted).symlink_to(victim)
    heartbeat = _beat(path, atomic=True)
    assert victim.read_bytes() == _VICTIM
    assert heartbeat.beats == 1 and not path.is_symlink()
    assert json.loads(path.read_bytes())["at_ms"] == 1_700_000_000_000


def test_a_replays_beat_refuses_a_symlink_at_heartbeat(tmp_path: Path) -> None:
    victim = tmp_path / "trades.csv"
    victim.write_bytes(_VICTIM)
    path = tmp_path / "heartbeat"
    path.symlink_to(victim)
    with pytest.raises(OSError, match="heartbeat"):
        _beat(path, atomic=False)
    assert victim.read_bytes() == _VICTIM and path.is_symlink()


def test_a_folder_at_heartbeat_is_left_where_it_is(tmp_path: Path) -> None:
    """The exchange that puts a beat in place moved a folder there to a hidden temporary name,
    its files with it; it is exchanged back and the beat refused, as a rename refuses it."""
    path = tmp_path / "heartbeat"
    path.mkdir()
    (path / "notes").write_bytes(_VICTIM)
    with pytest.raises(IsADirectoryError, match="heartbeat"):
        _beat(path, atomic=True)
    assert (path / "notes").read_bytes() == _VICTIM
    assert sorted(p.name for p in tmp_path.iterdir()) == ["heartbeat"]


async def test_a_beat_torn_by_a_crash_is_removed_at_start(tmp_path: Path) -> None:
    path = tmp_path / "heartbeat"
    torn = tmp_path / ".heartbeat.0123456789abcdef.tmp"
    torn.write_bytes(b'{"at_ms": 1')
    clock = VirtualClock(epoch_ms=1_700_000_000_000)
    task = asyncio.create_task(Heartbeat(clock, path, 30.0).run())
    await clock.advance(0)
    task.cancel()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["heartbeat"]
