"""``recent_lines`` reads a gzipped segment as a stream keeping only its tail (a listed segment
was a gzip bomb's way to exhaust memory): the same lines as listing the whole segment and taking
the newest ``max_bytes`` of them, the line that ``max_bytes`` starts in included."""

from __future__ import annotations

import gzip
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from state.segments import LINE_MAX_BYTES, recent_lines


def _listed(lines: list[bytes], max_bytes: int) -> list[bytes]:
    """What listing the whole segment gave (the reader before the stream)."""
    found, taken = [], 0
    for line in reversed(lines):
        if taken >= max_bytes:
            break
        found.append(line)
        taken += len(line)
    return found[::-1]


def _gz_journal(folder: Path, lines: list[bytes]) -> Path:
    live = folder / "decisions.jsonl"
    (folder / "decisions.20250301T000000Z.jsonl.gz").write_bytes(gzip.compress(b"".join(lines)))
    live.write_bytes(b"")  # as just after a rotation
    return live


_LINES = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"") + b"\n"), max_size=30)


@settings(deadline=None)
@given(lines=_LINES, max_bytes=st.integers(min_value=1, max_value=800))
def test_a_gz_segments_tail_is_the_newest_lines_of_the_whole(
    tmp_path_factory: object, lines: list[bytes], max_bytes: int
) -> None:
    folder = tmp_path_factory.mktemp("j")  # type: ignore[attr-defined]
    assert recent_lines(_gz_journal(folder, lines), max_bytes) == _listed(lines, max_bytes)


def test_a_segment_longer_than_the_kept_window_gives_the_same_tail(tmp_path: Path) -> None:
    line = b'{"at_ms": 1, "pad": "' + b"x" * 4000 + b'"}\n'
    lines = [line.replace(b"1", str(n).encode(), 1) for n in range(LINE_MAX_BYTES // 4000 + 64)]
    live = _gz_journal(tmp_path, lines)
    for max_bytes in (1, 4096, 4097, 1 << 20):
        assert recent_lines(live, max_bytes) == _listed(lines, max_bytes)
