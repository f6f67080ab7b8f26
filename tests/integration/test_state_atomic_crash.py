"""A writer process killed (SIGKILL) in the middle of ``atomic_write_bytes`` or
``atomic_swap_bytes`` never leaves a mix of old and new.

The child stops itself with SIGKILL at an exact point of the write (by wrapping ``os.write``,
``os.fsync``, ``os.replace`` or the exchange, or from the ``before_replace`` hook), so every
interleaving that matters is hit deterministically. A second test kills a child that writes in a loop at whatever
point it happens to be in.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.clock import VirtualClock
from state.atomic import is_tmp_file_of, remove_stale_tmp_files
from state.models import RunnerState, render_state
from state.store import RunnerStateStore

_KILL_AT_POINT = r"""
import os, signal, sys
from pathlib import Path
import state.atomic as atomic

target, point, new_path = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
new = new_path.read_bytes()

def die():
    os.kill(os.getpid(), signal.SIGKILL)

if point == "mid-write":
    real_write = os.write
    def half_write(fd, data):
        real_write(fd, bytes(data[: len(data) // 2]))
        die()
    os.write = half_write
elif point == "before-fsync":
    os.fsync = lambda fd: die()
elif point == "after-rename":
    real_replace = os.replace
    def replace_then_die(src, dst):
        real_replace(src, dst)
        die()
    os.replace = replace_then_die

elif point.startswith("swap-"):
    real_renameat2 = atomic._renameat2
    def renameat2_and_die(src, dst, flags):
        if point == "swap-before-exchange":
            die()
        real_renameat2(src, dst, flags)
        die()
    atomic._renameat2 = renameat2_and_die
    atomic.atomic_swap_bytes(target, new)

hook = (lambda tmp: die()) if point == "before-rename" else None
atomic.atomic_write_bytes(target, new, before_replace=hook)
sys.exit(3)  # not reached: the child always dies above
"""

_WRITE_FOREVER = r"""
import sys
from pathlib import Path
from state.atomic import atomic_write_bytes

target = Path(sys.argv[1])
contents = [Path(p).read_bytes() for p in sys.argv[2:]]
n = 0
while True:
    atomic_write_bytes(target, contents[n % len(contents)])
    n += 1
    print(n, flush=True)
"""


def _run_child(script: str, *args: Path | str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        capture_output=True,
        timeout=60,
        check=False,
    )


def _tmp_files(target: Path) -> list[Path]:
    return [p for p in target.parent.iterdir() if is_tmp_file_of(p, target)]


@pytest.mark.parametrize(
    ("point", "survivor"),
    [
        ("mid-write", "old"),
        ("before-fsync", "old"),
        ("before-rename", "old"),
        ("after-rename", "new"),
        ("swap-before-exchange", "old"),
        ("swap-after-exchange", "new"),  # the old file is left under the tmp name
    ],
)
def test_killed_writer_leaves_old_or_new_state_and_startup_cleans_up(
    tmp_path: Path, point: str, survivor: str
) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    target = state_dir / "runner_state.json"
    old_state = RunnerState(agent_memory="old memory.", entry_prices={"BTC/USDT": 1.0})
    new_state = RunnerState(agent_memory="new memory.", notes="n" * 2_000_000)
    target.write_bytes(render_state(old_state))
    new_file = tmp_path / "new.json"
    new_file.write_bytes(render_state(new_state))

    child = _run_child(_KILL_AT_POINT, target, point, new_file)

    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    expected = old_state if survivor == "old" else new_state
    assert target.read_bytes() == render_state(expected)
    left_behind = 1 if survivor == "old" or point == "swap-after-exchange" else 0
    assert len(_tmp_files(target)) == left_behind

    store = RunnerStateStore(target, VirtualClock())
    assert store.load() == expected  # startup ignores and removes the stale tmp file
    assert _tmp_files(target) == []
    assert sorted(p.name for p in state_dir.iterdir()) == ["runner_state.json"]


def test_writer_killed_at_random_points_always_leaves_a_complete_version(tmp_path: Path) -> None:
    target = tmp_path / "online_learner.json"
    versions = [bytes([65 + i]) * 3_000_000 for i in range(3)]  # big: kills land mid-write too
    sources = []
    for i, content in enumerate(versions):
        source = tmp_path / f"v{i}"
        source.write_bytes(content)
        sources.append(source)
    target.write_bytes(versions[0])
    rng = random.Random(1234)
    for _ in range(6):
        child = subprocess.Popen(
            [sys.executable, "-c", _WRITE_FOREVER, str(target), *map(str, sources)],
            stdout=subprocess.PIPE,
        )
        assert child.stdout is not None
        writes_before_kill = rng.randint(1, 4)
        for _ in range(writes_before_kill):  # wait for the writer to get going, then kill it
            assert child.stdout.readline(), "writer exited early"
        child.kill()
        child.wait(timeout=30)
        child.stdout.close()
        assert target.read_bytes() in versions
        remove_stale_tmp_files(target)
        assert _tmp_files(target) == []
