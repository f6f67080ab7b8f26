"""MEMORY.md as an editor saves it (a byte order mark) and as a model's words reach it (control
characters in a reasoning)."""

from __future__ import annotations

import tempfile
import unicodedata
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from agent.decision import AgentDecision, TradeDecision
from agent.decision_context import DecisionContext
from agent.prompt_assembly import PromptAssembler
from broker.port import Action
from memory.tiers import AUTO_HEADING, ProjectTier
from state.line_text import first_line_break


def test_the_write_back_keeps_the_title_first_and_the_mark_where_it_was(tmp_path: Path) -> None:
    """The title behind the mark was not seen as one (it did not start with ``# ``): the daemon's
    heading went above it, and the mark ended up in the middle of the file."""
    tier = ProjectTier(tmp_path)
    tier.memory_path.write_bytes("\ufeff# MEMORY\r\nweekends are thin\r\n".encode())
    tier.remember("2025-03-10", "BTC/USDT", "BUY 10% by claude: breakout")
    text = tier.memory_path.read_bytes().decode("utf-8")
    assert text.startswith("\ufeff# MEMORY\r\n") and text.count("\ufeff") == 1
    assert text.index(AUTO_HEADING) > 0 and "weekends are thin\r\n" in text


def test_a_memory_md_that_is_a_link_is_written_through(tmp_path: Path) -> None:
    """A person who keeps the notes elsewhere (a repository) links MEMORY.md to them: the
    write-back's atomic replace put a copy in the link's place, and from then on the daemon and
    the person each wrote a file the other no longer read."""
    kept = tmp_path / "notes-repo" / "trading-notes.md"
    kept.parent.mkdir()
    kept.write_text("# MEMORY\nweekends are thin\n")
    state = tmp_path / "state"
    state.mkdir()
    tier = ProjectTier(state)
    tier.memory_path.symlink_to(kept)
    tier.remember("2025-03-10", "BTC/USDT", "BUY 10% by claude: breakout")
    assert tier.memory_path.is_symlink() and tier.memory_path.resolve() == kept.resolve()
    assert (
        "[auto 2025-03-10 BTC/USDT]" in kept.read_text() and "weekends are thin" in kept.read_text()
    )
    kept.write_text(kept.read_text() + "a person's line after it\n")
    assert "a person's line after it" in tier.notes()


def test_the_notes_sent_hold_no_mark(tmp_path: Path) -> None:
    tier = ProjectTier(tmp_path)
    tier.memory_path.write_bytes("\ufeff# MEMORY\nweekends are thin\n".encode())
    assert tier.notes() == "# MEMORY\nweekends are thin"


@given(st.text(st.characters(codec="utf-8"), max_size=80))
@example("Breakout\x1b[2J\x9b31m now\x00, see\x7f")
def test_a_models_reasoning_reaches_memory_md_as_one_line_without_control_characters(
    reasoning: str,
) -> None:
    """A model's reasoning went into the ``[auto]`` line with only its whitespace folded: its
    ESC, CSI or NUL was written into the person's file, where `cat MEMORY.md` ran it on their
    terminal and an editor took the file for binary."""
    with tempfile.TemporaryDirectory() as folder:
        state = Path(folder)
        (state / "MEMORY.md").write_text("# MEMORY\nmy line\n", encoding="utf-8")
        context = DecisionContext(PromptAssembler(None), project=ProjectTier(state))
        trade = TradeDecision(
            ticker="BTC/USDT", action=Action.BUY, position_pct=0.1, reasoning=reasoning
        )
        context.after(AgentDecision(decisions=(trade,), decided_by="claude"), 1_741_564_800_000)
        text = (state / "MEMORY.md").read_text(encoding="utf-8")
        auto = [line for line in text.split("\n") if line.startswith("- [auto ")]
        assert len(auto) == 1 and auto[0].startswith("- [auto 2025-03-10 BTC/USDT] BUY 10% by")
        assert not [ch for ch in text if unicodedata.category(ch) == "Cc" and ch != "\n"]
        assert "my line" in text and first_line_break(auto[0]) is None
