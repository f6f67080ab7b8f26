"""A journal as segments: the live file (``decisions.jsonl``) and the rotated ones beside it
(``decisions.<YYYYMMDD>T<HHMMSS>Z.jsonl``, gzipped to ``.jsonl.gz`` once closed), oldest first.

Every reader of the decisions journal (report, prompt, API, replay compare) goes through
``segments`` / ``iter_lines`` so a rotated journal reads as one. Segment names sort in time order
because their stamp is the instant the segment was closed (UTC, fixed width).
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

from core.regular_file import blocks_within, open_regular_file

#: ``decisions.20250301T000000Z.jsonl`` or ``....jsonl.gz``; an optional ``-N`` for two in a second
_STAMP: Final = r"(\d{8}T\d{6}Z(?:-\d+)?)"
#: a plain segment's read buffer: a decision line is ~16 kB, and iterating lines through the
#: default 8 kB buffer grows and copies each one piecewise (a year's 1 GB journal: 0.51 -> 0.08 s)
_READ_BUFFER: Final = 1 << 20
#: far past any journal line (a decision's is ~16 kB): a longer run without a newline is no line
LINE_MAX_BYTES: Final = 16 << 20
#: the most a gzipped segment is inflated by a reader of its tail: 4x the rotation's default size
#: cap (64 MiB), and ``max_segment_bytes`` may not be set past it; more is no segment this
#: journal wrote (a gzip bomb: a small file that inflates to gigabytes)
SEGMENT_MAX_BYTES: Final = 256 << 20


def rotated_pattern(live: Path) -> re.Pattern[str]:
    stem, suffix = live.name.split(".", 1) if "." in live.name else (live.name, "")
    return re.compile(rf"^{re.escape(stem)}\.{_STAMP}\.{re.escape(suffix)}(\.gz)?$")


def segments(live: Path) -> list[Path]:
    """The rotated segments of ``live`` (oldest first), then ``live`` itself if it exists."""
    pattern = rotated_pattern(live)
    found: list[tuple[str, Path]] = []
    if live.parent.is_dir():
        for entry in live.parent.iterdir():
            match = pattern.match(entry.name)
            if match is not None:
                # a segment both plain and gzipped (a crash mid-compression): the plain one is whole
                found.append((match.group(1), entry))
    found.sort(key=lambda item: (item[0], item[1].name.endswith(".gz")))
    ordered: list[Path] = []
    seen: set[str] = set()
    for stamp, path in found:
        if stamp not in seen:
            seen.add(stamp)
            ordered.append(path)
    if live.exists():
        ordered.append(live)
    return ordered


class UnreadableSegmentError(OSError):
    """A segment that cannot be read to its end; the message names it and says why."""


def open_segment(path: Path) -> Iterator[bytes]:
    """The lines of one segment (gzipped or not), with their newlines. ``UnreadableSegmentError``
    when it cannot be read: gzip's EOFError of a cut-short file and zlib's error of a garbled one
    name neither the file nor an OSError a reader would catch. Only a regular file is opened: a
    FIFO in place of one blocked its reader until someone wrote to it. A line longer than
    ``LINE_MAX_BYTES`` is passed over as it is read (``_bounded_lines``)."""
    try:
        if path.name.endswith(".gz"):
            with open_regular_file(path) as raw, gzip.open(raw, "rb") as lines:
                yield from _bounded_lines(lines)
        else:
            with open_regular_file(path, buffering=_READ_BUFFER) as lines:
                yield from _bounded_lines(lines)
    except (OSError, EOFError, zlib.error) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UnreadableSegmentError(f"{path} cannot be read: {why}") from exc


#: what stands for a line past ``LINE_MAX_BYTES``: not JSON and not blank, so a reader skips it
#: or names it as it would any garbled line, and the lines after it keep their numbers
OVERLONG_LINE: Final = b"\x00"


def _bounded_lines(stream: BinaryIO | gzip.GzipFile) -> Iterator[bytes]:
    """``stream``'s lines, as iterating it gives them, except that a run of ``LINE_MAX_BYTES``
    without a newline (the zeros a crash can leave: the file extended, not written) is passed
    over as it is read and yielded as ``OVERLONG_LINE`` (with the newline that ends it, if one
    does). Iterated, such a run was held whole: 512 MB of zeros, a 512 MB line."""
    while line := stream.readline(LINE_MAX_BYTES):
        if len(line) < LINE_MAX_BYTES or line.endswith(b"\n"):
            yield line
            continue
        while (rest := stream.readline(LINE_MAX_BYTES)) and not rest.endswith(b"\n"):
            pass
        yield OVERLONG_LINE + (b"\n" if rest else b"")


def open_live(path: Path) -> BinaryIO | None:
    """An uncompressed segment opened for reading, None when there is none. A FIFO in its place
    blocked a plain open until someone wrote to it (the API's status did so on the event loop,
    freezing every route): anything but a regular file is ``UnreadableSegmentError``."""
    try:
        return open_regular_file(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnreadableSegmentError(f"{path} cannot be read: {exc.strerror or exc}") from exc


def whole_lines(handle: BinaryIO) -> Iterator[tuple[bytes, int]]:
    """The complete lines from ``handle``'s position on (with their newlines), each with how far
    past that position it ends, read in blocks. What follows the last newline (a line being
    written) is not yielded; a run of ``LINE_MAX_BYTES`` without a newline (the zeros a crash can
    leave) is passed over as it is read, yielded as an empty line, never held whole."""
    consumed, pending, pending_bytes = 0, list[bytes](), 0
    while block := handle.read(_READ_BUFFER):
        cut = block.rfind(b"\n") + 1
        if cut == 0:
            pending.append(block)
            pending_bytes += len(block)
            if pending_bytes > LINE_MAX_BYTES:
                consumed, pending, pending_bytes = consumed + pending_bytes, [], 0
                yield b"", consumed
            continue
        for line in b"".join([*pending, block[:cut]]).splitlines(keepends=True):
            consumed += len(line)
            yield line, consumed
        pending, pending_bytes = [block[cut:]], len(block) - cut


def iter_lines(live: Path) -> Iterator[bytes]:
    """Every line of every segment, oldest first. A torn last line of a closed segment cannot
    exist (rotation closes a segment after a whole line); the live file's torn tail is yielded
    without its newline, for the reader to skip."""
    for path in segments(live):
        yield from open_segment(path)


def tail_lines(path: Path, count: int, block_bytes: int = 64 * 1024) -> list[bytes]:
    """The last ``count`` complete lines of an uncompressed file, read from its end. What follows
    the last newline (a torn line, or the zeros a crash can leave at a file's end) is skipped as
    read, and each block is counted once: joining and counting all that was read at each step
    took time quadratic in a tail without newlines (64 MB of zeros: 81 s)."""
    if count <= 0:
        return []
    handle = open_live(path)
    if handle is None:
        return []
    blocks: list[bytes] = []
    newlines = 0
    with handle:
        pos = handle.seek(0, 2)
        while pos > 0 and newlines <= count:
            step = min(block_bytes, pos)
            pos -= step
            handle.seek(pos)
            block = handle.read(step)
            if not blocks:  # still after the last newline: not a line yet
                block = block[: block.rfind(b"\n") + 1]
                if not block:
                    continue
            blocks.append(block)
            newlines += block.count(b"\n")
    lines = b"".join(reversed(blocks)).splitlines(keepends=True)
    if pos > 0:
        lines = lines[1:]  # the first may be cut
    return lines[-count:]


def recent_lines(live: Path, max_bytes: int) -> list[bytes]:
    """The newest complete lines across segments, oldest first, about ``max_bytes`` of them (at
    least what the newest non-empty segment's tail gives): a rotation that just left the live
    file empty does not make the journal look empty to a reader of its recent past."""
    found: list[bytes] = []
    taken = 0
    for path in reversed(segments(live)):
        if path.name.endswith(".gz"):
            lines = _tail_gz_lines(path, max_bytes - taken)
        else:
            lines = _tail_bytes_lines(path, max_bytes - taken)
        for line in reversed(lines):
            if taken >= max_bytes:
                break
            found.append(line)
            taken += len(line)
        if taken >= max_bytes:
            break
    found.reverse()
    return found


def _tail_gz_lines(path: Path, max_bytes: int) -> list[bytes]:
    """The complete lines a gzipped segment ends with, read as a stream: those within its last
    ``max_bytes`` and the line that ``max_bytes`` starts in (the reader's "at least a line").
    Listing every line held ~40 bytes per inflated byte: a gzip bomb of short lines (a few
    hundred kB on disk) took gigabytes. One inflating past ``SEGMENT_MAX_BYTES`` is
    ``UnreadableSegmentError``."""
    keep = max_bytes + LINE_MAX_BYTES
    window = bytearray()
    inflated = 0
    try:
        with open_regular_file(path) as raw, gzip.open(raw, "rb") as stream:
            for block in blocks_within(stream, SEGMENT_MAX_BYTES, _READ_BUFFER):
                inflated += len(block)
                window += block
                del window[: max(0, len(window) - keep)]
    except (OSError, EOFError, zlib.error) as exc:  # past the bound: FileTooLargeError's why
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UnreadableSegmentError(f"{path} cannot be read: {why}") from exc
    end = window.rfind(b"\n") + 1
    start = window.rfind(b"\n", 0, max(0, end - max_bytes)) + 1
    if start == 0 and inflated > len(window):  # that line began before the window: cut
        start = window.find(b"\n", 0, end) + 1
    return [line + b"\n" for line in bytes(window[start:end]).split(b"\n")[:-1]]  # not at \r


def _tail_bytes_lines(path: Path, max_bytes: int) -> list[bytes]:
    """The complete lines within the last ``max_bytes`` of an uncompressed file."""
    handle = open_live(path)
    if handle is None:
        return []
    with handle:
        size = handle.seek(0, 2)
        start = max(0, size - max_bytes)
        handle.seek(start)
        data = handle.read()
    data = data[: data.rfind(b"\n") + 1]  # a torn tail is not a line yet
    lines = data.splitlines(keepends=True)
    return lines[1:] if start > 0 and lines else lines  # the first may be cut


__all__ = [
    "LINE_MAX_BYTES",
    "OVERLONG_LINE",
    "SEGMENT_MAX_BYTES",
    "UnreadableSegmentError",
    "iter_lines",
    "open_live",
    "open_segment",
    "recent_lines",
    "rotated_pattern",
    "segments",
    "tail_lines",
    "whole_lines",
]
