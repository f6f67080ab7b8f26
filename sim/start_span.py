"""A simulator start outside the recording is refused (``vigil sim``, ``vigil run --sim``): its
streams would be silent and health would fail for no visible reason."""

from __future__ import annotations

from core.errors import RefuseToStartError
from core.utc_text import iso_utc
from sim.feed import SimFeed


def refuse_outside_recording(start_ms: int, requested_ms: int, feed: SimFeed) -> None:
    """``RefuseToStartError`` when ``start_ms`` lies outside the recording of any ticker;
    ``requested_ms`` differs when the start was resumed from a state dir (said)."""
    for ticker in feed.tickers:
        first_ms, end_ms = feed.span_ms(ticker)
        if not first_ms <= start_ms <= end_ms:
            resumed = "" if start_ms == requested_ms else " (resumed from the state dir)"
            raise RefuseToStartError(
                f"sim start {iso_utc(start_ms)}{resumed} is outside the recording of {ticker}, "
                f"which covers {iso_utc(first_ms)} .. {iso_utc(end_ms + 1)}; choose --start "
                "inside it" + (" or use a fresh state dir" if resumed else "")
            )


__all__ = ["refuse_outside_recording"]
