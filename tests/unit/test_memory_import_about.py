"""``vigil memory import`` takes a lesson's ticker and regime as ``vigil memory add`` does:
``--regime bogus`` and ``--ticker sol/usdt`` were refused by ``add`` (exit 2) and imported from a
file, lessons no decision is ever sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_memory_insight_times import GOOD_MS, _row

from runner.cli import main


@pytest.mark.parametrize(
    ("about", "said"),
    [
        ({"regime": "bogus"}, "regime 'bogus' is not a regime; one of"),
        ({"ticker": "sol/usdt"}, "ticker 'sol/usdt' is not BASE/USDT in capitals"),
        ({"ticker": "SOL"}, "ticker 'SOL' is not BASE/USDT"),
    ],
)
def test_a_lesson_about_what_no_decision_is_sent_is_refused_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], about: dict[str, str], said: str
) -> None:
    good = _row(GOOD_MS, "SOL: stops under the 4h low saved the long")
    odd = {**_row(GOOD_MS, "SOL: a lesson about something else"), **about}
    (tmp_path / "in.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(odd) + "\n")
    state = tmp_path / "state"
    assert main(["--state-dir", str(state), "memory", "import", str(tmp_path / "in.jsonl")]) == 2
    assert f"in.jsonl:2: {said}" in capsys.readouterr().err


def test_a_lesson_about_a_configured_ticker_and_regime_is_imported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = {**_row(GOOD_MS, "SOL: stops under the 4h low saved the long")}
    row.update(ticker="SOL/USDT", regime="high_volatility")
    (tmp_path / "in.jsonl").write_text(json.dumps(row) + "\n")
    state = tmp_path / "state"
    assert main(["--state-dir", str(state), "memory", "import", str(tmp_path / "in.jsonl")]) == 0
    assert "imported 0 trades, 1 insights" in capsys.readouterr().out
