"""CachedSource on a VirtualClock: TTL, timeout, backoff (Retry-After), not-available, stale rule."""

from __future__ import annotations

import asyncio
import itertools
import logging
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.clock import VirtualClock
from derivatives.cache import (
    Cached,
    CachedSource,
    CachePolicy,
    SourceFailedError,
    SourceNeverAvailableError,
    SourceNotAvailableError,
)

EPOCH_MS = 1_740_787_200_000  # 2025-03-01T00:00:00Z


class ScriptedFetch:
    """Answers from a script: a value, or an exception to raise; the last entry repeats."""

    def __init__(self, *script: object) -> None:
        self.script = list(script)
        self.calls = 0

    async def __call__(self) -> object:
        item = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        if isinstance(item, BaseException):
            raise item
        return item


def source(fetch: ScriptedFetch, clock: VirtualClock, **policy: float) -> CachedSource[object]:
    defaults: dict[str, float] = {
        "ttl_secs": 60.0,
        "stale_factor": 3.0,
        "backoff_base_secs": 5.0,
        "backoff_cap_secs": 20.0,
        "jitter_fraction": 0.5,
    }
    return CachedSource("test", fetch, clock, CachePolicy(**(defaults | policy)), rand=lambda: 0.0)


async def test_a_value_is_served_from_cache_until_its_ttl() -> None:
    clock = VirtualClock(EPOCH_MS)
    fetch = ScriptedFetch({"v": 1}, {"v": 2})
    src = source(fetch, clock)
    first = await src.read()
    await clock.advance(59)
    second = await src.read()
    assert (first.value, second.value, fetch.calls) == ({"v": 1}, {"v": 1}, 1)
    assert first.fetched_at_ms == EPOCH_MS and first.reason is None
    await clock.advance(1)
    assert (await src.read()).value == {"v": 2}
    assert fetch.calls == 2


async def test_a_hanging_provider_times_out_with_a_reason() -> None:
    clock = VirtualClock(EPOCH_MS)
    never = asyncio.Event()

    async def hang() -> object:
        await never.wait()
        return None

    src = CachedSource("hang", hang, clock, CachePolicy(ttl_secs=60, timeout_secs=0.05))
    got = await src.read()
    assert got.value is None
    assert got.reason == "no answer within 0.05 s"


async def test_an_in_process_source_without_timeout_serves_and_backs_off_alike() -> None:
    clock = VirtualClock(EPOCH_MS)
    fetch = ScriptedFetch({"v": 1}, SourceFailedError("torn"), {"v": 2})
    src = CachedSource(
        "recorded", fetch, clock, CachePolicy(ttl_secs=60, timeout_secs=None), rand=lambda: 0.0
    )
    assert (await src.read()).value == {"v": 1}
    await clock.advance(60)
    failed = await src.read()  # the failed refresh still serves the stale value
    assert (failed.value, failed.stale) == ({"v": 1}, True)
    await clock.advance(5)  # the first backoff
    assert (await src.read()).value == {"v": 2}
    with pytest.raises(ValueError):
        CachePolicy(ttl_secs=60, timeout_secs=0)


async def test_failures_back_off_exponentially_up_to_the_cap() -> None:
    clock = VirtualClock(EPOCH_MS)
    fetch = ScriptedFetch(SourceFailedError("server error 503"))
    src = source(fetch, clock)
    attempts_at: list[float] = []
    for _ in range(120):  # two simulated minutes, a read every second
        before = fetch.calls
        got = await src.read()
        if fetch.calls > before:
            attempts_at.append(clock.monotonic_secs())
        assert got.value is None and got.reason == "server error 503"
        await clock.advance(1)
    gaps = [b - a for a, b in itertools.pairwise(attempts_at)]
    assert gaps[:4] == [5, 10, 20, 20]  # 5 * 2**n, capped at 20 (rand 0: no jitter taken off)


