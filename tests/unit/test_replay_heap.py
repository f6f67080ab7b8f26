"""The replay's frozen start-up heap: frozen and a higher gen-0 threshold inside, all undone after."""

from __future__ import annotations

import gc
import weakref

from runner.replay.heap import REPLAY_GEN0_THRESHOLD, frozen_start_up_heap


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


def test_freezes_and_raises_the_threshold_inside_and_restores_both_after() -> None:
    before = gc.get_threshold()
    with frozen_start_up_heap():
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (REPLAY_GEN0_THRESHOLD, *before[1:])
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


def test_a_cycle_made_during_the_run_is_still_collected_inside() -> None:
    with frozen_start_up_heap():
        ref = weakref.ref(_Node())
        gc.collect()
        assert ref() is None


def test_what_lived_at_the_start_is_collectable_again_after() -> None:
    """A sweep worker runs many replays: one replay's heap must not stay frozen for good."""
    node = _Node()
    ref = weakref.ref(node)
    with frozen_start_up_heap():
        del node
        gc.collect()
        assert ref() is not None  # frozen: the collector does not look at it
    gc.collect()
    assert ref() is None


def test_undone_when_the_run_fails() -> None:
    before = gc.get_threshold()
    try:
        with frozen_start_up_heap():
            raise RuntimeError("the replay failed")
    except RuntimeError:
        pass
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
