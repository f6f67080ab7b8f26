"""``state.segments.tail_lines`` against the plain reading of a file's complete lines, for any
bytes, count and block size: reading from the end in blocks gives the same last lines."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from state.segments import tail_lines


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
