"""``state.segments.open_segment``'s lines: a healthy segment's are those ``splitlines`` gives
(plain or gzipped, a torn tail included), and a run past ``LINE_MAX_BYTES`` without a newline is
passed over as it is read instead of being held whole."""

from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

import pytest
from fakes.allocation_peak import allocation_peak
from hypothesis import given
from hypothesis import strategies as st

from state.records import JournalLineError, JournalReader
from state.segments import LINE_MAX_BYTES, OVERLONG_LINE, open_segment


@given(
    data=st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\x00", b"{}\n", b"\r"]), max_size=60).map(
        b"".join
    ),
    gz=st.booleans(),
)
def test_a_healthy_segment_yields_what_splitlines_gives(data: bytes, gz: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / ("decisions.jsonl.gz" if gz else "decisions.jsonl")
        path.write_bytes(gzip.compress(data) if gz else data)
        expected = [line + b"\n" for line in data.split(b"\n")]
        expected[-1] = expected[-1][:-1]
        assert list(open_segment(path)) == [line for line in expected if line]


@pytest.mark.parametrize("gz", [False, True])
def test_a_run_past_the_line_ceiling_is_one_line_that_is_no_record(
    tmp_path: Path, gz: bool
) -> None:
    """Iterated, the run was one line held whole (512 MB of zeros: 512 MB, then 1 GB at the
    join); the reader after it stopped at none of the lines that follow it."""
    junk = b"\x00" * (LINE_MAX_BYTES + (3 << 20))
    data = b"{}\n" + junk + b"b\n{}\n" + junk
    path = tmp_path / ("decisions.jsonl.gz" if gz else "decisions.jsonl")
    path.write_bytes(gzip.compress(data) if gz else data)
    with allocation_peak() as allocated:
        lines = list(open_segment(path))
    assert lines == [b"{}\n", OVERLONG_LINE + b"\n", b"{}\n", OVERLONG_LINE]
    assert allocated.peak_bytes < 3 * LINE_MAX_BYTES
    with pytest.raises(JournalLineError) as caught:  # named, as any garbled line
        list(JournalReader(path))
    assert caught.value.number == 2
