"""state.fsynced_lines: the one reader of write-ahead JSON-lines files (exits outbox, order journal)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from fakes.disk_full import disk_full_after

from core.errors import RefuseToStartError
from state.fsynced_lines import append_line, read_lines


def _collect(path: Path) -> list[int]:
    seen: list[int] = []
    read_lines(path, lambda line: seen.append(orjson.loads(line)["n"]), what="t", advice="fix it")
    return seen


def test_lines_are_read_in_order_and_blank_ones_skipped(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    assert _collect(path) == []  # no file yet: nothing
    append_line(path, b'{"n":1}\n')
    with path.open("ab") as handle:
        handle.write(b"\n  \n")
    append_line(path, b'{"n":2}\n')
    assert _collect(path) == [1, 2]


def test_a_torn_last_line_is_cut_off_the_file(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    append_line(path, b'{"n":1}\n')
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"n":')
    assert _collect(path) == [1]
    assert path.read_bytes() == whole  # the next append starts on a clean line


def test_a_damaged_line_before_the_last_refuses_and_leaves_the_file(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    body = b'{"n":1}\n{"n"\n{"n":3}\n'
    path.write_bytes(body)
    with pytest.raises(RefuseToStartError, match=r"t .*a\.jsonl line 2 is damaged .*fix it"):
        _collect(path)
    assert path.read_bytes() == body


def test_an_error_that_is_not_a_bad_line_propagates(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    append_line(path, b'{"n":1}\n')

    def boom(_line: bytes) -> None:
        raise RuntimeError("disk")

    with pytest.raises(RuntimeError, match="disk"):
        read_lines(path, boom, what="t", advice="")


def test_an_append_cut_short_by_a_full_disk_leaves_no_part_of_its_line(tmp_path: Path) -> None:
    """Half a line left behind became, with the next append that fit, one damaged line: dropped
    as a torn tail at the next start (the record after it lost) or, once more lines followed, a
    refusal to start."""
    path = tmp_path / "a.jsonl"
    append_line(path, b'{"n":1}\n')
    size = path.stat().st_size
    with disk_full_after(size + 5), pytest.raises(OSError):
        append_line(path, b'{"n":2,"pad":"' + b"x" * 64 + b'"}\n')
    assert path.stat().st_size == size
    append_line(path, b'{"n":3}\n')  # the disk freed
    append_line(path, b'{"n":4}\n')
    assert _collect(path) == [1, 3, 4]
