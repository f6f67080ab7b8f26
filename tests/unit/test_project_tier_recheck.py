"""ProjectTier's recheck window: MEMORY.md and rules/ looked at at most once per window of real
time; a person's edit is seen once the window passed, the tier's own write at once."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from memory.tiers import ProjectTier, TierError


class FakeReal:
    """A real-time clock the test moves by hand."""

    def __init__(self) -> None:
        self.secs = 100.0

    def __call__(self) -> float:
        return self.secs


def _tier(state_dir: Path, real: FakeReal) -> ProjectTier:
    return ProjectTier(state_dir, recheck_secs=1.0, real_secs=real)


def test_a_person_s_edit_is_seen_once_the_window_passed(tmp_path: Path) -> None:
    real = FakeReal()
    tier = _tier(tmp_path, real)
    (tmp_path / "MEMORY.md").write_text("# MEMORY\nfirst\n")
    assert tier.notes() == "# MEMORY\nfirst"
    (tmp_path / "MEMORY.md").write_text("# MEMORY\nedited by a person\n")
    real.secs += 0.5
    assert tier.notes() == "# MEMORY\nfirst"  # within the window: not looked at
    real.secs += 0.6
    assert tier.notes() == "# MEMORY\nedited by a person"
    assert ProjectTier(tmp_path).notes() == "# MEMORY\nedited by a person"


def test_the_tier_s_own_write_is_seen_at_once(tmp_path: Path) -> None:
    real = FakeReal()
    tier = _tier(tmp_path, real)
    assert tier.notes() == ""  # no file yet
    tier.remember("2025-03-01", "BTC/USDT", "BUY 10% by fallback: why")
    assert "[auto 2025-03-01 BTC/USDT] BUY 10% by fallback: why" in tier.notes()
    tier.remember("2025-03-02", "ETH/USDT", "SELL 5% by fallback: because")
    assert tier.notes() == ProjectTier(tmp_path).notes()
    assert "[auto 2025-03-02 ETH/USDT]" in tier.notes()


def test_a_rules_folder_made_later_is_seen_once_the_window_passed(tmp_path: Path) -> None:
    real = FakeReal()
    tier = _tier(tmp_path, real)
    assert tier.rules() == []
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "calm.md").write_text('---\ntickers: ["BTC/*"]\n---\nno leverage\n')
    assert tier.rules() == []  # within the window
    real.secs += 1.0
    assert [(r.name, r.text) for r in tier.rules()] == [("calm", "no leverage")]
    (tmp_path / "rules" / "calm.md").write_text("be patient, and then some\n")
    real.secs += 1.0
    assert [(r.name, r.text) for r in tier.rules()] == [("calm", "be patient, and then some")]


def test_without_a_real_clock_every_call_looks(tmp_path: Path) -> None:
    tier = ProjectTier(tmp_path, recheck_secs=60.0)
    (tmp_path / "MEMORY.md").write_text("one\n")
    assert tier.notes() == "one"
    (tmp_path / "MEMORY.md").write_text("one and two\n")
    assert tier.notes() == "one and two"


_steps = st.lists(
    st.one_of(
        st.tuples(st.just("remember"), st.integers(1, 4), st.sampled_from(["BTC", "ETH"])),
        st.tuples(st.just("wait"), st.floats(0.0, 1.5), st.just("")),
        st.tuples(st.just("read"), st.just(0), st.just("")),
    ),
    max_size=30,
)


@settings(max_examples=examples(150), deadline=None)
@given(steps=_steps)
def test_with_no_one_else_writing_the_window_answers_as_a_fresh_look(
    steps: list[tuple[str, float, str]],
) -> None:
    """What a replay relies on: only the tier writes MEMORY.md, so whatever the window, its
    notes and rules are what a tier that looks every time reads."""
    root = Path(tempfile.mkdtemp())
    try:
        real = FakeReal()
        tier = _tier(root, real)
        for kind, number, ticker in steps:
            if kind == "remember":
                tier.remember(f"2025-03-0{int(number)}", f"{ticker}/USDT", f"text {number}")
            elif kind == "wait":
                real.secs += number
            assert tier.notes() == ProjectTier(root).notes()
            assert tier.rules() == ProjectTier(root).rules() == []
    finally:
        shutil.rmtree(root)


def test_a_file_that_fails_fails_every_call_even_within_the_window(tmp_path: Path) -> None:
    """As before the window: the tier is skipped (with its reason) at every decision while
    the file cannot be read, not answered from what was read before."""
    real = FakeReal()
    tier = _tier(tmp_path, real)
    (tmp_path / "MEMORY.md").write_text("readable\n")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "a.md").write_text("a rule\n")
    assert tier.notes() == "readable"
    assert [r.text for r in tier.rules()] == ["a rule"]
    (tmp_path / "MEMORY.md").write_bytes(b"\xff\xfe not utf-8\n")
    (tmp_path / "rules" / "a.md").write_text("---\ntickers: [not json\n---\nbroken\n")
    real.secs += 1.0
    for _ in range(2):  # the second within the window
        with pytest.raises(TierError):
            tier.notes()
        with pytest.raises(TierError):
            tier.rules()
