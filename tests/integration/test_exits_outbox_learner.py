"""The exits outbox's learner consumer (``runner.wiring.exits_outbox``) on an outbox a person or
a damaged disk left with an exit the learner can never learn: that exit is said and passed over,
and the exits after it are learned."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from learner.online import OnlineLearner
from runner.config import MarketConfig, Settings
from runner.wiring import exits_outbox


def exit_line(seq: int, key: str, **payload: object) -> str:
    body = {"at_ms": 1_740_787_200_000 + seq, "ticker": "BTC/USDT", "reason": "STOP LOSS",
            "pnl_pct": -2.0, "holding_secs": 60.0, "regime": "bull", "signals": {"rsi": 0.5}}  # fmt: skip
    entry = {"seq": seq, "key": key, "kind": "position.exit", "at_ms": body["at_ms"],
             "payload": body | payload}  # fmt: skip
    return json.dumps(entry) + "\n"


@pytest.mark.parametrize(
    "bad",
    [
        {"pnl_pct": None},  # orjson writes a non-finite float as null
        {"pnl_pct": "-2 %"},
        {"signals": ["rsi"]},
        {"ticker": 7},
    ],
)
def test_an_exit_that_cannot_be_learned_does_not_hold_back_the_ones_after_it(
    tmp_path: Path, bad: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    """The learner refused it on every delivery and the cursor stayed before it: no exit after
    it was ever learned, and each delivery logged a traceback."""
    state_dir = tmp_path / "state"
    (state_dir / "outbox").mkdir(parents=True)
    (state_dir / "outbox" / "exits.jsonl").write_text(
        exit_line(1, "x-1", **bad) + exit_line(2, "x-2")
    )
    settings = Settings(state_dir=state_dir, market=MarketConfig(source="sim"))
    learner = OnlineLearner(state_dir / "models" / "online_learner.json")
    with caplog.at_level(logging.ERROR):
        outbox = exits_outbox(settings, learner)
    assert [trade["at_ms"] for trade in learner.recent_trades()] == [1_740_787_200_002]
    assert "x-1" in caplog.text and "cannot be learned" in caplog.text
    assert outbox.pending("learner") == []
    # the passed-over exit stays in the outbox, as written
    assert len((state_dir / "outbox" / "exits.jsonl").read_text().splitlines()) == 2
