"""The reflector's answer for a trade whose lesson the store has not taken yet: kept in the
writer's memory only, so a restart between the answer and the lesson's write asked Claude again,
and paid again. It is recorded with the pending trade in the memory outbox now, and a restart
writes the lesson from it without a call; an answer a person's edit left as none is left out with
a warning (the model is asked again), and the daemon starts as ever."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from fakes.memory_support import open_and_exit
from fakes.messages_api import FakeMessagesApi, json_message
from fakes.virtual_time import drive
from test_memory_claude_reflection import _writer

from core.clock import VirtualClock
from memory.model import Insight
from memory.port import StoreUnavailableError
from memory.sqlite_store import SqliteMemoryStore
from memory.writeback import MemoryWriter

LESSON = "Overbought SOL entries in medium volatility lost; wait for RSI below 65 first."
AGAIN = "Asked again: SOL entries above RSI 70 in medium volatility lost; wait for a pullback."


class InsightsDown(SqliteMemoryStore):
    """Takes the trade, refuses its lesson: the store went down between the two."""

    async def put_insight(self, insight: Insight) -> bool:
        raise StoreUnavailableError("down")


async def _asked_then_down(tmp_path: Path, api: FakeMessagesApi) -> None:
    """One exit, its lesson asked of Claude, its write refused: the trade stays pending."""
    store = InsightsDown(tmp_path / "memory.db")
    writer = _writer(tmp_path, api.base_url, [], store=store)
    open_and_exit(writer, 0)
    clock = writer._clock
    assert isinstance(clock, VirtualClock)
    flushed = await drive(clock, writer.flush())  # the store retries sleep on the virtual clock
    assert flushed == 0 and writer.pending() == 1


def _restarted(tmp_path: Path, api: FakeMessagesApi) -> tuple[MemoryWriter, SqliteMemoryStore]:
    store = SqliteMemoryStore(tmp_path / "memory.db")
    return _writer(tmp_path, api.base_url, [], store=store), store


async def test_a_restart_writes_the_lesson_from_the_answer_kept_without_asking_again(
    tmp_path: Path,
) -> None:
    async with FakeMessagesApi() as api:
        api.script(
            json_message({"insight": LESSON, "salience": 0.8}),
            json_message({"insight": AGAIN, "salience": 0.8}),
        )
        await _asked_then_down(tmp_path, api)
        writer, store = _restarted(tmp_path, api)
        assert await writer.flush() == 1
        asked = len(api.requests)
    assert asked == 1
    (insight,) = await store.list_insights()
    assert (insight.text, insight.author, insight.salience) == (LESSON, "model", 0.8)


@pytest.mark.parametrize("edit", ["no answer", "no reflection"])
async def test_an_answer_a_person_broke_is_asked_again_and_the_start_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, edit: str
) -> None:
    async with FakeMessagesApi() as api:
        api.script(
            json_message({"insight": LESSON, "salience": 0.8}),
            json_message({"insight": AGAIN, "salience": 0.8}),
        )
        await _asked_then_down(tmp_path, api)
        _break_the_answer(tmp_path / "o.jsonl", edit)
        with caplog.at_level(logging.WARNING, logger="memory"):
            writer, store = _restarted(tmp_path, api)
            assert await writer.flush() == 1
        asked = len(api.requests)
    assert asked == 2
    (insight,) = await store.list_insights()
    assert insight.text == AGAIN
    assert "answer" in caplog.text and str(tmp_path / "o.jsonl") in caplog.text


def _break_the_answer(outbox: Path, edit: str) -> None:
    lines = [json.loads(line) for line in outbox.read_text().splitlines()]
    (answer,) = [line for line in lines if line["kind"] == "answer"]
    broken: Any = "a note of mine" if edit == "no answer" else {"insight": 5, "salience": "high"}
    answer["payload"]["answer"] = broken
    outbox.write_text("".join(json.dumps(line) + "\n" for line in lines))
