"""``vigil prompt``: the exact request for the latest journaled snapshot, or an offline one built from
the bundled data; pure JSON out, no secret in it."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from fakes.claude_support import snapshot

from agent.claude_prompt import DECISION_SYSTEM_PROMPT
from agent.claude_schema import output_config
from agent.snapshot import MarketSnapshot
from agent.snapshot_walks import compact
from derivatives.fields import CONTEXT_FIELDS
from market.recorded import load_klines
from runner.config import Settings
from runner.prompt_cmd import (
    OFFLINE_WAKE_REASON,
    latest_journal_snapshot,
    render_prompt,
)

SECRET = "sk-ant-test-prompt-secret-0123456789"
# mid-way through a 15m candle, so the open candle is built from two closed 5m candles
OFFLINE_START = datetime(2025, 4, 7, 0, 10, tzinfo=UTC)


def _decision_line(decision_id: str, snap: MarketSnapshot | None) -> dict[str, Any]:
    at_ms = snap.at_ms if snap is not None else 0
    line: dict[str, Any] = {
        "type": "decision",
        "decision_id": decision_id,
        "at_ms": at_ms,
        "trigger": ["t"],
    }
    if snap is not None:
        line["snapshot"] = snap.model_dump(mode="json")
    else:
        line["error"] = "RuntimeError: broke before the snapshot"
    return line


def _write_journal(state_dir: Path, lines: list[dict[str, Any]], torn_tail: bytes = b"") -> None:
    logs = state_dir / "logs"
    logs.mkdir(parents=True)
    body = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    (logs / "decisions.jsonl").write_bytes(body + torn_tail)


def _user_snapshot(request: dict[str, Any]) -> dict[str, Any]:
    content = request["messages"][0]["content"]
    if isinstance(content, list):  # assembled: memory and context blocks first, the snapshot last
        content = content[-1]["text"]
    body, after = content.split("<snapshot>\n", 1)[1].split("\n</snapshot>", 1)
    parsed: dict[str, Any] = json.loads(body)
    # the memory note is sent apart, fenced as model-written data: put it back for the checks
    fenced = after.split("<model_notes", 1)[1].split(">\n", 1)[1].split("\n</model_notes>")[0]
    parsed["agent_memory"] = json.loads(fenced)
    return parsed


def _check_request_shape(text: str) -> dict[str, Any]:
    request: dict[str, Any] = json.loads(text)  # stdout is pure JSON
    assert text == json.dumps(request, indent=2, sort_keys=True, ensure_ascii=False)
    assert request["system"] == [
        {
            "type": "text",
            "text": DECISION_SYSTEM_PROMPT,
            "cache_control": {"type": "ephemeral", "ttl": "1h"},
        }
    ]
    assert request["output_config"] == output_config()
    assert request["output_config"]["format"]["type"] == "json_schema"
    assert [m["role"] for m in request["messages"]] == ["user"]
    return request


def test_uses_the_last_complete_decision_of_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    first = snapshot(memory="first decision")
    second = snapshot(memory="second decision").model_copy(update={"at_ms": first.at_ms + 900_000})
    _write_journal(
        tmp_path,
        [
            _decision_line("d1", first),
            _decision_line("d2", second),
            {"type": "agent_failure", "at_ms": second.at_ms + 1, "kind": "overloaded"},
            _decision_line("d3", None),  # failed before its snapshot: skipped
        ],
        torn_tail=b'{"type":"decision","decision_id":"d4","snapshot":{"at_',  # being written
    )
    settings = Settings(state_dir=tmp_path)
    assert settings.anthropic_api_key is not None  # the key is configured, and still never shown
    notes: list[str] = []

    text = render_prompt(settings, note=notes.append)

    request = _check_request_shape(text)
    # the prompt sends the journaled snapshot compacted (agent.snapshot_walks.compact)
    assert _user_snapshot(request) == compact(json.loads(second.to_json_bytes()))
    assert request["model"] == settings.agent.model
    assert request["max_tokens"] == settings.agent.max_tokens
    assert len(notes) == 1 and "d2" in notes[0]
    assert SECRET not in text and SECRET not in notes[0]


def test_latest_journal_snapshot_is_none_without_a_usable_decision(tmp_path: Path) -> None:
    assert latest_journal_snapshot(tmp_path / "missing.jsonl") is None
    _write_journal(
        tmp_path,
        [{"type": "agent_failure", "at_ms": 1, "kind": "overloaded"}, _decision_line("d1", None)],
    )
    assert latest_journal_snapshot(tmp_path / "logs" / "decisions.jsonl") is None


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, str, list[str]]:
    """One offline render (it fits the regime models, a few seconds) shared by the tests below,
    for a state dir not made yet (a fresh clone before its first run, or a mistyped path)."""
    settings = Settings(
        state_dir=tmp_path_factory.mktemp("empty-state") / "not-made-yet",
        sim={"start": OFFLINE_START},
        anthropic_api_key=SECRET,
    )
    notes: list[str] = []
    return settings, render_prompt(settings, note=notes.append), notes


def test_without_state_the_snapshot_is_built_from_the_bundled_data(
    offline: tuple[Settings, str, list[str]],
) -> None:
    settings, text, notes = offline
    request = _check_request_shape(text)
    snap = _user_snapshot(request)
    at_ms = int(OFFLINE_START.timestamp() * 1000)
    assert snap["at_ms"] == at_ms
    assert set(snap["tickers"]) == set(settings.market.tickers)
    for ticker, view in snap["tickers"].items():
        five = load_klines(ticker, "5m")
        recorded_close = float(five["close"].loc[at_ms - 300_000])  # the 5m candle ending now
        # the prompt sends 6 significant digits (agent.snapshot_walks.compact)
        assert view["price"] == pytest.approx(recorded_close, rel=1e-5)
        assert view["volume_24h"] is not None and view["change_1h_pct"] is not None
    assert snap["btc_price"] == snap["tickers"]["BTC/USDT"]["price"]
    # a fresh paper account and no runner state
    assert snap["open_positions"] == []
    assert snap["portfolio_value"] == snap["cash"] == settings.broker.starting_cash_usd
    assert snap["agent_memory"] == ""
    assert snap["gate_wake_reasons"] == [OFFLINE_WAKE_REASON]
    # regimes fitted on the 4h history by the daemon's own warm-up; the recorded context (funding,
    # Fear & Greed) polled once as on start; what the recording lacks is null with its reason
    assert snap["regime"] is not None
    assert set(snap["regime"]["crypto"]) == set(settings.market.tickers)
    assert set(snap["funding_rates"]) == set(settings.market.tickers)
    assert snap["fear_greed"] is not None
    for field in CONTEXT_FIELDS:  # a null with its reason is left out of the prompt
        assert snap.get(field) is not None or snap["unavailable"][field]
    missing, built = notes
    assert missing.startswith(f"vigil prompt: no state dir at {settings.state_dir}: nothing is")
    assert "bundled data" in built and "2025-04-07T00:10:00Z" in built
    assert not settings.state_dir.exists()  # a read-only command: nothing made there


def test_no_secret_anywhere_in_the_output(offline: tuple[Settings, str, list[str]]) -> None:
    settings, text, notes = offline
    assert settings.anthropic_api_key is not None
    assert settings.anthropic_api_key.get_secret_value() == SECRET
    assert SECRET not in text
    assert all(SECRET not in note for note in notes)


def test_the_note_goes_to_stderr_and_stdout_stays_pure_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_journal(tmp_path, [_decision_line("d7", snapshot())])
    print(render_prompt(Settings(state_dir=tmp_path)))
    out, err = capsys.readouterr()
    json.loads(out)
    assert "d7" in err and "d7" not in out


def test_parts_show_sizes_tiers_and_the_project_memory(tmp_path: Path) -> None:
    snap = snapshot()
    _write_journal(tmp_path, [_decision_line("d1", snap)])
    (tmp_path / "MEMORY.md").write_text("# MEMORY\nBTC weekends are thin.\n")
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "sol.md").write_text('---\ntickers: ["SOL/*"]\n---\nSOL: half size.\n')
    settings = Settings(state_dir=tmp_path)
    text = render_prompt(settings, parts=True, note=lambda _line: None)
    assert text.startswith("prompt ")
    assert "tiers loaded: project, session" in text
    assert "BTC weekends are thin." in text and "Rule sol (SOL/USDT): SOL: half size." in text
    request = json.loads(render_prompt(settings, note=lambda _line: None))
    assert request["system"][0]["text"] == DECISION_SYSTEM_PROMPT
    assert "SOL: half size." in request["system"][1]["text"]
    assert not (tmp_path / "analysts.db").exists()  # read only


def test_the_latest_snapshot_is_found_in_a_rotated_segment(tmp_path: Path) -> None:
    older = snapshot(memory="older")
    newer = snapshot(memory="newer").model_copy(update={"at_ms": older.at_ms + 900_000})
    logs = tmp_path / "logs"
    logs.mkdir()
    segment = logs / "decisions.20250301T000000Z.jsonl.gz"
    lines = [_decision_line("d1", older), _decision_line("d2", newer)]
    segment.write_bytes(gzip.compress(b"".join(orjson.dumps(x) + b"\n" for x in lines)))
    live = logs / "decisions.jsonl"
    live.write_bytes(b"")  # just rotated: the live file has no decision yet
    found = latest_journal_snapshot(live)
    assert found is not None
    assert (found.decision_id, found.path) == ("d2", segment)
    live.write_bytes(orjson.dumps(_decision_line("d3", newer)) + b"\n")
    found = latest_journal_snapshot(live)
    assert found is not None and (found.decision_id, found.path) == ("d3", live)


def test_an_older_snapshot_is_found_behind_many_decisions_of_another_schema(
    tmp_path: Path,
) -> None:
    """More decision lines of another schema than the reader keeps: the segment is read again."""
    wanted = snapshot(memory="of this schema")
    other = _decision_line("other", wanted)
    other["snapshot"] = {"at_ms": "not this schema"}
    _write_journal(tmp_path, [_decision_line("d-old", wanted)] + [other] * 20)
    found = latest_journal_snapshot(tmp_path / "logs" / "decisions.jsonl")
    assert found is not None and found.decision_id == "d-old"
