"""A MEMORY.md the write-back must leave alone (not UTF-8, too large) is a known condition: said
in the journal line and the log, never a traceback at each decision."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from fakes.log_records import tracebacks
from test_decision_context import PromptDecider, _answer, _routine

from agent.decision_context import DecisionContext
from agent.prompt_assembly import PromptAssembler
from broker.port import Action
from core.clock import VirtualClock
from memory.context import ContextAssembler
from memory.session_store import SessionStore
from memory.tiers import ProjectTier


async def test_a_memory_md_left_alone_is_in_the_journal_line_without_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The routine logged the write-back's TierError with ``log.exception``: a Latin-1 MEMORY.md
    put a full traceback in the log at every decision that traded."""
    clock = VirtualClock(epoch_ms=1_735_689_600_000)
    person_bytes = b"# MEMORY\nLatin-1 from an old editor: caf\xe9\n"
    (tmp_path / "MEMORY.md").write_bytes(person_bytes)
    session = SessionStore(tmp_path / "sessions", clock)
    project = ProjectTier(tmp_path)
    context = DecisionContext(
        PromptAssembler(ContextAssembler(project=project, session=session)),
        session=session,
        project=project,
    )
    decider = PromptDecider([_answer(Action.BUY, 0.1), _answer(Action.BUY, 0.1)])
    journal: list[Mapping[str, Any]] = []
    routine = _routine(clock, decider, context, journal)
    for _ in range(2):
        await routine.decide_once(["agent_timer"])
        await clock.advance(60)
    lines = [line for line in journal if line.get("type") == "decision"]
    assert len(lines) == 2
    for line in lines:
        assert "left as it is" in line["context_error"]
        assert "project" in line["prompt"]["tier_errors"]
    assert not tracebacks(caplog), [r.getMessage() for r in caplog.records]
    assert any("left as it is" in r.getMessage() for r in caplog.records)
    assert (tmp_path / "MEMORY.md").read_bytes() == person_bytes
