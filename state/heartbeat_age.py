"""How old the heartbeat file is, judged alike by ``vigil health``, ``vigil status`` and the API.

Its age is real time less the file's modification time. A time ahead of now (the clock stepped
back, a backup restored, a ``touch -d``) was a negative age, read as fresh: a dead daemon looked
alive until that time came. Past a few seconds of jitter (a file system's coarse stamps, a clock
slewed by NTP) such a heartbeat has no age and is not fresh."""

from __future__ import annotations

from typing import Final

#: how far ahead of now a heartbeat may be dated and still be read as just written
FUTURE_TOLERANCE_SECS: Final = 5.0


class FutureHeartbeatError(ValueError):
    """The heartbeat is dated past now by more than the tolerance; the message says by how much."""


def heartbeat_age_secs(mtime_secs: float, now_secs: float) -> float:
    """Seconds since ``mtime_secs`` at ``now_secs`` (0 within the tolerance ahead);
    ``FutureHeartbeatError`` further ahead."""
    age = now_secs - mtime_secs
    if age < -FUTURE_TOLERANCE_SECS:
        raise FutureHeartbeatError(
            f"heartbeat dated in the future: {-age:.0f} s ahead of this machine's clock "
            "(clock stepped back or file restored?), not a sign the daemon is alive"
        )
    return max(0.0, age)


__all__ = ["FUTURE_TOLERANCE_SECS", "FutureHeartbeatError", "heartbeat_age_secs"]