async def test_retry_after_of_a_429_is_waited_out() -> None:
    clock = VirtualClock(EPOCH_MS)
    fetch = ScriptedFetch(SourceFailedError("rate limited (429)", retry_after_secs=45), {"ok": 1})
    src = source(fetch, clock)
    assert (await src.read()).reason == "rate limited (429)"
    await clock.advance(44)
    assert (await src.read()).value is None
    assert fetch.calls == 1  # inside the Retry-After: the provider is not asked
    await clock.advance(1)
    assert (await src.read()).value == {"ok": 1}


async def test_not_available_waits_a_full_ttl_before_asking_again() -> None:
    clock = VirtualClock(EPOCH_MS)
    fetch = ScriptedFetch(SourceNotAvailableError("open interest is not available"))
    src = source(fetch, clock)
    assert (await src.read()).reason == "open interest is not available"
    await clock.advance(59)
    await src.read()
    assert fetch.calls == 1
    await clock.advance(1)
    await src.read()
    assert fetch.calls == 2


async def test_stale_value_is_served_until_ttl_times_k_then_unavailable() -> None:
    clock = VirtualClock(EPOCH_MS)
    fetch = ScriptedFetch({"v": 1}, SourceFailedError("server error 502"))
    src = source(fetch, clock, backoff_base_secs=1.0, backoff_cap_secs=1.0)
    await src.read()
    await clock.advance(61)
    stale = await src.read()
    assert stale.value == {"v": 1} and stale.stale
    await clock.advance(118)  # 179 s old: still within 3 x 60 s
    assert (await src.read()).value == {"v": 1}
    await clock.advance(1)  # 180 s: past the stale limit
    gone = await src.read()
    assert gone.value is None
    assert gone.reason == ("stale since 2025-03-01T00:01:00Z; last error: server error 502")


async def test_an_unexpected_error_is_logged_and_becomes_a_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = VirtualClock(EPOCH_MS)
    src = source(ScriptedFetch(KeyError("markPrice")), clock)
    with caplog.at_level(logging.ERROR, logger="derivatives.cache"):
        got = await src.read()
    assert got.reason == "unexpected error: KeyError: 'markPrice'"
    assert any("unexpected error" in r.message for r in caplog.records)


async def test_concurrent_reads_share_one_request() -> None:
    clock = VirtualClock(EPOCH_MS)
    fetch = ScriptedFetch({"v": 1})
    src = source(fetch, clock)
    results = await asyncio.gather(*(src.read() for _ in range(5)))
    assert fetch.calls == 1
    assert all(r.value == {"v": 1} for r in results)


def test_policy_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="stale_factor"):
        CachePolicy(ttl_secs=1, stale_factor=0.5)
    with pytest.raises(ValueError, match="ttl_secs"):
        CachePolicy(ttl_secs=0)


async def test_the_same_reason_is_logged_once_and_a_new_one_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = VirtualClock(EPOCH_MS)
    off = SourceNotAvailableError("no forceOrder stream connected")
    fetch = ScriptedFetch(off, off, off, SourceFailedError("HTTP 503"))
    src = source(fetch, clock)
    caplog.set_level(logging.DEBUG, logger="derivatives.cache")
    for _ in range(4):
        await src.read()
        await clock.advance(60)
    assert fetch.calls == 4
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2
    assert "no forceOrder stream connected" in warned[0] and "HTTP 503" in warned[1]
    repeats = [
        r for r in caplog.records if r.levelno == logging.DEBUG and "forceOrder" in r.getMessage()
    ]
    assert len(repeats) == 2


async def test_a_slow_answer_is_aged_from_its_arrival_not_from_the_request() -> None:
    """Under a fast scaled clock a slow answer spans many clock seconds: it must not arrive
    already stale."""
    clock = VirtualClock(EPOCH_MS)
    calls = 0

    async def slow_fetch() -> object:
        nonlocal calls
        calls += 1
        await clock.sleep(50)
        return {"v": 1}

    src = CachedSource("slow", slow_fetch, clock, CachePolicy(ttl_secs=60.0, stale_factor=1.5))
    reading = asyncio.create_task(src.read())
    await clock.advance(50)
    first = await reading
    assert first.value == {"v": 1} and not first.stale
    assert first.fetched_at_ms == EPOCH_MS + 50_000
    await clock.advance(59)
    again = await asyncio.wait_for(src.read(), timeout=1.0)  # fresh: served without a request
    assert (again.value, again.stale, calls) == ({"v": 1}, False, 1)


