"""state.fsynced_lines: the one reader of write-ahead JSON-lines files (exits outbox, order journal)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

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
