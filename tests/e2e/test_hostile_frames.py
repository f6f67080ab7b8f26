"""The daemon keeps deciding through a storm of hostile frames: ``vigil run --sim`` in-process with
a man in the middle slipping hostile frames (``sim.hostile``) and old captured Binance frames
between the simulator's (the small version of ``python -m bench fuzz_frames``)."""

from __future__ import annotations

from pathlib import Path

from bench.bench_fuzz_frames import fuzz
from sim.hostile_proxy import CAPTURED

#: what the listener may drop the simulator's own frames for (a reconnect's overlap); everything
#: else it counts is a hostile frame
OWN_FRAME_REASONS = frozenset({"duplicate", "out_of_order"})


async def test_decisions_go_on_and_every_hostile_frame_is_counted(tmp_path: Path) -> None:
    figures = await fuzz(tmp_path / "state", frames=2_000, speed=120.0, rate=0.3, seed=11)
    assert figures.decisions_after > figures.decisions_before  # fuzz also waits for one more
    assert figures.frames >= 2_000 and figures.ticks_published > 0
    injected = sum(figures.injected.values())
    counted = sum(n for r, n in figures.rejected.items() if r not in OWN_FRAME_REASONS)
    # frames in flight when the run stopped, or behind an oversized one, are never read
    assert injected - 100 <= counted <= injected, (figures.injected, figures.rejected)
    assert "parse_error" not in figures.rejected
    assert figures.injected.get(CAPTURED, 0) > 0
    assert figures.bad_candles == 0 and figures.closes > 0
