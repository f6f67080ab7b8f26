"""``vigil memory``: add, list, search, show, forget, export / import, stats on a state dir."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.cli import main


def run(capsys: pytest.CaptureFixture[str], state: Path, *args: str) -> tuple[int, str]:
    code = main(["--state-dir", str(state), "memory", *args])
    return code, capsys.readouterr().out


def test_memory_cli_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    code, out = run(
        capsys,
        state,
        "add",
        "Never add to ETH right after a funding spike.",
        "--ticker",
        "ETH/USDT",
    )
    assert code == 0
    insight_id = out.strip()
    run(
        capsys,
        state,
        "add",
        "Trailing stops on SOL work best in high volatility.",
        "--ticker",
        "SOL/USDT",
    )
    assert run(capsys, state, "add", "short")[0] == 2  # under min_text_chars
    code, out = run(capsys, state, "list", "--ticker", "ETH/USDT")
    assert insight_id in out and "SOL" not in out
    assert run(capsys, state, "list", "--kind", "person")[1].count("\n") == 2
    assert run(capsys, state, "list", "--kind", "debate") == (0, "")
    code, out = run(capsys, state, "search", "funding spike on ETH")
    assert out.splitlines()[0].startswith(insight_id)
    code, out = run(capsys, state, "show", insight_id)
    assert json.loads(out)["salience"] == 1.0 and json.loads(out)["author"] == "person"
    run(capsys, state, "export")
    exported = tmp_path / "export.jsonl"
    exported.write_text(run(capsys, state, "export")[1])
    assert run(capsys, tmp_path / "other", "import", str(exported))[1].startswith(
        "imported 0 trades, 2 insights"
    )
    assert run(capsys, tmp_path / "other", "import", str(exported))[1].startswith(
        "imported 0 trades, 0 insights"
    )
    assert "MERGE (i:Insight" in run(capsys, state, "export", "--format", "cypher")[1]
    assert run(capsys, state, "forget", insight_id)[0] == 0
    assert run(capsys, state, "show", insight_id)[0] == 1
    stats = json.loads(run(capsys, state, "stats")[1])
    assert stats["counts"]["insights"] == 1 and stats["store"] == "sqlite"
