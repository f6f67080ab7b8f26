"""``state.segments.tail_lines`` and ``whole_lines`` against the plain reading of a file's
complete lines, for any bytes, count and block size: reading in blocks, from the end or from a
position, gives the same lines."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from state.segments import LINE_MAX_BYTES, tail_lines, whole_lines


def expected(data: bytes, count: int) -> list[bytes]:
    whole = data[: data.rfind(b"\n") + 1]
    return whole.splitlines(keepends=True)[-count:] if count > 0 else []


@given(
    data=st.lists(
        st.sampled_from([b"a", b"bc", b"\n", b"\x00", b"{}\n", b"\x00" * 9]), max_size=60
    ).map(b"".join),
    count=st.integers(-1, 12),
    block=st.integers(1, 16),
)
def test_the_last_complete_lines_whatever_the_blocks(data: bytes, count: int, block: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "decisions.jsonl"
        path.write_bytes(data)
        assert tail_lines(path, count, block_bytes=block) == expected(data, count)


@given(
    data=st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\x00", b"{}\n"]), max_size=60).map(
        b"".join
    ),
    start=st.integers(0, 10),
)
def test_whole_lines_are_the_complete_lines_after_the_position(data: bytes, start: int) -> None:
    rest = data[start:]
    lines = rest[: rest.rfind(b"\n") + 1].splitlines(keepends=True)
    ends = [sum(map(len, lines[: n + 1])) for n in range(len(lines))]
    handle = io.BytesIO(data)
    handle.seek(start)
    assert list(whole_lines(handle)) == list(zip(lines, ends, strict=True))


def test_a_run_without_newlines_past_the_line_ceiling_is_passed_over() -> None:
    junk = b"\x00" * (LINE_MAX_BYTES + (3 << 20))
    got = list(whole_lines(io.BytesIO(b"a\n" + junk + b"b\nc\n" + junk)))
    lines = [line for line, _ in got if line]
    # the line the junk ran into is its last part and that line: garbled, as it was
    assert lines[0] == b"a\n" and lines[1].endswith(b"\x00b\n") and lines[2:] == [b"c\n"]
    assert all(len(line) <= LINE_MAX_BYTES for line, _ in got)
    assert [end for line, end in got if line == b"c\n"] == [len(b"a\n" + junk + b"b\nc\n")]
