"""The regime fit cache's entries were written to ``<entry>.<pid>.tmp``, a name anyone who can
write the cache folder can foresee: a symlink planted there (dangling or not) was followed, the
fit pickled over the file it named (or a new one made where it pointed) and the link renamed in
as the entry; a FIFO held the replay until someone read it. An entry now goes to a fresh
temporary name made with ``O_EXCL`` and is renamed into place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fakes.fifo import outcome_beside_fifo, outcome_beside_fifo_writer

from regime.fit_cache import FitCache

_KEY = "ab" + "0" * 62
_VICTIM = b'{"cash": 10000}\n'
_FIT = {"states": [1.0, 2.0]}


def _planted_at(cache: FitCache) -> Path:
    folder = cache.folder / _KEY[:2]
    folder.mkdir(parents=True)
    return folder / f"{_KEY}.pickle.{os.getpid()}.tmp"


@pytest.mark.parametrize("dangling", [False, True])
def test_an_entry_is_never_written_through_a_planted_symlink(
    tmp_path: Path, dangling: bool
) -> None:
    victim = tmp_path / "runner_state.json"
    if not dangling:
        victim.write_bytes(_VICTIM)
    cache = FitCache(tmp_path / "cache")
    _planted_at(cache).symlink_to(victim)
    cache.store(_KEY, _FIT)
    assert (victim.read_bytes() if victim.exists() else None) == (None if dangling else _VICTIM)
    assert not (cache.folder / _KEY[:2] / f"{_KEY}.pickle").is_symlink()
    assert FitCache(cache.folder).load(_KEY) == _FIT


def test_a_fifo_at_the_old_temporary_name_does_not_hold_the_store(tmp_path: Path) -> None:
    cache = FitCache(tmp_path / "cache")
    fifo = _planted_at(cache)
    os.mkfifo(fifo)
    outcome = outcome_beside_fifo_writer(lambda: cache.store(_KEY, _FIT), fifo)
    assert outcome is None
    assert FitCache(cache.folder).load(_KEY) == _FIT


def test_a_fifo_at_an_entry_is_a_miss_not_a_wait(tmp_path: Path) -> None:
    """An entry was opened by name: a FIFO there held the fit (the replay's start) until someone
    wrote to it. It is now an unreadable entry, fitted again and stored over it."""
    cache = FitCache(tmp_path / "cache")
    entry = _planted_at(cache).with_name(f"{_KEY}.pickle")
    os.mkfifo(entry)
    assert outcome_beside_fifo(lambda: cache.load(_KEY), entry) is None
    assert cache.misses == 1
    cache.store(_KEY, _FIT)
    assert FitCache(cache.folder).load(_KEY) == _FIT
