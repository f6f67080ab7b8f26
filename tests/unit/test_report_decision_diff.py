"""report.decision_diff: which decisions two runs decided differently, and by which rule."""

from __future__ import annotations

from pathlib import Path

import orjson

from report.decision_diff import decision_change_lines


def _journal(run: Path, decisions: dict[str, list[tuple[str, str, float, str]]]) -> Path:
    (run / "logs").mkdir(parents=True)
    with (run / "logs" / "decisions.jsonl").open("wb") as out:
        for decision_id, rows in decisions.items():
            raw = {
                "decisions": [
                    {"ticker": t, "action": a, "position_pct": p, "reasoning": r}
                    for t, a, p, r in rows
                ]
            }
            out.write(orjson.dumps({"decision_id": decision_id, "raw_decision": raw}) + b"\n")
    return run


def test_changed_decisions_are_listed_with_the_rule_that_changed_them(tmp_path: Path) -> None:
    memory = "BUY. memory rule: size x0.80 (posterior win rate 0.40): 0.05 -> 0.04"
    learner = "BUY. The learner moved this decision (HOLD without it)"
    on = _journal(tmp_path / "on", {
        "d1-1": [("BTC/USDT", "HOLD", 0.0, "hold"), ("SOL/USDT", "BUY", 0.04, memory)],
        "d2-2": [("BTC/USDT", "BUY", 0.05, learner)],
        "d3-3": [("BTC/USDT", "HOLD", 0.0, "hold: already held")],
        "d4-4": [("ETH/USDT", "HOLD", 0.0, "hold")],
    })  # fmt: skip
    off = _journal(tmp_path / "off", {
        "d1-1": [("BTC/USDT", "HOLD", 0.0, "hold"), ("SOL/USDT", "BUY", 0.05, "BUY")],
        "d2-2": [("BTC/USDT", "HOLD", 0.0, "hold")],
        "d3-3": [("BTC/USDT", "BUY", 0.05, "BUY")],
        "d4-4": [("ETH/USDT", "HOLD", 0.0, "hold")],
        "d5-5": [("ETH/USDT", "HOLD", 0.0, "hold")],
    })  # fmt: skip
    head, *listed = decision_change_lines(on, off)
    assert head == (
        "decisions decided differently: 3 of 4 paired (3 ticker decisions: memory rule 1, "
        "learner 1, state 1); 1 decision(s) in one run only"
    )
    assert listed == [
        "  d1-1 SOL/USDT: a BUY 4%, b BUY 5% (memory rule)",
        "  d2-2 BTC/USDT: a BUY 5%, b HOLD 0% (learner)",
        "  d3-3 BTC/USDT: a HOLD 0%, b BUY 5% (state)",
    ]


def test_identical_runs_say_so(tmp_path: Path) -> None:
    same = {"d1-1": [("BTC/USDT", "HOLD", 0.0, "hold")]}
    a, b = _journal(tmp_path / "a", same), _journal(tmp_path / "b", same)
    assert decision_change_lines(a, b) == [
        "decisions decided differently: 0 of 1 paired (0 ticker decisions: none)"
    ]
