"""The API on loopback over a decisions journal it cannot read whole: a torn gzipped segment, a
segment whose name is not a time, a folder where the live file should be. The journal's routes
answer 409 naming the file, and the status answers with the figures it can read and says which
it cannot, never a 500."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from fakes.allocation_peak import allocation_peak
from fakes.api_support import T0_MS, IdleDaemon, decision_line, serve_api
from fakes.fifo import released_fifo

SEGMENT = "decisions.20250228T235959Z.jsonl"


def old_lines() -> bytes:
    return b"".join(decision_line(100 + n, T0_MS - 86_400_000 + n, 9000.0) for n in range(50))


def torn_segment(logs: Path) -> Path:
    """A gzipped segment cut short (a copy or a disk that lost its end)."""
    path = logs / (SEGMENT + ".gz")
    whole = gzip.compress(old_lines())
    path.write_bytes(whole[: len(whole) // 2])
    return path


def folder_for_live_file(logs: Path) -> Path:
    path = logs / "decisions.jsonl"
    path.unlink()
    path.mkdir()
    return path


@pytest.mark.parametrize("broken", [torn_segment, folder_for_live_file])
async def test_a_journal_that_cannot_be_read_is_a_409_naming_the_file(
    state_dir: Path, broken: object
) -> None:
    assert callable(broken)
    path: Path = broken(state_dir / "logs")
    # the daemon's clock is the day after the segment closed: the cost reader reads it too
    async with serve_api(state_dir, daemon=IdleDaemon()) as api:
        for route, params in (("/api/decisions", {"since": "0"}), ("/api/equity", {})):
            async with api.session.get(api.url + route, headers=api.auth, params=params) as r:
                assert r.status == 409, route
                assert path.name in (await r.json())["detail"], route
        code, status = await api.get("/api/status")
    assert code == 200 and isinstance(status, dict)
    assert status["cost"] is None and path.name in status["unavailable"]["cost"]
    assert status["equity_usd"] is not None  # the other figures are still given
    if broken is folder_for_live_file:
        assert path.name in status["unavailable"]["last_decision"]


async def test_a_segment_whose_name_is_not_a_time_is_read(state_dir: Path) -> None:
    """Its name matches the pattern's digits but is no instant (month 13): the cost reader's
    strptime raised, a 500 on every /api/status."""
    (state_dir / "logs" / "decisions.20251399T999999Z.jsonl").write_bytes(old_lines())
    async with serve_api(state_dir) as api:
        code, status = await api.get("/api/status")
        _, page = await api.get("/api/decisions", since=0, limit=100)
    assert code == 200 and isinstance(status, dict) and status["cost"] is not None
    assert isinstance(page, dict) and len(page["decisions"]) == 55


async def test_a_fifo_in_place_of_the_live_journal_is_a_409_not_a_frozen_api(
    state_dir: Path,
) -> None:
    """The live file's tail (the status's last decision, a page of the newest decisions), the
    equity reader and the cost reader opened it with a plain open, which waits on a FIFO until
    someone writes to it: the status read it on the event loop, so every route, /healthz and
    the daemon's own loops (isolation = "inline") froze."""
    live = state_dir / "logs" / "decisions.jsonl"
    live.unlink()
    os.mkfifo(live)
    with released_fifo(live) as released:
        async with serve_api(state_dir, daemon=IdleDaemon()) as api:
            code, status = await api.get("/api/status")
            pages = [await api.get(route) for route in ("/api/decisions", "/api/equity")]
    assert not released(), "the API blocked on the FIFO"
    assert code == 200 and isinstance(status, dict) and status["equity_usd"] is not None
    assert live.name in status["unavailable"]["last_decision"]
    assert live.name in status["unavailable"]["cost"]
    for code, body in pages:
        assert code == 409 and isinstance(body, dict) and live.name in body["detail"]


