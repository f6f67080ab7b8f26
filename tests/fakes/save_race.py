"""A save of a file landing at a fixed step of vigil's write of it (no threads, no sleeps): after
the writer read the file and wrote its temporary file (``state.atomic._write_durable_tmp``), as a
person's editor or another command saving in between would."""

from __future__ import annotations

from pathlib import Path

import pytest

import state.atomic


def save_after_tmp_written(monkeypatch: pytest.MonkeyPatch, path: Path, save: bytes) -> list[bytes]:
    """Writes ``save`` over ``path`` in place, once, at the first temporary file written for it;
    the list holds it once it landed."""
    real = state.atomic._write_durable_tmp
    landed: list[bytes] = []

    def step(target: Path, data: bytes, *, durable: bool = True) -> tuple[Path, object]:
        if target == path and not landed:
            path.write_bytes(save)  # in place, as many editors save
            landed.append(save)
        return real(target, data, durable=durable)

    monkeypatch.setattr(state.atomic, "_write_durable_tmp", step)
    return landed
