"""Count ``os.fsync`` calls (and still make them) to tell a durable write from one that is not."""

from __future__ import annotations

import os

import pytest


def count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The file descriptors fsynced from now on, in order, for the rest of the test."""
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    return synced
