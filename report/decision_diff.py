"""Which decisions two runs of the same span decided differently, and why (``--compare``).

Replays of one span with one gate see the same decision ids (``d<at_ms>-<n>``), so their journals
pair line by line. For every paired decision, each ticker's (action, position %) is compared; a
difference is attributed to the rule that its reasoning names on either side:

- ``memory rule``: the fallback scaled the entry by the posterior win rate of similar trades;
- ``learner``: the learned signal weights moved the decision;
- both, joined with " + ", when both reasonings name one;
- ``state``: neither rule acted here; the inputs differ because an earlier change left other
  positions, cash or resting orders (a consequence, not a rule of its own).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from report.learning import MOVED_MARK
from report.memory_section import MEMORY_RULE_MARK
from state.segments import iter_lines

LISTED = 10
_RULES = (("memory rule", MEMORY_RULE_MARK), ("learner", MOVED_MARK))
_Choice = tuple[str, float, str]  # action, position %, reasoning


def _choices(path: Path) -> dict[str, dict[str, _Choice]]:
    out: dict[str, dict[str, _Choice]] = {}
    for line in iter_lines(path):  # every rotated segment, oldest first
        if b'"raw_decision"' not in line or not line.endswith(b"\n"):
            continue
        record: dict[str, Any] = orjson.loads(line)  # the report read every line already
        raw = record.get("raw_decision")
        decisions = raw.get("decisions") if isinstance(raw, dict) else None
        out[str(record.get("decision_id"))] = {
            str(d.get("ticker")): (
                str(d.get("action")),
                _percent(d.get("position_pct")),
                str(d.get("reasoning", "")),
            )
            for d in (decisions if isinstance(decisions, list) else ())
            if isinstance(d, dict)  # the agent's answer as it came: any shape is possible
        }
    return out


def _percent(fraction: object) -> float:
    """A ticker decision's position as a percentage; 0 when it holds no finite number."""
    if type(fraction) not in (int, float):
        return 0.0
    percent = round(float(fraction) * 100, 2)  # type: ignore[arg-type]
    return percent if math.isfinite(percent) else 0.0


def _why(a: _Choice | None, b: _Choice | None) -> str:
    text = " ".join(c[2] for c in (a, b) if c is not None)
    named = [rule for rule, mark in _RULES if mark in text]
    return " + ".join(named) or "state"


def _show(choice: _Choice | None) -> str:
    return "-" if choice is None else f"{choice[0]} {choice[1]:g}%"


def decision_change_lines(a_dir: Path, b_dir: Path) -> list[str]:
    a = _choices(a_dir / "logs" / "decisions.jsonl")
    b = _choices(b_dir / "logs" / "decisions.jsonl")
    paired = [d for d in a if d in b]
    if not paired:
        return []
    reasons: Counter[str] = Counter()
    listed: list[str] = []
    changed = 0
    for decision_id in paired:
        tickers = sorted(set(a[decision_id]) | set(b[decision_id]))
        differ = False
        for ticker in tickers:
            one, two = a[decision_id].get(ticker), b[decision_id].get(ticker)
            if (one and one[:2]) == (two and two[:2]):
                continue
            differ = True
            why = _why(one, two)
            reasons[why] += 1
            if len(listed) < LISTED:
                listed.append(f"  {decision_id} {ticker}: a {_show(one)}, b {_show(two)} ({why})")
        changed += differ
    unpaired = len(a) + len(b) - 2 * len(paired)
    by_rule = ", ".join(f"{why} {n}" for why, n in reasons.most_common())
    head = (
        f"decisions decided differently: {changed} of {len(paired)} paired"
        f" ({sum(reasons.values())} ticker decisions: {by_rule or 'none'})"
    )
    if unpaired:
        head += f"; {unpaired} decision(s) in one run only"
    return [head, *listed] if changed else [head]
