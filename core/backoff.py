"""Capped, jittered exponential backoff: a pure function, so it can be tested exhaustively."""

from __future__ import annotations


def backoff_delay_secs(
    attempt: int, base_secs: float, cap_secs: float, jitter_fraction: float, rand: float
) -> float:
    """Delay before retry number ``attempt`` (0-based).

    The exponential ``base * 2**attempt`` is capped at ``cap_secs``; then up to ``jitter_fraction`` of it
    is taken off at random (``rand`` in [0, 1]), so restarts of many loops spread out and the delay never
    exceeds the cap.
    """
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    if not (base_secs >= 0.0 and cap_secs >= 0.0):  # also refuses NaN, which min() would hide
        raise ValueError(f"base_secs and cap_secs must be >= 0, got {base_secs}, {cap_secs}")
    if not 0.0 <= jitter_fraction <= 1.0:
        raise ValueError(f"jitter_fraction must be in [0, 1], got {jitter_fraction}")
    if not 0.0 <= rand <= 1.0:
        raise ValueError(f"rand must be in [0, 1], got {rand}")
    # 2.0**1023 is the largest finite power of two; base * it may overflow to inf, which min() caps
    exponent = min(attempt, 1023)
    capped = min(cap_secs, base_secs * 2.0**exponent)
    return capped * (1.0 - jitter_fraction * rand)
