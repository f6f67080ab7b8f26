"""The key file read again at a breaker trial (``ANTHROPIC_API_KEY_FILE``) while a person is
rotating it: what cannot be a key (bytes that are not UTF-8, two lines, a key with a space or a
non-ASCII character in it) keeps the key the client has, is said in the log, and the trial call
goes out on it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fakes.allocation_peak import allocation_peak
from fakes.claude_support import EVERY_PASS_ONE_MODEL, MODEL, answer, fallback, snapshot
from fakes.fifo import outcome_beside_fifo
from fakes.instant_clock import InstantClock
from fakes.messages_api import FakeMessagesApi, json_message, overloaded

from agent.breaker import CircuitBreaker
from agent.budget import AgentPricing, DailyBudget
from agent.claude import ClaudeDecider, UsageLedger
from agent.claude_client import ClaudeClient, Credentials, build_anthropic_client
from agent.config import AgentConfig
from runner.agent_wiring import anthropic_key_reader

KEY = "sk-ant-current-key-222"


@pytest.fixture
async def decider(
    api: FakeMessagesApi, clock: InstantClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ClaudeDecider]:
    key_file = tmp_path / "anthropic_api_key"
    key_file.write_text(KEY + "\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY_FILE", str(key_file))
    config = AgentConfig(
        model=MODEL, base_url=api.base_url, timeout_secs=5.0, **EVERY_PASS_ONE_MODEL
    )
    client = ClaudeClient(
        build_anthropic_client(config, KEY),
        clock,
        AgentPricing(),
        credentials=Credentials(
            anthropic_key_reader(KEY), lambda key: build_anthropic_client(config, key)
        ),
    )
    built = ClaudeDecider(
        client=client,
        config=config,
        clock=clock,
        fallback=fallback(),
        breaker=CircuitBreaker(clock),
        ledger=UsageLedger(DailyBudget(clock, None)),
    )
    yield built
    await built.aclose()


@pytest.mark.parametrize(
    "content",
    [
        b"\xff\xfe\x00s\x00k\x00-",  # half-written, or saved as UTF-16
        b"sk-ant-current-key-222\nsk-ant-next-key-333\n",  # the new key added under the old
        b"sk-ant-next key-333\n",
        "sk-ant-next-kéy-333\n".encode(),
    ],
    ids=["not-utf8", "two-lines", "a-space", "non-ascii"],
)
async def test_a_key_file_that_holds_no_usable_key_keeps_the_current_key_at_the_trial(
    api: FakeMessagesApi,
    clock: InstantClock,
    decider: ClaudeDecider,
    tmp_path: Path,
    content: bytes,
    caplog: pytest.LogCaptureFixture,
) -> None:
    api.accepted_keys = {KEY}
    api.script(*[overloaded() for _ in range(6)])
    for _ in range(3):  # three failed decisions open the breaker
        assert (await decider.decide(snapshot())).decided_by == "fallback"
    assert decider.breaker.state.value == "open"

    (tmp_path / "anthropic_api_key").write_bytes(content)
    clock.advance(decider.breaker.open_secs)
    api.script(json_message(answer()))
    trial = await decider.decide(snapshot())

    assert (trial.decided_by, trial.decider_reason) == ("claude", "answered (breaker trial)")
    assert decider.breaker.state.value == "closed"
    assert "Anthropic API key" in caplog.text


def test_a_fifo_as_the_key_file_is_refused_without_blocking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read at a breaker trial on the event loop: a FIFO at ``ANTHROPIC_API_KEY_FILE`` blocked
    the read, and every loop of the daemon with it, until someone wrote to it. Now the read fails
    as an unreadable file does (the trial keeps the current key, a start refuses)."""
    fifo = tmp_path / "anthropic_api_key"
    os.mkfifo(fifo)
    monkeypatch.setenv("ANTHROPIC_API_KEY_FILE", str(fifo))
    got = outcome_beside_fifo(anthropic_key_reader(KEY), fifo)
    assert isinstance(got, OSError), got


def test_a_huge_key_file_is_refused_without_being_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "anthropic_api_key"
    with key_file.open("wb") as fh:
        fh.write(b"sk-ant-next-key-333\n")
        fh.truncate(64 << 20)  # sparse: a file pointed at by mistake, or growing
    monkeypatch.setenv("ANTHROPIC_API_KEY_FILE", str(key_file))
    with allocation_peak() as allocated, pytest.raises(OSError, match="over the"):
        anthropic_key_reader(KEY)()
    assert allocated.peak_bytes < 1 << 20