@pytest.mark.timeout(60)  # a hang guard only: the fixed reader takes well under a second
async def test_a_live_journal_ending_in_a_gigabyte_of_nuls_answers_the_last_decision(
    state_dir: Path,
) -> None:
    """A crash can leave a file's tail as zeros (the size was written, the data not): the tail
    reader re-joined and re-counted everything read so far at each 64 kB step back, so a tail
    with no newline cost time quadratic in its size (64 MB: 81 s), on the event loop of
    /api/status. It now keeps nothing before the last newline and counts each block once."""
    live = state_dir / "logs" / "decisions.jsonl"
    last = decision_line(9, T0_MS + 3_600_000)
    with live.open("ab") as out:
        out.write(last)
    os.truncate(live, live.stat().st_size + (1 << 30))
    async with serve_api(state_dir, daemon=IdleDaemon()) as api:
        code, status = await api.get("/api/status")
        _, page = await api.get("/api/decisions", limit=2)
    assert code == 200 and isinstance(status, dict) and isinstance(page, dict)
    assert status["last_decision"]["decision_id"] == f"d{T0_MS + 3_600_000}-9"
    assert [d["at_ms"] for d in page["decisions"]] == [T0_MS + 4 * 60_000, T0_MS + 3_600_000]


async def test_the_cost_of_a_live_journal_ending_in_zeros_is_read_in_bounded_memory(
    state_dir: Path,
) -> None:
    """The cost reader read all of the live file after its last whole line at each status: a
    tail of 512 MB of zeros (a crash's) was 512 MB allocated at every /api/status, for a torn
    line that never ends. It reads in blocks, and a run of 16 MB without a newline is no line."""
    live = state_dir / "logs" / "decisions.jsonl"
    os.truncate(live, live.stat().st_size + (512 << 20))
    async with serve_api(state_dir, daemon=IdleDaemon()) as api:
        with allocation_peak() as allocated:
            code, status = await api.get("/api/status")
    assert code == 200 and isinstance(status, dict) and status["cost"] is not None
    assert status["last_decision"]["decision_id"] == f"d{T0_MS + 4 * 60_000}-4"
    assert allocated.peak_bytes < 128 << 20


async def _decisions_peak(state_dir: Path, **params: str | int) -> tuple[int, object, int]:
    async with serve_api(state_dir) as api:
        with allocation_peak() as allocated:
            code, page = await api.get("/api/decisions", **params)
    return code, page, allocated.peak_bytes


async def test_decisions_since_across_zeros_in_the_live_journal_are_read_in_bounded_memory(
    state_dir: Path,
) -> None:
    """/api/decisions?since= iterated the segments' lines, so a run of zeros a crash left (512 MB
    here: the file extended, not written; the daemon appended after it on restart) was read as
    one line, whole. A run of 16 MB without a newline is now passed over as no line."""
    live = state_dir / "logs" / "decisions.jsonl"
    os.truncate(live, live.stat().st_size + (512 << 20))
    with live.open("ab") as out:
        out.write(b"\n" + decision_line(9, T0_MS + 3_600_000))
    code, page, peak = await _decisions_peak(state_dir, since=T0_MS, limit=100)
    assert code == 200 and isinstance(page, dict)
    assert [d["at_ms"] for d in page["decisions"]][-2:] == [T0_MS + 4 * 60_000, T0_MS + 3_600_000]
    assert peak < 128 << 20


async def test_the_newest_decisions_across_a_rotated_segment_of_zeros_in_bounded_memory(
    state_dir: Path,
) -> None:
    """With too few decisions in the live file the newest are read across every segment
    (``iter_lines``), which read a rotated segment's run of zeros as one line, whole."""
    segment = state_dir / "logs" / SEGMENT
    segment.write_bytes(old_lines())
    os.truncate(segment, segment.stat().st_size + (512 << 20))
    with segment.open("ab") as out:
        out.write(b"\n")
    code, page, peak = await _decisions_peak(state_dir, limit=60)
    assert code == 200 and isinstance(page, dict)
    assert len(page["decisions"]) == 55 and page["segments_read"] == 1
    assert peak < 128 << 20
