"""clip_memory: at most the limit, a prefix of the input, cut at a sentence, else a word, boundary."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from state.memory_clip import AGENT_MEMORY_MAX_CHARS, clip_memory


def test_text_that_fits_is_unchanged() -> None:
    text = "BTC trends up on 4h. Keep stops wide. "
    assert clip_memory(text) == text
    assert clip_memory("x" * 500) == "x" * 500


def test_cuts_after_the_last_sentence_that_fits() -> None:
    text = "First point. Second point is here! Third one runs past the limit"
    assert clip_memory(text, limit=40) == "First point. Second point is here!"


def test_sentence_end_may_be_followed_by_a_closing_quote_or_bracket() -> None:
    assert clip_memory('He said "stop." Then we went home', 20) == 'He said "stop."'
    assert clip_memory("Risk off (funding high.) Then more words", 30) == "Risk off (funding high.)"


def test_a_decimal_point_is_not_a_sentence_end() -> None:
    # "3.5" has no whitespace after the dot, so the cut falls back to a word boundary
    assert clip_memory("Funding at 3.5 percent and rising fast", 16) == "Funding at 3.5"


def test_a_line_break_ends_a_note() -> None:
    assert clip_memory("- long ETH\n- short SOL on breakdown", 20) == "- long ETH"


def test_falls_back_to_a_word_boundary_when_no_sentence_fits() -> None:
    text = "one sentence without any end that goes on and on"
    assert clip_memory(text, limit=20) == "one sentence without"


def test_a_single_word_longer_than_the_limit_gives_empty_text() -> None:
    assert clip_memory("x" * 600) == ""


def test_default_limit_is_500() -> None:
    text = ("Sentence number one is here. " * 30).strip()
    clipped = clip_memory(text)
    assert AGENT_MEMORY_MAX_CHARS == 500
    assert len(clipped) <= 500
    assert clipped.endswith(".")
    assert len(clipped) > 450  # whole sentences up to the limit, not just the first one


def test_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        clip_memory("abc", -1)


def _ends_mid_word(original: str, clipped: str) -> bool:
    """A cut in the middle of a word: the kept text ends in a non-space and the next one is too."""
    if clipped in ("", original):
        return False
    return not clipped[-1].isspace() and not original[len(clipped)].isspace()


_texts = st.text(
    alphabet=st.sampled_from(list("abc xyz.!?\n'\")…,-0123")) | st.characters(),
    max_size=1500,
)


@given(text=_texts, limit=st.integers(min_value=0, max_value=600))
@example(text="a" * 499 + " b", limit=500)
@example(text="a. " + "b" * 600, limit=500)
def test_clip_properties(text: str, limit: int) -> None:
    clipped = clip_memory(text, limit)
    assert len(clipped) <= limit
    assert text.startswith(clipped)
    assert not _ends_mid_word(text, clipped)
    if len(text) > limit and clipped:
        assert not clipped[-1].isspace()


@given(text=_texts)
def test_clip_with_the_default_limit_never_exceeds_500(text: str) -> None:
    clipped = clip_memory(text)
    assert len(clipped) <= 500
    assert text.startswith(clipped)
    assert not _ends_mid_word(text, clipped)


@given(
    sentences=st.lists(
        st.text(alphabet="abcdefgh ", min_size=1, max_size=60).map(lambda s: s.strip() + "."),
        min_size=1,
        max_size=40,
    )
)
def test_whole_sentences_are_kept_when_any_fits(sentences: list[str]) -> None:
    text = " ".join(sentences)
    clipped = clip_memory(text, 120)
    if len(text) > 120 and len(sentences[0]) <= 120:
        assert clipped.endswith(".")
        # the cut is at a sentence end of the original text
        assert text[len(clipped) :][:1] in ("", " ")
