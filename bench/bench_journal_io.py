"""Journal appends with fsync: inline on the event loop (what vigil does), in a worker thread, and
through aiofiles. Prints the wall time per append and how long the event loop was blocked (the
worst delay of a 1 ms ticker task running beside the appends), so the three can be compared in one
run on one disk.

``python -m bench journal_io``
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiofiles
import aiofiles.os

LINE = b'{"type":"decision","payload":"' + b"x" * 6000 + b'"}\n'  # a typical 6 kB line
APPENDS = 200


def _sync_append(fd: int) -> None:
    os.write(fd, LINE)
    os.fsync(fd)


async def _inline(fd: int) -> None:
    _sync_append(fd)


async def _thread(fd: int) -> None:
    await asyncio.to_thread(_sync_append, fd)


async def _aiofiles(path: Path) -> Callable[[], Awaitable[None]]:
    handle = await aiofiles.open(path, "ab", buffering=0)

    async def append() -> None:
        await handle.write(LINE)
        await aiofiles.os.wrap(os.fsync)(handle.fileno())

    return append


async def _measure(name: str, append: Callable[[], Awaitable[None]]) -> None:
    worst_lag = 0.0
    stop = False

    async def ticker() -> None:
        nonlocal worst_lag
        while not stop:
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            worst_lag = max(worst_lag, time.perf_counter() - before - 0.001)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    times = []
    for _ in range(APPENDS):
        started = time.perf_counter()
        await append()
        times.append(time.perf_counter() - started)
    stop = True
    await task
    print(
        f"{name:>9}: median {statistics.median(times) * 1e3:.3f} ms, "
        f"p95 {sorted(times)[int(APPENDS * 0.95)] * 1e3:.3f} ms per append; "
        f"event loop blocked up to {worst_lag * 1e3:.3f} ms"
    )


async def _run() -> None:
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as folder:
        base = Path(folder)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        fd = os.open(base / "inline.jsonl", flags, 0o644)
        await _measure("inline", lambda: _inline(fd))
        os.close(fd)
        fd = os.open(base / "thread.jsonl", flags, 0o644)
        await _measure("thread", lambda: _thread(fd))
        os.close(fd)
        await _measure("aiofiles", await _aiofiles(base / "aiofiles.jsonl"))


def main() -> None:
    asyncio.run(_run())


if __name__ == "__main__":
    main()
