"""An outbox or an outbox cursor a person (or a damaged disk) left as something the daemon cannot
read refuses the start naming the file: each case through the composition root, one through the
real ``vigil run --sim`` (exit 78, no traceback). A folder in a cursor's place, bytes that are not
ASCII or a number of 5,000 digits were a traceback at start; a FIFO froze the start for good,
before any loop (the watchdog included) ran."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from fakes.daemon import daemon_env, refused_sim_start

from core.errors import RefuseToStartError
from runner.app import build_daemon
from runner.config import MarketConfig, Settings

pytestmark = pytest.mark.timeout(120)

EXITS = "outbox/exits.jsonl"
CURSOR = "outbox/exits.jsonl.learner.ack"
STORE_CURSOR = "outbox/memory.jsonl.store.ack"
LEGACY = "memory_outbox.db"


def _folder(path: Path) -> None:
    path.mkdir()


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _bytes(data: bytes) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.write_bytes(data)

    return write


def _legacy(body: bytes, *, entry: bool = False) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE pending (key TEXT PRIMARY KEY, seq INTEGER, body BLOB)")
            db.execute("CREATE TABLE entries (ticker TEXT PRIMARY KEY, body BLOB NOT NULL)")
            if entry:
                db.execute("INSERT INTO entries VALUES ('ETH/USDT', ?)", (body,))
            else:
                db.execute("INSERT INTO pending VALUES ('t-1', 1, ?)", (body,))
        db.close()

    return write


CASES: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "cursor folder": (CURSOR, _folder, "not a regular file"),
    "cursor fifo": (CURSOR, _fifo, "not a regular file"),
    "cursor not ascii": (CURSOR, _bytes(b"\xff\xfe1\n"), "not a sequence number"),
    "cursor 5000 digits": (CURSOR, _bytes(b"9" * 5000), "not a sequence number"),
    "cursor negative": (CURSOR, _bytes(b"-1\n"), "not a sequence number"),
    "cursor past the end": (CURSOR, _bytes(b"3\n"), "not a sequence number"),
    "outbox folder": (EXITS, _folder, "not a regular file"),
    "outbox fifo": (EXITS, _fifo, "not a regular file"),
    "store cursor folder": (STORE_CURSOR, _folder, "not a regular file"),
    # an older vigil's SQLite outbox, imported once: sqlite3's DatabaseError or a body's
    # JSONDecodeError was a traceback at every start
    "old memory outbox not a database": (LEGACY, _bytes(b"no database " * 100), "not a database"),
    "old memory outbox folder": (LEGACY, _folder, "unable to open"),
    "old memory outbox body not JSON": (LEGACY, _legacy(b"{"), "cannot be imported"),
    "old memory outbox entry a list": (LEGACY, _legacy(b"[1]", entry=True), "not an object"),
}


def _state_dir(tmp_path: Path, case: str) -> Path:
    name, make, _ = CASES[case]
    state_dir = tmp_path / "state"
    (state_dir / "outbox").mkdir(parents=True)
    make(state_dir / name)
    return state_dir


@pytest.mark.parametrize("case", list(CASES))
async def test_an_unreadable_outbox_or_cursor_refuses_the_start_naming_it(
    tmp_path: Path, case: str
) -> None:
    name, _, why = CASES[case]
    state_dir = _state_dir(tmp_path, case)
    # the live wiring (it contacts nothing before it runs): the outboxes are read as in the
    # simulator's, whose recordings and servers cost 0.4 CPU-s a case and read no outbox
    settings = Settings(state_dir=state_dir, market=MarketConfig(source="binance"))
    with pytest.raises(RefuseToStartError) as refused:
        await build_daemon(settings)
    assert str(state_dir / name) in str(refused.value) and why in str(refused.value)


def test_the_daemon_refuses_with_exit_78_and_no_traceback(tmp_path: Path) -> None:
    state_dir = _state_dir(tmp_path, "cursor fifo")
    stderr = refused_sim_start(daemon_env(state_dir))
    assert str(state_dir / CURSOR) in stderr and "not a regular file" in stderr