async def test_a_source_that_can_never_answer_is_asked_once_and_serves_the_same_reason() -> None:
    """Against a source re-asked every TTL (plain not-available), the same reads at the same
    instants get the same answers; the never-available one made one request instead of many."""
    clock = VirtualClock(EPOCH_MS)
    why = "open interest: not in the recording"
    asked_again = source(ScriptedFetch(SourceNotAvailableError(why)), clock, ttl_secs=55.0)
    never_fetch = ScriptedFetch(SourceNeverAvailableError(why))
    never = source(never_fetch, clock, ttl_secs=55.0)
    for step in [0, 1, 54, 55, 56, 300, 300, 3600, 86_400]:
        await clock.advance(step)
        again, once = await asyncio.gather(asked_again.read(), never.read())
        assert once == again == Cached(None, why)
    assert (never.requests, never_fetch.calls) == (1, 1)
    assert asked_again.requests > never.requests  # re-asked at every TTL passed


async def test_a_never_available_source_that_had_a_value_goes_stale_as_any_other() -> None:
    clock = VirtualClock(EPOCH_MS)
    fetch = ScriptedFetch({"v": 1}, SourceNeverAvailableError("gone for good"))
    src = source(fetch, clock, ttl_secs=60.0, stale_factor=3.0)
    assert (await src.read()).value == {"v": 1}
    await clock.advance(60)
    stale = await src.read()
    assert (stale.value, stale.stale) == ({"v": 1}, True)
    await clock.advance(120)
    gone = await src.read()
    assert gone.value is None
    assert gone.reason == "stale since 2025-03-01T00:01:00Z; last error: gone for good"
    await clock.advance(3600)
    assert (await src.read()).reason == gone.reason
    assert fetch.calls == 2  # never asked again after the refusal


async def test_a_never_available_refusal_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    clock = VirtualClock(EPOCH_MS)
    src = source(ScriptedFetch(SourceNeverAvailableError("not recorded")), clock)
    with caplog.at_level(logging.DEBUG, logger="derivatives.cache"):
        for _ in range(5):
            await src.read()
            await clock.advance(600)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["test unavailable: not recorded (never asked again)"]


@settings(max_examples=examples(150), deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["value", "502", "503", "not here", "boom"]),
            st.integers(0, 400),  # seconds to the read
        ),
        min_size=1,
        max_size=30,
    )
)
async def test_a_stale_reason_is_the_one_written_afresh(steps: list[tuple[str, int]]) -> None:
    """Past its stale limit a source gives its "stale since" reason again at every read, kept
    while the value's age and the last error stay; each one is the formula's, written afresh."""
    clock = VirtualClock(EPOCH_MS)
    errors: dict[str, BaseException] = {
        "502": SourceFailedError("server error 502"),
        "503": SourceFailedError("server error 503"),
        "not here": SourceNotAvailableError("no such data"),
        "boom": RuntimeError("boom"),
    }
    script = [{"v": n} if what == "value" else errors[what] for n, (what, _) in enumerate(steps)]
    fetch = ScriptedFetch(*script, *script[-1:])
    src = source(fetch, clock, backoff_base_secs=1.0, backoff_cap_secs=30.0)
    for _, wait in steps:
        await clock.advance(wait)
        got = await src.read()
        if got.reason is not None and got.reason.startswith("stale since"):
            assert src._fetched_ms is not None
            since = datetime.fromtimestamp((src._fetched_ms + 60_000) / 1000, UTC)
            error = src._last_error
            last = f"; last error: {error}" if error else ""
            assert got.reason == f"stale since {since:%Y-%m-%dT%H:%M:%SZ}{last}"
