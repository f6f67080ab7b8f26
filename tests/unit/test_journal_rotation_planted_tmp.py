"""What a person or another program left at the name a rotation gzips a closed segment to
(``decisions.<stamp>.jsonl.gz.tmp``, predictable: the stamp is the instant the segment closes):
a dangling symlink was followed, so the gzip created the file it named, wherever that was, and
the link was renamed into the journal as its segment. The temporary file is now made afresh
(``O_EXCL``): what was there is removed first, never opened."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import orjson
from fakes.instant_clock import InstantClock

from state.journal import JsonlJournal
from state.records import JournalReader
from state.rotation import JournalRotationConfig

EPOCH_MS = 1_740_009_600_000  # 2025-02-20T00:00:00Z
DAILY = JournalRotationConfig(max_segment_bytes=None)


def _line(n: int, at_ms: int) -> dict[str, object]:
    return {"type": "agent_failure", "at_ms": at_ms, "kind": "test", "detail": f"n={n}"}


def _two_days(live: Path, plant: Callable[[], object]) -> None:
    """A line on 2025-02-20, ``plant()``, then one on the 21st: the first day's segment closes
    at 00:00 (what is at the temporary name when the journal opens is removed then)."""
    clock = InstantClock(EPOCH_MS)
    with JsonlJournal(live, fsync=False, clock=clock, rotation=DAILY) as journal:
        journal.append(_line(0, clock.now_ms()))
        plant()
        clock._now_secs = 86_400.0
        journal.append(_line(1, clock.now_ms()))
        journal.wait_packed()


def _tmp_name(live: Path) -> Path:
    return live.with_name("decisions.20250221T000000Z.jsonl.gz.tmp")


def test_a_dangling_symlink_at_the_gzip_tmp_name_is_not_written_through(tmp_path: Path) -> None:
    """A name that exists is taken (the segment gets ``-2``), but a link to no file does not
    exist to ``Path.exists``: the gzip created the file it named, wherever that was."""
    live = tmp_path / "decisions.jsonl"
    elsewhere = tmp_path / "elsewhere.bin"
    _two_days(live, lambda: _tmp_name(live).symlink_to(elsewhere))
    assert not elsewhere.exists()
    packed = live.with_name("decisions.20250221T000000Z.jsonl.gz")
    assert packed.is_file() and not packed.is_symlink()
    assert orjson.loads(gzip.decompress(packed.read_bytes()))["detail"] == "n=0"
    assert [r.at_ms for r in JournalReader(live)] == [EPOCH_MS, EPOCH_MS + 86_400_000]
