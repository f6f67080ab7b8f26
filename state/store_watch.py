"""The store's edit watcher: poll ``runner_state.json`` for a person's edits on the clock."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Final

from core.backoff import Backoff
from core.clock import Clock
from core.failure_streak import FailureStreak

# the store's parts log as one component, under the name operators already filter on
log = logging.getLogger("state.store")

WATCH_BACKOFF_CAP_SECS: Final = 60.0
WATCH_BACKOFF_JITTER_FRACTION: Final = 0.5


async def watch_for_edits(
    poll: Callable[[], object],
    path: Path,
    clock: Clock,
    interval_secs: float,
    *,
    after_poll: Callable[[], None] | None = None,
) -> None:
    """Call ``poll`` every ``interval_secs`` of ``clock`` time, then ``after_poll``, until
    cancelled; a failing poll is logged and retried after a capped, jittered backoff."""
    if interval_secs <= 0:
        raise ValueError(f"interval_secs must be > 0, got {interval_secs}")
    backoff = Backoff(
        base_secs=interval_secs,
        cap_secs=max(interval_secs, WATCH_BACKOFF_CAP_SECS),
        jitter_fraction=WATCH_BACKOFF_JITTER_FRACTION,
    )
    streak = FailureStreak()
    while True:
        try:
            poll()
            if after_poll is not None:
                after_poll()
            ended = streak.ended()
            if ended:
                log.warning("checking %s for edits works again after %d failures", path, ended)
            delay_secs = interval_secs
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            delay_secs = backoff.delay_secs(streak.failures, random.random())
            # the traceback once a streak (a FIFO or a folder left there failed every poll, and
            # logged one a minute for as long as it stayed); the count at each try
            news = streak.failed(f"{type(exc).__name__}: {exc}")
            log.log(
                logging.ERROR if news else logging.WARNING,
                "checking %s for edits failed (%d in a row); next try in %.1f s",
                path,
                streak.failures,
                delay_secs,
                exc_info=news,
            )
        await clock.sleep(delay_secs)


__all__ = ["WATCH_BACKOFF_CAP_SECS", "WATCH_BACKOFF_JITTER_FRACTION", "watch_for_edits"]
