"""``state.daemon_lock``: one daemon per state dir, a lock the kernel drops however its holder ends
(the second daemon itself is refused in ``tests/e2e/test_daemon_stop.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fakes.daemon import REPO

from core.errors import RefuseToStartError
from state.daemon_lock import LOCK_FILE_NAME, DaemonLock

HOLD = (
    "import sys, time; from pathlib import Path; from state.daemon_lock import DaemonLock; "
    "DaemonLock(Path(sys.argv[1])).acquire(); print('held', flush=True); time.sleep(120)"
)


def test_a_lock_held_by_a_killed_process_is_free_at_once(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(RefuseToStartError, match=rf"another vigil \(daemon, pid {holder.pid} "):
            DaemonLock(tmp_path).acquire()
    finally:
        holder.send_signal(signal.SIGKILL)  # no clean-up of its own: the kernel's is the point
        holder.wait()
    with DaemonLock(tmp_path):
        text = (tmp_path / LOCK_FILE_NAME).read_text()
        assert text.startswith(f"daemon, pid {os.getpid()} on ")


def test_a_released_lock_is_taken_again_and_a_held_one_refused_in_one_process(
    tmp_path: Path,
) -> None:
    first = DaemonLock(tmp_path)
    first.acquire()
    with pytest.raises(RefuseToStartError, match="give this one its own --state-dir"):
        DaemonLock(tmp_path).acquire()
    first.release()
    with DaemonLock(tmp_path):
        pass


def test_a_garbled_lock_file_is_named_printably(tmp_path: Path) -> None:
    """The holder's words come from a file: a person's (or a crash's) bytes reach the terminal."""
    with DaemonLock(tmp_path):
        (tmp_path / LOCK_FILE_NAME).write_bytes(b"\x1b[2J\xff\x00")
        with pytest.raises(RefuseToStartError) as refused:
            DaemonLock(tmp_path).acquire()
    assert "\x1b" not in str(refused.value) and "\x00" not in str(refused.value)


def test_a_state_dir_that_cannot_be_made_is_a_refusal(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("a file where the state dir should be")
    with pytest.raises(RefuseToStartError, match=r"cannot create .*daemon\.lock"):
        DaemonLock(tmp_path / "state").acquire()


@pytest.mark.parametrize("dangling", [False, True])
def test_a_symlink_at_the_lock_file_is_refused_and_not_written_through(
    tmp_path: Path, dangling: bool
) -> None:
    """The lock file was opened through a symlink: the file it named (another state dir's
    runner_state.json here) was cut to the holder's line, or made where a dangling one pointed."""
    victim = tmp_path / "other" / "runner_state.json"
    victim.parent.mkdir()
    if not dangling:
        victim.write_bytes(b'{"cash": 10000}\n')
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / LOCK_FILE_NAME).symlink_to(victim)
    with pytest.raises(RefuseToStartError, match=str(state_dir / LOCK_FILE_NAME)):
        DaemonLock(state_dir).acquire()
    assert (victim.read_bytes() if victim.exists() else None) == (
        None if dangling else b'{"cash": 10000}\n'
    )
