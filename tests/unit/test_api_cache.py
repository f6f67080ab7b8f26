"""``api.cache.ResponseCache``: kept while the version holds and the age allows, one computation
for a burst of requests, failures never kept, keys bounded; ``file_version`` sees appends,
rotations and missing files."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from api.cache import ResponseCache, file_version


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_kept_while_the_version_holds_recomputed_when_it_changes() -> None:
    cache = ResponseCache()
    calls = 0

    async def compute() -> bytes:
        nonlocal calls
        calls += 1
        return f"answer {calls}".encode()

    assert await cache.get("k", compute, version=1) == b"answer 1"
    assert await cache.get("k", compute, version=1) == b"answer 1"
    assert await cache.get("k", compute, version=2) == b"answer 2"
    assert (calls, cache.hits, cache.computed) == (2, 1, 2)


async def test_a_live_answer_expires_after_its_max_age() -> None:
    ticks = Ticks()
    cache = ResponseCache(monotonic=ticks)
    calls = 0

    async def compute() -> bytes:
        nonlocal calls
        calls += 1
        return str(calls).encode()

    assert await cache.get("status", compute, max_age_secs=1.0) == b"1"
    ticks.now += 0.999
    assert await cache.get("status", compute, max_age_secs=1.0) == b"1"
    ticks.now += 0.001
    assert await cache.get("status", compute, max_age_secs=1.0) == b"2"
    assert await cache.get("status", compute, max_age_secs=0.0) == b"3"  # 0: every time


async def test_a_burst_of_requests_costs_one_computation() -> None:
    cache = ResponseCache()
    release = asyncio.Event()
    calls = 0

    async def compute() -> bytes:
        nonlocal calls
        calls += 1
        await release.wait()
        return b"once"

    waiting = [asyncio.create_task(cache.get("k", compute, version=1)) for _ in range(50)]
    await asyncio.sleep(0)
    waiting[0].cancel()  # one client hangs up: the others still get the answer
    release.set()
    answers = await asyncio.gather(*waiting[1:])
    assert answers == [b"once"] * 49 and calls == 1
    with pytest.raises(asyncio.CancelledError):
        await waiting[0]


async def test_a_newer_version_does_not_join_an_older_computation() -> None:
    cache = ResponseCache()
    release = asyncio.Event()

    async def old() -> bytes:
        await release.wait()
        return b"old"

    async def new() -> bytes:
        return b"new"

    first = asyncio.create_task(cache.get("k", old, version=1))
    await asyncio.sleep(0)
    assert await cache.get("k", new, version=2) == b"new"
    release.set()
    assert await first == b"old"


async def test_a_failure_reaches_every_waiter_and_is_not_kept() -> None:
    cache = ResponseCache()
    fail = True

    async def compute() -> bytes:
        await asyncio.sleep(0)
        if fail:
            raise OSError("disk")
        return b"ok"

    results = await asyncio.gather(
        *(cache.get("k", compute, version=1) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, OSError) for r in results)
    fail = False
    assert await cache.get("k", compute, version=1) == b"ok"


async def test_keys_are_bounded_least_recently_used_first() -> None:
    cache = ResponseCache(max_keys=2)
    computed: list[str] = []

    def make(name: str) -> object:
        async def compute() -> bytes:
            computed.append(name)
            return name.encode()

        return compute

    for name in ("a", "b", "a", "c", "a", "b"):
        await cache.get(name, make(name))  # type: ignore[arg-type]
    assert computed == ["a", "b", "c", "b"]  # c pushed b out; a was used last


def test_file_version_sees_appends_rotations_and_missing_files(tmp_path: Path) -> None:
    live = tmp_path / "decisions.jsonl"
    assert file_version(live, tmp_path)[0] is None
    live.write_bytes(b"one\n")
    first = file_version(live, tmp_path)
    with live.open("ab") as out:
        out.write(b"two\n")
    appended = file_version(live, tmp_path)
    assert appended[0] != first[0] and appended[1] == first[1]  # the folder did not change
    live.rename(tmp_path / "decisions.20250301T000000Z.jsonl")
    live.write_bytes(b"one\ntwo\n")  # same size, a new file
    rotated = file_version(live, tmp_path)
    assert rotated[0] != appended[0]  # a new inode (the folder's mtime may not tick so fast)
