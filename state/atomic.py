"""Crash-safe whole-file replacement, for any small file the daemon rewrites (state, learner model).

``atomic_write_bytes`` writes a temporary file beside the target, makes it durable, then renames it
over the target and makes the rename durable. A crash at any point leaves either the complete old
file or the complete new one, never a mix; at worst a stale temporary file is left behind, which
``remove_stale_tmp_files`` deletes on the next start (readers only ever open the target itself).

``atomic_swap_bytes`` does the same with an atomic exchange (Linux ``renameat2(RENAME_EXCHANGE)``)
and returns exactly what the target held at that instant, so a file that someone else may also be
writing (a person editing ``runner_state.json``) is never replaced without the caller seeing what
it replaced.

``replace_if_holds`` builds on both for such a file: it writes only if the file still holds the
bytes the caller's new content was made from (``ChangedWhileSavingError`` otherwise, nothing
written), by exchange where there is one, else by a check right before a plain rename. The state
store (``state.state_file``) and the MEMORY.md write-back (``state.merge_write``) share it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.regular_file import not_a_regular_file, read_bytes_or_none

#: temporary files are ``.<target name>.<random hex>.tmp`` in the target's directory
_TMP_PREFIX = "."
_TMP_SUFFIX = ".tmp"
_TMP_RANDOM_HEX_CHARS = 16


def tmp_path_for(path: Path) -> Path:
    """A fresh temporary path beside ``path`` (same directory, so the rename stays atomic)."""
    token = secrets.token_hex(_TMP_RANDOM_HEX_CHARS // 2)
    return path.with_name(f"{_TMP_PREFIX}{path.name}.{token}{_TMP_SUFFIX}")


def is_tmp_file_of(candidate: Path, path: Path) -> bool:
    """True when ``candidate`` is named like a temporary file made for ``path``."""
    name = candidate.name
    head = f"{_TMP_PREFIX}{path.name}."
    if not (name.startswith(head) and name.endswith(_TMP_SUFFIX)):
        return False
    token = name[len(head) : -len(_TMP_SUFFIX)]
    return len(token) == _TMP_RANDOM_HEX_CHARS and all(c in "0123456789abcdef" for c in token)


def atomic_write_bytes(
    path: Path | str,
    data: bytes,
    *,
    before_replace: Callable[[Path], None] | None = None,
    durable: bool = True,
) -> os.stat_result:
    """Replace ``path`` with ``data`` so that a crash never leaves a partial file.

    Steps: write a temporary file in the same directory, fsync it, rename it over ``path``, fsync
    the directory so the rename itself survives a power loss. A new file gets the usual mode
    (0o666 minus umask); an existing file keeps its mode, so a person's permissions survive.

    ``before_replace(tmp_path)`` runs after the data is durable and just before the rename; if it
    raises, the temporary file is removed, ``path`` is untouched and the exception propagates (the
    state store uses this to notice a person's edit that landed while it was writing).

    ``durable=False`` (a replay: rerun, never recovered) skips both fsyncs: the same bytes, still
    a temporary file renamed into place, so a reader never sees a partial file; only a power loss
    may lose the newest write.

    Returns the stat of the written file (same inode, size and mtime the target now has).
    """
    target = Path(path)
    tmp, written = _write_durable_tmp(target, data, durable=durable)
    try:
        if before_replace is not None:
            before_replace(tmp)
        if durable:
            os.replace(tmp, target)
        else:
            _replace_unflushed(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    if durable:
        fsync_dir(target.parent)
    return written


def _replace_unflushed(tmp: Path, target: Path) -> None:
    """``os.replace`` without the flush ext4 (``auto_da_alloc``) starts when a file is renamed over
    another, which made a non-durable write about 2 ms instead of 70 us: exchange the two names,
    then delete the old file, now under the temporary name (a crash in between leaves it for
    ``remove_stale_tmp_files``). Readers see the old file or the new one, as with a rename."""
    try:
        _renameat2(tmp, target, _RENAME_EXCHANGE)
    except (FileNotFoundError, SwapUnsupportedError):  # no target yet, or no exchange here
        os.replace(tmp, target)
        return
    if stat.S_ISDIR(os.lstat(tmp).st_mode):  # a folder was exchanged out: os.replace refuses it
        _renameat2(tmp, target, _RENAME_EXCHANGE)
        tmp.unlink()
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(target))
    tmp.unlink()


class SwapUnsupportedError(OSError):
    """This system or file system cannot exchange two paths atomically; use atomic_write_bytes."""


def atomic_swap_bytes(
    path: Path | str,
    data: bytes,
    *,
    durable: bool = True,
    before_replace: Callable[[Path], None] | None = None,
) -> tuple[os.stat_result, bytes | None]:
    """Atomically put ``data`` at ``path`` and return what ``path`` held at that very instant.

    Same durability as ``atomic_write_bytes``; the difference is that the old file is exchanged
    out rather than unlinked by the rename, then read and deleted, so a write by someone else that
    landed just before is seen by the caller instead of vanishing. Returns the written file's stat
    and the previous bytes (None when there was no file). Raises ``SwapUnsupportedError`` (nothing
    changed) where the exchange is not available: non-Linux, old kernels, some network file
    systems. A crash between the exchange and the delete leaves the old bytes under the
    temporary name, which ``remove_stale_tmp_files`` deletes at the next start. ``durable`` and
    ``before_replace`` as in ``atomic_write_bytes``.
    """
    target = Path(path)
    tmp, written = _write_durable_tmp(target, data, durable=durable)
    if before_replace is not None:
        try:
            before_replace(tmp)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
    previous = _swap_into_place(tmp, target)
    if durable:
        fsync_dir(target.parent)
    return written, previous


def _swap_into_place(tmp: Path, target: Path) -> bytes | None:
    try:
        while True:
            try:
                _renameat2(tmp, target, _RENAME_EXCHANGE)
                break
            except FileNotFoundError:
                try:  # no target: create it, but never over one that appeared meanwhile
                    _renameat2(tmp, target, _RENAME_NOREPLACE)
                    return None
                except FileExistsError:
                    continue
    except BaseException:
        tmp.unlink()  # nothing was swapped: tmp still holds our data
        raise
    # tmp now names the previous file. Only a regular file is read: reading a FIFO swapped out
    # blocked for ever (the daemon's loop with it), and a folder was left under tmp's hidden
    # name; either is exchanged back, untouched, and named
    try:
        mode = os.stat(tmp).st_mode
    except OSError:
        if not os.path.islink(tmp):
            raise
        # a symlink that leads nowhere (dangling, a loop) held no bytes: our data is in place,
        # and raising here failed a save that had worked (the daemon halted, then took its own
        # state from before the halt for a person's edit and resumed)
        tmp.unlink()
        return None
    if not stat.S_ISREG(mode):
        _renameat2(tmp, target, _RENAME_EXCHANGE)
        tmp.unlink()
        raise not_a_regular_file(target, mode)
    previous = tmp.read_bytes()
    tmp.unlink()
    return previous


class ChangedWhileSavingError(Exception):
    """(``replace_if_holds``) The file no longer holds the bytes the new content was made from:
    nothing was written; read it again and decide again."""


def replace_if_holds(
    path: Path | str,
    data: bytes,
    expected: bytes | None,
    *,
    check_before_exchange: bool,
    durable: bool = True,
    exchange: bool = True,
    on_swap_unsupported: Callable[[SwapUnsupportedError], None] | None = None,
) -> tuple[os.stat_result, bytes | None]:
    """Put ``data`` at ``path`` unless someone else changed it from ``expected`` (None: no file).

    Returns the written file's stat and what ``data`` replaced. By exchange
    (``atomic_swap_bytes``) that is exactly what the file held at that instant, which differs
    from ``expected`` when a save landed meanwhile: the caller merges it in (or puts it back).
    ``check_before_exchange`` also checks right before the exchange, so only a save landing in
    the microseconds between that check and the exchange is replaced; without it any save since
    ``expected`` was read is. Without an exchange (``exchange=False``, or ``SwapUnsupportedError``,
    handed to ``on_swap_unsupported`` first) a plain rename follows the check and ``expected`` is
    returned, as checked: a save landing in the microseconds between is lost.

    A check compares bytes, not the stat: file times are coarse (a same-size save within one tick
    keeps the stamp), and a save of the very same bytes loses nothing when it is replaced. When it
    finds other bytes: ``ChangedWhileSavingError``, ``path`` untouched, no temporary file left.
    ``durable`` as in ``atomic_write_bytes``; the check reads with ``read_bytes_or_none``.
    """
    target = Path(path)
    check = functools.partial(_ensure_holds, target, expected)
    if exchange:
        try:
            hook = check if check_before_exchange else None
            return atomic_swap_bytes(target, data, durable=durable, before_replace=hook)
        except SwapUnsupportedError as exc:  # nothing changed: rename instead
            if on_swap_unsupported is not None:
                on_swap_unsupported(exc)
    written = atomic_write_bytes(target, data, before_replace=check, durable=durable)
    return written, expected


def _ensure_holds(path: Path, expected: bytes | None, _tmp: Path) -> None:
    if read_bytes_or_none(path) != expected:
        raise ChangedWhileSavingError(f"{path} changed while it was being written")


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_UNSUPPORTED_ERRNOS = frozenset({errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP})


@functools.cache
def _libc_renameat2() -> Any:
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    function.restype = ctypes.c_int
    return function


def _renameat2(src: Path, dst: Path, flags: int) -> None:
    function = _libc_renameat2()
    if function is None:
        raise SwapUnsupportedError(errno.ENOSYS, "renameat2 is not available", str(src))
    if function(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return
    code = ctypes.get_errno()
    if code in _UNSUPPORTED_ERRNOS:
        raise SwapUnsupportedError(code, os.strerror(code), str(src), None, str(dst))
    raise OSError(code, os.strerror(code), str(src), None, str(dst))


def fsync_dir(directory: Path) -> None:
    """Make renames, creations and deletions in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_stale_tmp_files(path: Path | str) -> list[Path]:
    """Delete temporary files a crashed ``atomic_write_bytes(path, ...)`` left behind.

    Call it at startup, before anything writes ``path``: a writer that is still running would lose
    its temporary file. Returns the removed paths so the caller can log them.
    """
    target = Path(path)
    removed: list[Path] = []
    try:
        candidates = list(target.parent.iterdir())
    except FileNotFoundError:
        return removed
    for candidate in candidates:
        if is_tmp_file_of(candidate, target) and candidate.is_file():
            with contextlib.suppress(FileNotFoundError):
                candidate.unlink()
                removed.append(candidate)
    return removed


def overwrite_bytes(path: Path | str, data: bytes) -> None:
    """Replace ``path``'s content with ``data``, not atomically and not durably (for files a
    crash may tear: the reader drops a torn one). Written over the old bytes and cut to length
    rather than opened with ``O_TRUNC``: ext4 (``auto_da_alloc``) flushes a truncated file's new
    blocks at close, about 100 us a write against 10 us this way; the bytes left are the same.

    Opened without blocking (a regular file ignores the flag): a FIFO in the file's place
    blocked the open until a reader came, on the caller's event loop. Now it is an ``OSError``
    (ENXIO with no reader; with one, ``ftruncate``'s EINVAL, or EAGAIN once its pipe is full).
    A symlink there is one too (ELOOP): followed, the write landed on whatever it named."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW
    fd = os.open(path, flags, 0o666)
    try:
        _write_all(fd, data)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def _write_durable_tmp(
    target: Path, data: bytes, *, durable: bool = True
) -> tuple[Path, os.stat_result]:
    tmp = tmp_path_for(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        try:
            _keep_mode_of(target, fd)
            _write_all(fd, data)
            if durable:
                os.fsync(fd)
            written = os.fstat(fd)
        finally:
            os.close(fd)
    except BaseException:
        tmp.unlink()
        raise
    return tmp, written


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _keep_mode_of(target: Path, fd: int) -> None:
    try:
        mode = os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        return
    except OSError:
        if os.path.islink(target):  # a link in a loop: no mode to keep, and it is replaced
            return
        raise
    os.fchmod(fd, mode)
