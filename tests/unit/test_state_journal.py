"""JsonlJournal: complete lines, deterministic bytes, torn-line repair, faults, async appends (the
CSV journal: ``test_state_journal_csv.py``)."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import threading
from pathlib import Path
from types import MappingProxyType
from typing import Any

import orjson
import pytest
from fakes.journal_lines import read_all
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from core.clock import VirtualClock
from state.journal import (
    JournalClosedError,
    JournalRecordError,
    JsonlJournal,
    encode_jsonl_record,
    repair_torn_tail,
)
from state.journal_health import FAULT_FILE_NAME, JournalHealth, read_fault_file
from state.segments import LINE_MAX_BYTES

EPOCH_MS = 1_740_000_000_000  # 2025-02-19T21:20:00Z


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(epoch_ms=EPOCH_MS)


# --- JSON lines --------------------------------------------------------------------------------


@pytest.mark.parametrize("fsync", [True, False])
def test_appended_records_read_back_one_per_line(tmp_path: Path, fsync: bool) -> None:
    path = tmp_path / "logs" / "decisions.jsonl"
    with JsonlJournal(path, fsync=fsync) as journal:
        journal.append({"who": "fallback", "n": 1, "nested": {"b": [1, 2.5], "a": None}})
        journal.append({"who": "claude", "n": 2})
    assert read_all(path) == [
        {"who": "fallback", "n": 1, "nested": {"b": [1, 2.5], "a": None}},
        {"who": "claude", "n": 2},
    ]
    assert path.read_bytes().count(b"\n") == 2


def test_reopening_appends_after_existing_records(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    for n in range(3):
        with JsonlJournal(path, fsync=False) as journal:
            journal.append({"n": n})
    assert [r["n"] for r in read_all(path)] == [0, 1, 2]


def test_keys_are_sorted_so_equal_records_give_equal_bytes() -> None:
    one = encode_jsonl_record({"b": 1, "a": {"z": 1, "y": 2}})
    other = encode_jsonl_record({"a": {"y": 2, "z": 1}, "b": 1})
    assert one == other == b'{"a":{"y":2,"z":1},"b":1}\n'


_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_json_values = st.recursive(
    _json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@given(record=st.dictionaries(st.text(), _json_values, max_size=6))
def test_encoding_is_deterministic_and_round_trips(record: dict[str, Any]) -> None:
    shuffled = dict(reversed(list(record.items())))
    line = encode_jsonl_record(record)
    assert line == encode_jsonl_record(shuffled)
    assert line.endswith(b"\n") and line.count(b"\n") == 1  # one line, whatever the text holds
    assert orjson.loads(line) == json.loads(json.dumps(record))


# one recursion over the scalars, not a recursion over _json_values: nested, the two drew and
# threw away trees past their leaf bounds until 100 examples took 7-12 s of generating
_json_or_tuples = st.recursive(
    _json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@given(record=st.dictionaries(st.text(), _json_or_tuples, max_size=6))
def test_a_plain_record_is_written_as_its_copy_would_be(record: dict[str, Any]) -> None:
    """A plain record goes to orjson as it is; anything else (here: a read-only mapping) is
    copied first. Both give the same bytes."""
    assert encode_jsonl_record(record) == encode_jsonl_record(MappingProxyType(record))


def test_a_model_or_non_finite_number_deep_in_a_record_takes_the_checked_path() -> None:
    class Price(BaseModel):
        value: float

    nested = {"a": [1, {"b": (Price(value=2.5), "x")}]}
    assert encode_jsonl_record(nested) == b'{"a":[1,{"b":[{"value":2.5},"x"]}]}\n'
    with pytest.raises(JournalRecordError, match=r"record\.a\[1\]\.b\[0\]"):
        encode_jsonl_record({"a": [1, {"b": (math.inf, "x")}]})


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 2**64, -(2**63) - 1])
def test_an_unencodable_value_is_written_degraded_with_the_reason_and_the_next_line_is_whole(
    tmp_path: Path, bad: float
) -> None:
    path = tmp_path / "decisions.jsonl"
    with JsonlJournal(path, fsync=False) as journal:
        journal.append({"decision_id": "d1", "agent": {"input_tokens": 3, "totals": [1, bad]}})
        journal.append({"decision_id": "d2"})
    first, second = read_all(path)
    assert first["decision_id"] == "d1" and first["agent"]["input_tokens"] == 3
    assert first["agent"]["totals"] == [1, repr(bad)]
    assert (
        "record.agent.totals[1]" in first["journal_degraded"]
        or "encode" in first["journal_degraded"]
    )
    assert second == {"decision_id": "d2"}
    assert journal.health.degraded_lines == 1 and journal.health.ok


@pytest.mark.parametrize("content", [b'{"ok": false, "failed_wri', b"\xff\xfe", b"[" * 100_000])
def test_a_torn_or_garbled_fault_file_reads_as_unreadable_with_why(
    tmp_path: Path, content: bytes
) -> None:
    (tmp_path / FAULT_FILE_NAME).write_bytes(content)
    fault = read_fault_file(tmp_path)
    assert fault is not None and fault["unreadable"].startswith("JSONDecodeError: ")


def test_a_failed_write_is_a_loud_fault_in_the_health_and_the_fault_file(tmp_path: Path) -> None:
    full = Path("/dev/full")  # every write: ENOSPC, as on a full disk (a link to it: ELOOP)
    health = JournalHealth(tmp_path / FAULT_FILE_NAME)
    journal = JsonlJournal(full, fsync=False, health=health)
    with pytest.raises(OSError):
        journal.append({"decision_id": "d1"})
    assert not health.ok and health.failed_writes == 1
    assert "No space left" in (health.last_error or "")
    fault = read_fault_file(tmp_path)
    assert fault is not None and fault["failed_writes"] == 1 and fault["ok"] is False
    with pytest.raises(OSError):
        journal.close()  # /dev/full refuses the fsync too: still a fault, never a silent loss
    assert health.failed_writes == 2


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"by_ticker": {1: "x"}}, "non-string key 1"),
        ({"when": object()}, "cannot encode"),
        (["not", "a", "mapping"], "must be a mapping"),
    ],
)
def test_unencodable_records_are_refused(record: Any, problem: str) -> None:
    with pytest.raises(JournalRecordError, match=problem):
        encode_jsonl_record(record)


def test_pydantic_models_and_tuples_are_written_as_json() -> None:
    class Snapshot(BaseModel):
        price: float
        tickers: tuple[str, ...]

    line = encode_jsonl_record({"snapshot": Snapshot(price=1.5, tickers=("BTC/USDT",))})
    assert line == b'{"snapshot":{"price":1.5,"tickers":["BTC/USDT"]}}\n'
    with pytest.raises(JournalRecordError, match="finite"):
        encode_jsonl_record({"snapshot": Snapshot(price=math.nan, tickers=())})


def test_a_torn_last_line_is_moved_aside_on_open(
    tmp_path: Path, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "decisions.jsonl"
    path.write_bytes(b'{"n":1}\n{"n":2}\n{"n":3,"reas')
    with caplog.at_level(logging.WARNING, logger="state.journal"):
        journal = JsonlJournal(path, fsync=True, clock=clock)
    fragment = tmp_path / "decisions.jsonl.torn-20250219T212000.000Z"
    assert journal.torn_fragment_path == fragment
    assert fragment.read_bytes() == b'{"n":3,"reas'
    assert str(fragment) in caplog.text
    journal.append({"n": 4})
    journal.close()
    assert [r["n"] for r in read_all(path)] == [1, 2, 4]


def test_a_file_that_is_only_a_fragment_is_emptied(tmp_path: Path, clock: VirtualClock) -> None:
    path = tmp_path / "decisions.jsonl"
    path.write_bytes(b'{"n":1')
    with JsonlJournal(path, fsync=False, clock=clock) as journal:
        assert journal.torn_fragment_path is not None
    assert path.read_bytes() == b""


def test_repair_finds_the_last_newline_far_back(tmp_path: Path, clock: VirtualClock) -> None:
    path = tmp_path / "big.jsonl"
    fragment = b"x" * 200_000  # longer than one backwards read
    path.write_bytes(b'{"n":1}\n' + fragment)
    repaired = repair_torn_tail(path, clock.now_ms())
    assert repaired is not None and repaired.read_bytes() == fragment
    assert path.read_bytes() == b'{"n":1}\n'


def test_two_repairs_in_the_same_millisecond_keep_both_fragments(
    tmp_path: Path, clock: VirtualClock
) -> None:
    path = tmp_path / "decisions.jsonl"
    found = []
    for text in (b"first", b"second"):
        path.write_bytes(text)
        repaired = repair_torn_tail(path, clock.now_ms())
        assert repaired is not None
        found.append(repaired.read_bytes())
    assert found == [b"first", b"second"]


def test_a_complete_file_is_not_touched(tmp_path: Path, clock: VirtualClock) -> None:
    path = tmp_path / "decisions.jsonl"
    path.write_bytes(b'{"n":1}\n')
    mtime = path.stat().st_mtime_ns
    assert repair_torn_tail(path, clock.now_ms()) is None
    assert repair_torn_tail(tmp_path / "missing.jsonl", clock.now_ms()) is None
    assert path.stat().st_mtime_ns == mtime


def test_read_all_refuses_a_torn_or_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    path.write_bytes(b'{"n":1}\n{"n":')
    with pytest.raises(ValueError, match="incomplete"):
        read_all(path)
    path.write_bytes(b'{"n":1}\n[1]\n')
    with pytest.raises(ValueError, match="line 2 is not a JSON object"):
        read_all(path)


def test_append_after_close_is_an_error(tmp_path: Path) -> None:
    journal = JsonlJournal(tmp_path / "d.jsonl", fsync=False)
    journal.close()
    journal.close()  # closing twice is fine
    with pytest.raises(JournalClosedError):
        journal.append({"n": 1})


def test_each_record_is_one_write_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bytes] = []
    real_write = os.write

    def counting_write(fd: int, data: bytes) -> int:
        calls.append(bytes(data))
        return real_write(fd, data)

    with JsonlJournal(tmp_path / "d.jsonl", fsync=False) as journal:
        monkeypatch.setattr(os, "write", counting_write)
        journal.append({"text": "x" * 100_000, "n": 1})
        monkeypatch.undo()
    assert len(calls) == 1 and calls[0].endswith(b"}\n")


def test_two_writers_on_one_file_never_overwrite_each_other(tmp_path: Path) -> None:
    # O_APPEND: every write lands at the current end, whoever else has written meanwhile
    path = tmp_path / "state" / "logs" / "decisions.jsonl"
    first = JsonlJournal(path, fsync=False)
    second = JsonlJournal(path, fsync=True)
    for n in range(5):
        (first if n % 2 else second).append({"n": n})
    first.flush()
    first.close()
    second.close()
    assert [r["n"] for r in read_all(path)] == [0, 1, 2, 3, 4]


async def test_async_appends_with_fsync_run_off_the_loop_in_order(tmp_path: Path) -> None:
    path = tmp_path / "async.jsonl"
    journal = JsonlJournal(path, fsync=True)
    loop_thread = threading.get_ident()
    writers: set[int] = set()
    real_write = journal._file._write

    def spy(data: bytes, now_ms: int) -> None:
        writers.add(threading.get_ident())
        real_write(data, now_ms)

    journal._file._write = spy  # type: ignore[method-assign]
    for n in range(20):
        await journal.append_async({"n": n})
    journal.close()
    assert [json.loads(line)["n"] for line in path.read_bytes().splitlines()] == list(range(20))
    assert writers and loop_thread not in writers  # the writer thread, never the event loop


async def test_a_cancelled_async_append_still_writes_its_line_whole(tmp_path: Path) -> None:
    path = tmp_path / "cancelled.jsonl"
    journal = JsonlJournal(path, fsync=True)
    task = asyncio.create_task(journal.append_async({"big": "x" * 100_000}))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    journal.close()  # waits for the line in flight
    (line,) = path.read_bytes().splitlines()
    assert json.loads(line) == {"big": "x" * 100_000}


async def test_without_fsync_an_async_append_stays_on_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "replay.jsonl"
    with JsonlJournal(path, fsync=False) as journal:
        await journal.append_async({"n": 1})
        assert journal._file._writer is None  # replay: no thread, deterministic placement
    assert path.read_bytes() == b'{"n":1}\n'


def test_a_tail_of_zeros_a_crash_extended_is_moved_aside_up_to_a_line_s_length(
    tmp_path: Path, clock: VirtualClock
) -> None:
    """The zeros a crash can leave after the last line (the file extended, not written; here a
    sparse 256 MiB) were read whole into memory and written to the fragment file at start; no
    line is longer than ``LINE_MAX_BYTES``, so that much of it is kept and the rest is dropped."""
    path = tmp_path / "decisions.jsonl"
    path.write_bytes(b'{"n":1}\n{"n":2,"rea')
    with path.open("r+b") as handle:
        handle.truncate(256 << 20)
    with JsonlJournal(path, fsync=False, clock=clock) as journal:
        fragment = journal.torn_fragment_path
        journal.append({"n": 3})
    assert fragment is not None
    assert fragment.stat().st_size == LINE_MAX_BYTES
    assert fragment.read_bytes()[:12] == b'{"n":2,"rea' + b"\x00"
    assert [r["n"] for r in read_all(path)] == [1, 3]
