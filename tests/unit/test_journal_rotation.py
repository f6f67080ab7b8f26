"""decisions.jsonl rotation: by UTC day and size, gzip of closed segments, retention, and every
reader reading across the segments in order."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson
import pytest
from fakes.instant_clock import InstantClock

from runner.cost_projection import journal_rate
from runner.sim_start import last_state_time_ms
from state.journal import JsonlJournal
from state.records import JournalReader
from state.rotation import JournalRotationConfig, compress_segment, finish_interrupted
from state.segments import iter_lines, recent_lines, segments

DAY_MS = 86_400_000
EPOCH_MS = 1_740_009_600_000  # 2025-02-20T00:00:00Z
DAILY = JournalRotationConfig(max_segment_bytes=None)


def _line(n: int, at_ms: int) -> dict[str, Any]:
    return {"type": "agent_failure", "at_ms": at_ms, "kind": "test", "detail": f"n={n}"}


def _numbers(live: Path) -> list[int]:
    return [int(r.detail.split("=")[1]) for r in JournalReader(live)]  # type: ignore[union-attr]


def _write_days(live: Path, clock: InstantClock, config: JournalRotationConfig, days: int) -> None:
    with JsonlJournal(live, fsync=False, clock=clock, rotation=config) as journal:
        n = 0
        for _day in range(days):
            for _ in range(3):
                journal.append(_line(n, clock.now_ms()))
                n += 1
                clock.advance(3600)
            clock.advance(86_400 - 3 * 3600)


def test_a_new_utc_day_closes_the_segment_gzipped_and_readers_see_every_line(
    tmp_path: Path,
) -> None:
    live = tmp_path / "logs" / "decisions.jsonl"
    clock = InstantClock(EPOCH_MS)
    _write_days(live, clock, DAILY, days=3)
    names = [p.name for p in segments(live)]
    # each segment is stamped with the instant it was closed: the first line of the next day
    assert names == [
        "decisions.20250221T000000Z.jsonl.gz",
        "decisions.20250222T000000Z.jsonl.gz",
        "decisions.jsonl",
    ]
    assert _numbers(live) == list(range(9))
    first_day = [
        orjson.loads(x)["at_ms"]
        for x in gzip.decompress(segments(live)[0].read_bytes()).splitlines()
    ]
    assert all(EPOCH_MS <= at < EPOCH_MS + DAY_MS for at in first_day)
    assert not list(tmp_path.glob("logs/*.tmp"))


def test_size_rotation_splits_between_lines_and_loses_or_repeats_nothing(tmp_path: Path) -> None:
    live = tmp_path / "decisions.jsonl"
    clock = InstantClock(EPOCH_MS)
    config = JournalRotationConfig(rotate_daily=False, max_segment_bytes=300)
    with JsonlJournal(live, fsync=True, clock=clock, rotation=config) as journal:
        for n in range(40):
            journal.append(_line(n, clock.now_ms()))
            clock.advance(1)  # two segments may close in the same second: -2, -3 ... names
    parts = segments(live)
    assert len(parts) > 5
    for part in parts[:-1]:
        data = gzip.decompress(part.read_bytes())
        assert 0 < len(data) <= 300 and data.endswith(b"\n")
    assert _numbers(live) == list(range(40))
    assert len(list(iter_lines(live))) == 40


def test_a_reopened_journal_rotates_on_its_first_line_of_a_later_day(tmp_path: Path) -> None:
    live = tmp_path / "decisions.jsonl"
    clock = InstantClock(EPOCH_MS)
    with JsonlJournal(live, fsync=False, clock=clock, rotation=DAILY) as journal:
        journal.append(_line(0, clock.now_ms()))
    clock.advance(2 * 86_400)  # the daemon was down for two days
    with JsonlJournal(live, fsync=False, clock=clock, rotation=DAILY) as journal:
        journal.append(_line(1, clock.now_ms()))
    assert [p.name for p in segments(live)] == [
        "decisions.20250222T000000Z.jsonl.gz",
        "decisions.jsonl",
    ]
    assert _numbers(live) == [0, 1]


def test_gzip_of_a_segment_is_deterministic(tmp_path: Path) -> None:
    outputs = []
    for name in ("a", "b"):
        plain = tmp_path / name / "decisions.20250221T000000Z.jsonl"
        plain.parent.mkdir()
        plain.write_bytes(b'{"n":1}\n' * 100)
        outputs.append(compress_segment(plain).read_bytes())
        assert not plain.exists()
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize(
    ("config", "kept"),
    [
        (JournalRotationConfig(max_segment_bytes=None, keep_segments=2), [3, 4]),
        # a segment goes when it was closed (its last line) more than keep_days ago
        (JournalRotationConfig(max_segment_bytes=None, keep_days=2.5), [2, 3, 4]),
        (JournalRotationConfig(max_segment_bytes=None, keep_days=30), [0, 1, 2, 3, 4]),
    ],
)
def test_retention_deletes_the_oldest_closed_segments(
    tmp_path: Path, config: JournalRotationConfig, kept: list[int]
) -> None:
    live = tmp_path / "decisions.jsonl"
    clock = InstantClock(EPOCH_MS)
    _write_days(live, clock, config, days=6)
    days_left = sorted({n // 3 for n in _numbers(live)})
    assert days_left == [*kept, 5]  # the live file (day 5) is never pruned


def test_opening_finishes_an_interrupted_rotation(tmp_path: Path) -> None:
    live = tmp_path / "decisions.jsonl"
    whole = tmp_path / "decisions.20250221T000000Z.jsonl"
    whole.write_bytes(b'{"at_ms":1,"type":"x"}\n')
    packed_twice = tmp_path / "decisions.20250222T000000Z.jsonl"
    packed_twice.write_bytes(b'{"at_ms":2,"type":"x"}\n')
    compress_segment(packed_twice)
    packed_twice.write_bytes(b'{"at_ms":2,"type":"x"}\n')  # the crash left the plain copy too
    (tmp_path / "decisions.20250223T000000Z.jsonl").write_bytes(b'{"at_ms":3,"type":"x"}\n')
    (tmp_path / "decisions.20250223T000000Z.jsonl.gz.tmp").write_bytes(b"\x1f\x8b half")
    assert [r.at_ms for r in JournalReader(live)] == [1, 2, 3]  # readers: no line twice
    finish_interrupted(live, compress=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "decisions.20250221T000000Z.jsonl.gz",
        "decisions.20250222T000000Z.jsonl.gz",
        "decisions.20250223T000000Z.jsonl.gz",
    ]
    assert [r.at_ms for r in JournalReader(live)] == [1, 2, 3]


def test_recent_readers_look_past_an_empty_live_file(tmp_path: Path) -> None:
    live = tmp_path / "logs" / "decisions.jsonl"
    clock = InstantClock(EPOCH_MS)
    _write_days(live, clock, DAILY, days=2)
    live.write_bytes(b"")  # as just after a rotation (day 2 is lost here: only day 1 is left)
    lines = recent_lines(live, 1 << 20)
    assert [orjson.loads(x)["detail"] for x in lines] == ["n=0", "n=1", "n=2"]
    last_at = orjson.loads(lines[-1])["at_ms"]
    assert last_state_time_ms(tmp_path / "runner_state.json", live) == last_at
    assert recent_lines(live, 1) == lines[-1:]


def test_cost_projection_reads_the_gate_rate_across_segments(tmp_path: Path) -> None:
    live = tmp_path / "decisions.jsonl"
    clock = InstantClock(EPOCH_MS)
    with JsonlJournal(live, fsync=False, clock=clock, rotation=DAILY) as journal:
        for n in range(30):  # 30 h of hourly decisions: the live file alone holds too few
            journal.append(
                {
                    "type": "decision",
                    "at_ms": clock.now_ms(),
                    "decision_id": f"d{n}",
                    "trigger": ["candle_close:1h"],
                }
            )
            clock.advance(3600)
    assert len(segments(live)) == 2
    rate = journal_rate(live)
    assert rate is not None
    assert rate.source == "the journal's last 1.2 days"
    assert rate.passes_per_day == {"candle_close": pytest.approx(30 / (29 / 24))}
