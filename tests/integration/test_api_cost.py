"""``/api/status``'s cost block on loopback (real uvicorn, aiohttp client): today, per day and per
model, from the journal through the one cost accounting the report reads; appended lines are
folded on the next call, a rotated journal is re-read, and the figures equal the report's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes.api_support import IdleDaemon, serve_api, write_state_dir

from agent.cost_accounting import MS_PER_DAY, cost_summary
from state.journal import encode_jsonl_record

DAY2_MS = 1_756_771_200_000  # 2025-09-02T00:00:00Z
HAIKU, SONNET = "claude-haiku-4-5", "claude-sonnet-4-6"


class ClockOnlyDaemon(IdleDaemon):
    """``api.ports.LiveDaemon`` whose clock is fixed: 'today' is a known day."""

    agent_enabled = True

    def __init__(self, now_ms: int) -> None:
        self._now_ms = now_ms

    def now_ms(self) -> int:
        return self._now_ms


def usage(model: str, inp: int, write: int, read: int, out: int, usd: float) -> dict[str, Any]:
    return {
        "model": model,
        "input_tokens": inp,
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
        "output_tokens": out,
        "cost_usd": usd,
    }


def decision(at_ms: int, trigger: str, decided_by: str, *tries: dict[str, Any]) -> dict[str, Any]:
    line: dict[str, Any] = {
        "type": "decision",
        "decision_id": f"d{at_ms}",
        "at_ms": at_ms,
        "trigger": [trigger],
        "decided_by": decided_by,
    }
    if tries:
        total = {k: sum(t[k] for t in tries) for k in tries[0] if k != "model"}
        line["usage"] = {**total, "model": "+".join(t["model"] for t in tries)}
        line["raw_decision"] = {"attempts": [{"usage": t} for t in tries]}
    return line


def review(at_ms: int, used: dict[str, Any] | None) -> dict[str, Any]:
    tries = [{"usage": used}] if used else []
    by = "claude" if used else "unchanged"
    return {"type": "review", "at_ms": at_ms, "tickers": ["SOL/USDT"], "decided_by": by,
            "usage": used, "attempts": tries}  # fmt: skip


def day_lines(day_ms: int) -> list[dict[str, Any]]:
    haiku = usage(HAIKU, 2000, 0, 3000, 400, 0.0045)
    sonnet = usage(SONNET, 1000, 2500, 0, 400, 0.024)
    return [
        decision(day_ms + 60_000, "candle_close:BTC/USDT:15m", "claude", haiku),
        decision(day_ms + 120_000, "agent_timer", "unchanged"),
        decision(day_ms + 180_000, "anomaly:SOL/USDT:z=3.1", "claude", sonnet),
        decision(day_ms + 240_000, "candle_close:ETH/USDT:1h", "claude", haiku, sonnet),
        review(day_ms + 300_000, haiku),
        review(day_ms + 480_000, None),
        {"type": "agent_failure", "at_ms": day_ms + 500_000, "kind": "overloaded", "detail": ""},
    ]


def append(path: Path, lines: list[dict[str, Any]]) -> None:
    with path.open("ab") as out:
        for line in lines:
            out.write(encode_jsonl_record(line))


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    write_state_dir(state, decisions=0)
    return state


async def test_cost_today_per_day_and_per_model_is_the_reports_accounting(
    state_dir: Path,
) -> None:
    journal = state_dir / "logs" / "decisions.jsonl"
    day1, day2 = day_lines(DAY2_MS - MS_PER_DAY), day_lines(DAY2_MS)
    append(journal, day1 + day2[:3])
    now_ms = DAY2_MS + 12 * 3_600_000
    async with serve_api(state_dir, daemon=ClockOnlyDaemon(now_ms)) as api:
        code, body = await api.get("/api/status")
        assert code == 200 and isinstance(body, dict)
        cost = body["cost"]
        assert cost["prices_as_of"] is None and cost["days_shown"] == 7
        assert [d["day"] for d in cost["days"]] == ["2025-09-01", "2025-09-02"]
        first = cost["days"][0]
        # the same figures the report computes from the same lines
        expected = cost_summary(day1, 1.0)
        assert first["total"] == expected.total.model_dump(mode="json")
        assert first["by_model"] == [r.model_dump(mode="json") for r in expected.by_model]
        assert first["by_layer"] == [r.model_dump(mode="json") for r in expected.by_layer]
        models = {r["name"]: r for r in first["by_model"]}
        assert (models[HAIKU]["calls"], models[SONNET]["calls"]) == (3, 2)
        assert models[HAIKU]["cache_read_tokens"] == 9000
        assert models[SONNET]["cache_write_tokens"] == 5000
        assert first["total"]["calls"] == 4 and first["total"]["decisions"] == 6
        assert first["total"]["cost_usd"] == pytest.approx(3 * 0.0045 + 2 * 0.024)
        today = cost["today"]
        assert today["day"] == "2025-09-02" and today["total"]["calls"] == 2
        assert today == cost["days"][1]

        # lines appended while it serves (one torn: not yet a line) are folded on the next call
        append(journal, day2[3:5])
        with journal.open("ab") as out:
            out.write(b'{"type":"review","at_ms":')
        _, body = await api.get("/api/status")
        assert isinstance(body, dict)
        assert body["cost"]["today"]["total"] == cost_summary(day2[:5], 1.0).total.model_dump(
            mode="json"
        )
        with journal.open("ab") as out:  # the writer finishes the torn line
            out.write(f'{DAY2_MS + 480_000},"decided_by":"unchanged"}}\n'.encode())
        _, body = await api.get("/api/status")
        assert isinstance(body, dict)
        assert body["cost"]["today"]["total"]["decisions"] == 6


async def test_a_rotated_journal_is_reread_and_days_before_the_window_are_not_shown(
    state_dir: Path,
) -> None:
    logs = state_dir / "logs"
    journal = logs / "decisions.jsonl"
    old = day_lines(DAY2_MS - 30 * MS_PER_DAY)
    append(logs / "decisions.20250804T000000Z.jsonl", old)  # closed a month ago: not shown
    day1, day2 = day_lines(DAY2_MS - MS_PER_DAY), day_lines(DAY2_MS)
    append(journal, day1)
    async with serve_api(state_dir, daemon=ClockOnlyDaemon(DAY2_MS + 3_600_000)) as api:
        _, before = await api.get("/api/status")
        journal.rename(logs / "decisions.20250902T000000Z.jsonl")  # rotation closes the file
        append(journal, day2)
        _, after = await api.get("/api/status")
    assert isinstance(before, dict) and isinstance(after, dict)
    assert [d["day"] for d in before["cost"]["days"]] == ["2025-09-01"]
    assert [d["day"] for d in after["cost"]["days"]] == ["2025-09-01", "2025-09-02"]
    assert after["cost"]["days"][0] == before["cost"]["days"][0]  # read once, not twice
    assert after["cost"]["today"]["total"] == cost_summary(day2, 1.0).total.model_dump(mode="json")


async def test_no_journal_is_a_day_without_calls(tmp_path: Path) -> None:
    state = tmp_path / "state"
    write_state_dir(state, decisions=0)
    (state / "logs" / "decisions.jsonl").unlink()
    async with serve_api(state, daemon=ClockOnlyDaemon(DAY2_MS)) as api:
        _, body = await api.get("/api/status")
    assert isinstance(body, dict)
    assert body["cost"]["days"] == [] and body["cost"]["today"]["total"]["calls"] == 0
