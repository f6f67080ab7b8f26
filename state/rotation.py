"""Rotation of a JSON-lines journal: by UTC day and by size, closed segments gzipped, old ones
deleted by count or age.

The live file keeps its name (``decisions.jsonl``: people tail it); a closed segment is renamed to
``decisions.<YYYYMMDDTHHMMSSZ>[-N].jsonl`` (the instant it was closed, on the journal's clock) and
then gzipped to ``.jsonl.gz`` (``state.segments`` reads them back in order).

Crash safety, step by step (the failpoints name the cuts the tests make):
- the rename is atomic, so every line is in exactly one file at every instant; a crash before the
  new live file exists leaves only the rotated one (the next open creates the live file);
- gzip writes ``<segment>.gz.tmp``, fsyncs it, renames it to ``.gz``, and only then deletes the
  plain segment; a crash in between leaves both, and readers take the plain one (never both);
- opening the journal finishes what a crash left: stale ``.gz.tmp`` removed, a plain segment whose
  ``.gz`` exists removed, one without compressed.
"""

from __future__ import annotations

import gzip
import logging
import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from core.clock import DAY_MS
from state.atomic import fsync_dir
from state.segments import SEGMENT_MAX_BYTES, rotated_pattern

log = logging.getLogger(__name__)

_GZ_TMP: Final = ".gz.tmp"
_COPY_CHUNK_BYTES: Final = 1 << 20


