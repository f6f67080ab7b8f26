"""The peak of what Python allocated, traced by ``tracemalloc`` from any thread, between a
block's enter and its exit, in bytes. Tests of hostile input use it: a huge (often sparse) file
or stream must be refused, or read in bounded pieces, without being read whole, and a bound on
this peak says so whatever the machine's speed or free memory."""

from __future__ import annotations

import contextlib
import tracemalloc
from collections.abc import Iterator


class AllocationPeak:
    """Known once its block has exited (also by an exception): read inside, it fails the test."""

    def __init__(self) -> None:
        self._peak_bytes: int | None = None

    @property
    def peak_bytes(self) -> int:
        if self._peak_bytes is None:
            raise AssertionError("the peak is read after the measured block exits, not inside it")
        return self._peak_bytes

    def _record(self, peak_bytes: int) -> None:
        self._peak_bytes = peak_bytes


@contextlib.contextmanager
def allocation_peak() -> Iterator[AllocationPeak]:
    measured = AllocationPeak()
    tracemalloc.start()
    try:
        yield measured
    finally:
        measured._record(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()


__all__ = ["AllocationPeak", "allocation_peak"]
