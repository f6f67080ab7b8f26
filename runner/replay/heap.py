"""The replay's garbage-collector settings: the heap built before the run is frozen for its length.

A replay allocates young objects at a high rate (models, dicts and strings per tick and decision)
and keeps nearly everything it built at start-up (modules, settings, the recorded feed, the loops)
to the end. Python's full collections walk that whole start-up heap again each time: in June with
memory ON, 8 full collections took 2.0 s, 2.9 s of collection in all. Frozen (``gc.freeze``), the
start-up heap is left out of every collection, and a gen-0 threshold of 7,000 instead of 700 makes
a tenth of the young collections: 0.4 s in all, the journals byte-identical. Run this around one
replay only: a sweep worker runs many in one process, and what a finished replay leaves in
reference cycles must be collectable again (``gc.unfreeze`` at the end).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: young objects allocated (net) before a gen-0 collection; CPython's default is 700
REPLAY_GEN0_THRESHOLD = 7_000


@contextmanager
def frozen_start_up_heap() -> Iterator[None]:
    """Collect, freeze what is left, raise the gen-0 threshold; undo both on the way out."""
    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(REPLAY_GEN0_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
