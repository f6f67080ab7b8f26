"""Rewriting a file a person also edits (``MEMORY.md``) so that none of their saves is lost.

``merge_write(path, merge)`` reads the file and puts ``merge(what it read)`` in its place. A save
by someone else landing between that read and the replace would be overwritten by a merge of the
older text. An advisory lock (``fcntl.flock``) cannot prevent that: a person's editor never takes
it. So the write checks instead, and merges again into what it finds (``state.atomic``'s
``replace_if_holds``, shared with ``state.state_file``):

- just before the replace, the file must still hold the bytes the merge was made from; if not,
  nothing is written and the change is merged again into a fresh read. The bytes, not the stat:
  file times are coarse (a same-size save within one tick keeps the stamp), and a save of the
  very same bytes loses nothing when it is replaced;
- the replace is an atomic exchange, which hands back exactly what it replaced, so a save
  landing in the microseconds between that check and the exchange is caught too: the change is
  merged into it at once (the file holds the merge of the older text for only that long). Where
  the file system cannot exchange files, a plain rename follows the check; only a save landing
  in those microseconds could be lost there (as with ``state.state_file``).

A conflict needs a save landing within one attempt's few milliseconds, so a person saving seconds
apart never sees the attempts run out. If ``MERGE_ATTEMPTS`` conflicts come in a row, the change
is not written (``MergeConflictError``) and the other writer's latest save is left in place.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

from core.regular_file import read_bytes_or_none
from state.atomic import ChangedWhileSavingError, SwapUnsupportedError, replace_if_holds

log = logging.getLogger(__name__)

#: conflicts (someone else's save landing during one attempt) met before the change is given up
MERGE_ATTEMPTS: Final = 5


class MergeConflictError(Exception):
    """The file kept changing while it was written: the change was not written (the other
    writer's latest save is in place)."""


def merge_write(
    path: Path,
    merge: Callable[[bytes | None], bytes],
    *,
    durable: bool = True,
    max_bytes: int | None = None,
) -> None:
    """Put ``merge(current)`` at ``path`` (``current``: its bytes, None when there is no file),
    merging again into any save someone else made meanwhile. What ``merge`` raises propagates
    with the file as that writer left it; ``OSError`` when the file cannot be read or written.
    A link is written through: replaced, it became a copy, and the file a person keeps elsewhere
    (a repository of notes) stopped getting what was written, and being read. ``max_bytes``:
    the most a read of the file takes (``FileTooLargeError`` past it, nothing written)."""
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    on_disk = read_bytes_or_none(
        path, max_bytes=max_bytes
    )  # what the file holds, as far as this write knows
    base = on_disk  # the other writer's latest save: what the change is merged into
    for _ in range(MERGE_ATTEMPTS):
        try:
            data = merge(base)
        except BaseException:
            _put_back(path, base, on_disk, durable=durable)
            raise
        try:
            replaced = _replace_if_holds(path, data, on_disk, durable=durable)
        except ChangedWhileSavingError:  # a save since the read; nothing written
            on_disk = base = read_bytes_or_none(path, max_bytes=max_bytes)
            continue
        if replaced == on_disk:
            return
        # a save landed between the check and the exchange: the file holds our merge of the
        # older text, theirs is in hand; merge into theirs
        on_disk, base = data, replaced
    _put_back(path, base, on_disk, durable=durable)
    raise MergeConflictError(
        f"{path} kept changing while it was written ({MERGE_ATTEMPTS} saves by someone else)"
    )


def _put_back(path: Path, held: bytes | None, on_disk: bytes | None, *, durable: bool) -> None:
    """Put ``held``, a save our exchange replaced, back as it was (nothing to do when the file
    holds it). A file deleted meanwhile (``held`` None) is left as our write made it: a deletion
    takes no one's words."""
    for _ in range(MERGE_ATTEMPTS):
        if held is None or held == on_disk:
            return
        try:
            replaced = _replace_if_holds(path, held, on_disk, durable=durable)
        except ChangedWhileSavingError:  # saved again since: that newer save is in place
            return
        if replaced == on_disk:
            return
        on_disk, held = held, replaced
    log.error("%s: a save replaced while it kept changing could not be put back", path)


#: folders whose file system cannot exchange two files (some network file systems): the exchange
#: is tried once per folder, then a check and a plain rename, as ``state.state_file`` does. Each
#: write used to try it again: a durable temporary file written, fsynced and deleted for nothing.
_NO_EXCHANGE: set[Path] = set()


def _replace_if_holds(
    path: Path, data: bytes, expected: bytes | None, *, durable: bool
) -> bytes | None:
    """``replace_if_holds``, checked before the exchange too; what ``data`` replaced."""
    folder = path.parent
    return replace_if_holds(
        path,
        data,
        expected,
        check_before_exchange=True,
        durable=durable,
        exchange=folder not in _NO_EXCHANGE,
        on_swap_unsupported=functools.partial(_stop_exchanging, folder),
    )[1]


def _stop_exchanging(folder: Path, exc: SwapUnsupportedError) -> None:
    _NO_EXCHANGE.add(folder)
    log.warning(
        "cannot swap files atomically in %s (%s): merged writes fall back to check-then-rename, "
        "where a save landing in the microseconds between can be lost",
        folder,
        exc,
    )


__all__ = ["MERGE_ATTEMPTS", "MergeConflictError", "merge_write"]