class JournalRotationConfig(BaseModel):
    """``[journal]``: how ``decisions.jsonl`` is rotated and how long closed segments are kept.

    Defaults: a segment per UTC day (one file per day is how people look back, and a day of the
    simulator's decisions is ~1 MB), capped at 64 MiB (a runaway day, e.g. a fast simulator run,
    still gives segments gzip handles in about a second on one core), and nothing deleted:
    gzipped, a day's journal is ~10x smaller, and the journal is the audit trail the report,
    the API and the learner's review read. Set ``keep_segments`` or ``keep_days`` to prune.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rotate_daily: bool = True
    #: rotate before a line would take the live file past this size; None: no size limit. At
    #: most SEGMENT_MAX_BYTES: the journal's tail readers refuse a segment inflating past it
    max_segment_bytes: int | None = Field(64 * 1024 * 1024, gt=0, le=SEGMENT_MAX_BYTES)
    compress: bool = True
    #: keep at most this many closed segments (the live file is not counted); None: no limit
    keep_segments: int | None = Field(None, ge=1)
    #: delete closed segments closed more than this many days ago (journal clock); None: never
    keep_days: float | None = Field(None, gt=0)

    @property
    def enabled(self) -> bool:
        return self.rotate_daily or self.max_segment_bytes is not None


def stamp_label(now_ms: int) -> str:
    """``20250301T000512Z``: the segment's close instant, UTC, fixed width so names sort."""
    return datetime.fromtimestamp(now_ms // 1000, tz=UTC).strftime("%Y%m%dT%H%M%SZ")


def rotated_name(live: Path, now_ms: int) -> Path:
    """The unused name a segment of ``live`` closed at ``now_ms`` gets (``-2``... if taken)."""
    stem, suffix = live.name.split(".", 1) if "." in live.name else (live.name, "")
    base = f"{stem}.{stamp_label(now_ms)}"

    def taken(name: str) -> bool:
        return any(live.with_name(name + end).exists() for end in ("", ".gz", _GZ_TMP))

    candidate, counter = f"{base}.{suffix}", 2
    while taken(candidate):
        candidate = f"{base}-{counter}.{suffix}"
        counter += 1
    return live.with_name(candidate)


def compress_segment(plain: Path, hit: Callable[[str], None] = lambda _name: None) -> Path:
    """Gzip a closed segment to ``<plain>.gz`` and delete ``plain``; the ``.gz`` path.

    Deterministic bytes (no name or time in the gzip header), so two equal runs give equal files.
    """
    final = plain.with_name(plain.name + ".gz")
    tmp = plain.with_name(plain.name + _GZ_TMP)
    # made afresh ("x": O_EXCL): a link to no file left at this predictable name was followed,
    # and the gzip created the file it named; a stale one (or that link) is removed first
    tmp.unlink(missing_ok=True)
    with plain.open("rb") as source, tmp.open("xb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed:
            shutil.copyfileobj(source, packed, _COPY_CHUNK_BYTES)
        raw.flush()
        os.fsync(raw.fileno())
    hit("journal_mid_compression")
    os.replace(tmp, final)
    fsync_dir(plain.parent)
    hit("journal_after_compression")
    plain.unlink()
    fsync_dir(plain.parent)
    return final


def finish_interrupted(live: Path, compress: bool) -> list[Path]:
    """Complete what a crash during rotation left beside ``live``; the segments compressed."""
    if not live.parent.is_dir():
        return []
    pattern = rotated_pattern(live)
    changed = False
    for entry in live.parent.iterdir():
        if entry.name.endswith(_GZ_TMP) and pattern.match(entry.name[: -len(".tmp")]):
            entry.unlink()  # an unfinished gzip: the plain segment beside it is whole
            changed = True
    compressed: list[Path] = []
    for entry in sorted(live.parent.iterdir()):
        if not pattern.match(entry.name) or entry.name.endswith(".gz"):
            continue
        packed = entry.with_name(entry.name + ".gz")
        if packed.exists():  # the .gz was renamed into place (fsync'd before): the plain copy goes
            entry.unlink()
            changed = True
        elif compress:
            compressed.append(compress_segment(entry))
    if changed:
        fsync_dir(live.parent)
    return compressed


def prune(live: Path, config: JournalRotationConfig, now_ms: int) -> list[Path]:
    """Delete the closed segments the retention settings no longer keep; the paths deleted."""
    if config.keep_segments is None and config.keep_days is None:
        return []
    pattern = rotated_pattern(live)
    closed: list[tuple[str, Path]] = []
    for entry in live.parent.iterdir():
        match = pattern.match(entry.name)
        if match is not None:
            closed.append((match.group(1), entry))
    closed.sort()
    doomed: list[Path] = []
    if config.keep_segments is not None and len(closed) > config.keep_segments:
        doomed += [path for _, path in closed[: len(closed) - config.keep_segments]]
    if config.keep_days is not None:
        cutoff_ms = now_ms - int(config.keep_days * DAY_MS)
        doomed += [path for stamp, path in closed if _stamp_ms(stamp) < cutoff_ms]
    deleted = sorted(set(doomed))
    for path in deleted:
        path.unlink(missing_ok=True)
    if deleted:
        fsync_dir(live.parent)
        log.info("journal retention deleted %d segment(s) of %s", len(deleted), live.name)
    return deleted


def _stamp_ms(stamp: str) -> int:
    instant = datetime.strptime(stamp.split("-", 1)[0], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    return int(instant.timestamp() * 1000)


class RotationDue:
    """When the live file is due a new segment: a line of a new UTC day, or one past the size."""

    def __init__(self, config: JournalRotationConfig, first_line_ms: int | None) -> None:
        self._config = config
        self._day: int | None = None if first_line_ms is None else first_line_ms // DAY_MS

    def check(self, size_bytes: int, line_bytes: int, now_ms: int) -> bool:
        """Whether to rotate before writing a ``line_bytes`` line at ``now_ms`` (then noted)."""
        day = now_ms // DAY_MS
        due = size_bytes > 0 and (
            (self._config.rotate_daily and self._day is not None and day > self._day)
            or (
                self._config.max_segment_bytes is not None
                and size_bytes + line_bytes > self._config.max_segment_bytes
            )
        )
        if due or self._day is None or size_bytes == 0:
            self._day = day
        return due


__all__ = [
    "JournalRotationConfig",
    "RotationDue",
    "compress_segment",
    "finish_interrupted",
    "prune",
    "rotated_name",
    "stamp_label",
]
