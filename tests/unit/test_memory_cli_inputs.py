"""``vigil memory`` refuses arguments it cannot use with exit 2 and a reason, writing nothing: an
import file that is not a regular UTF-8 file of JSON objects was a traceback (a FIFO a hang), a
``--limit`` past SQLite's integers a traceback and -1 listed everything, and a ``--ttl-days`` of
nan, 0 or less was stored, the insight then kept for ever or never retrieved; ``--ticker BTC`` (or
``btc/usdt``) stored a lesson no decision on BTC/USDT is ever sent, and ``memory list --ticker btc``
listed nothing, both exiting 0 without a word: a ticker is BASE/USDT in capitals, as in the config.
So was ``--regime bogus``: a regime is one a decision is made in (``regime.labels``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fakes.fifo import outcome_beside_fifo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

from runner.cli import EXIT_USAGE, main

TEXT = "Never add to ETH right after a funding spike."


def _code(*args: str) -> int:
    try:
        return main(list(args))
    except SystemExit as exc:  # argparse's refusal
        return int(exc.code or 0)


@pytest.mark.parametrize("days", ["nan", "inf", "0", "-1", "x"])
def test_a_ttl_that_is_not_days_above_0_is_refused(tmp_path: Path, days: str) -> None:
    state = str(tmp_path / "state")
    assert _code("--state-dir", state, "memory", "add", TEXT, "--ttl-days", days) == EXIT_USAGE
    assert _code("--state-dir", state, "memory", "add", TEXT, "--ttl-days", "0.5") == 0


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(limit=st.one_of(st.integers(max_value=0), st.integers(min_value=100_001)))
def test_a_limit_out_of_range_is_refused(tmp_path: Path, limit: int) -> None:
    for command in (["list"], ["search", "funding"]):
        code = _code("--state-dir", str(tmp_path), "memory", *command, "--limit", str(limit))
        assert code == EXIT_USAGE


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "not a regular file"),  # a directory
        (b"\xff\n", "can't decode byte 0xff"),
        (b"[1]\n", ":1: not a JSON object"),
        (b"5\n", ":1: not a JSON object"),
        (b"{oops\n", ":1: "),
        (b"\n{" + b" " * (1 << 20) + b"}\n", ":2: a line over 1,048,576 bytes is no exported row"),
    ],
)
def test_an_import_file_it_cannot_read_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None, says: str
) -> None:
    path = tmp_path / "export.jsonl"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    state = str(tmp_path / "state")
    assert _code("--state-dir", state, "memory", "import", str(path)) == EXIT_USAGE
    err = capsys.readouterr().err
    assert str(path) in err and says in err


def test_a_fifo_to_import_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "export.jsonl"
    os.mkfifo(fifo)
    args = ("--state-dir", str(tmp_path / "state"), "memory", "import", str(fifo))
    code = outcome_beside_fifo(lambda: _code(*args), fifo)
    assert code == EXIT_USAGE


def _exported_insight(**changes: object) -> bytes:
    import json

    from memory.embeddings import HashedNgramEmbedder
    from memory.model import Insight

    (embedding,) = HashedNgramEmbedder().embed_now([TEXT])
    insight = Insight(
        insight_id="i-imported",
        text=TEXT,
        kind="person",
        salience=1.0,
        author="person",
        summary_source="person",
        created_ms=1_740_000_000_000,
        embedding=embedding,
    )
    row = {"type": "insight", **json.loads(insight.model_dump_json()), **changes}
    return json.dumps(row).encode() + b"\n"


@pytest.mark.parametrize(
    "changes",
    [
        {"ttl_days": -5},
        {"ttl_days": 0},
        {"embedding": [1e39, 0.5]},
        {"situation_vector": [0.0] * 11 + [-1e39]},
    ],
    ids=["ttl -5", "ttl 0", "embedding past float32", "vector past float32"],
)
def test_an_imported_insight_it_cannot_use_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, object]
) -> None:
    """A ttl of 0 or less was stored, the insight never retrieved (as `add --ttl-days 0` was);
    a vector value past float32's range was stored as infinity, so its cosine, and the text
    search's score of it, was NaN (`vigil memory search` showed score +nan)."""
    path = tmp_path / "export.jsonl"
    path.write_bytes(_exported_insight(**changes))
    state = tmp_path / "state"
    assert _code("--state-dir", str(state), "memory", "import", str(path)) == EXIT_USAGE
    assert f"{path}:1: " in capsys.readouterr().err
    assert _code("--state-dir", str(state), "memory", "list") == 0
    assert "i-imported" not in capsys.readouterr().out


# --- --ticker and --regime ---------------------------------------------------------------------

_NOT_A_TICKER = "is not BASE/USDT in capitals, e.g. BTC/USDT"
_NOT_A_REGIME = (
    "is not a regime; one of low_volatility, medium_volatility, high_volatility, unknown"
)


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        *(
            ("--ticker", ticker, _NOT_A_TICKER)
            for ticker in [
                "BTC", "btc/usdt", "BTC/USD", "", "ÉTH/USDT", "BTC/USDT\nforged line", "X" * 5000
            ]
        ),
        *(
            ("--regime", regime, _NOT_A_REGIME)
            for regime in [
                "bogus", "HIGH_VOLATILITY", "trend\r", "", "ok \udcff", "high_volatility" * 500
            ]
        ),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", [["add", TEXT], ["list"], ["search", "funding"]])
def test_a_ticker_or_regime_no_decision_uses_is_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    flag: str,
    value: str,
    said: str,
) -> None:
    state = tmp_path / "state"
    assert _code("--state-dir", str(state), "memory", *command, flag, value) == EXIT_USAGE
    err = capsys.readouterr().err
    assert said in err and len(err) < 1000
    assert not state.exists()  # no store made, nothing stored


def test_a_lesson_for_a_ticker_is_listed_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = str(tmp_path / "state")
    assert _code("--state-dir", state, "memory", "add", TEXT, "--ticker", "BTC/USDT") == 0
    capsys.readouterr()
    assert _code("--state-dir", state, "memory", "list", "--ticker", "BTC/USDT") == 0
    assert TEXT in capsys.readouterr().out


@pytest.mark.parametrize(
    "regime", ["low_volatility", "medium_volatility", "high_volatility", "unknown"]
)
def test_a_lesson_for_a_regime_is_listed_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], regime: str
) -> None:
    state = str(tmp_path / "state")
    assert _code("--state-dir", state, "memory", "add", TEXT, "--regime", regime) == 0
    capsys.readouterr()
    assert _code("--state-dir", state, "memory", "list", "--regime", regime) == 0
    assert f"{regime} {TEXT}" in " ".join(capsys.readouterr().out.split())
