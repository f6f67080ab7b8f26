"""``vigil memory``: add, list, search, show, forget, export / import, stats on a state dir."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from memory.embeddings import HashedNgramEmbedder
from memory.model import Insight
from memory.sqlite_store import SqliteMemoryStore
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


def test_memory_search_measures_age_against_the_store_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replay's insights are dated by its simulated clock (2025): measured against wall time
    they are past the 180-day TTL and a search showed nothing. Ages are measured against the
    newest insight a run wrote, so the newest one is 0 days old and a 9-day-older one 9 days."""
    state = tmp_path / "state"
    march_10 = 1_741_564_800_000  # 2025-03-10T00:00Z
    day_ms = 86_400_000
    texts = (
        "[SOL] medium_volatility, RSI 71 entry, -4.2 % in 9 h: stop loss",
        "[SOL] high_volatility, RSI 35 entry, +3.1 % in 20 h: trailing stop",
    )
    embeddings = HashedNgramEmbedder().embed_now(list(texts))

    async def write() -> None:
        store = SqliteMemoryStore(state / "memory.db")
        for n, (text, embedding) in enumerate(zip(texts, embeddings, strict=True)):
            created = march_10 + n * 9 * day_ms
            await store.put_insight(
                Insight(
                    insight_id=Insight.make_id("reflection", created, "SOL/USDT", text),
                    text=text, kind="reflection", salience=0.5, author="rules",
                    summary_source="rules", created_ms=created, ticker="SOL/USDT",
                    regime="medium_volatility", embedding=embedding,
                )
            )  # fmt: skip
        await store.close()

    asyncio.run(write())
    code = main(["--state-dir", str(state), "memory", "search", "SOL stop loss RSI"])
    captured = capsys.readouterr()
    assert code == 0
    lines = captured.out.splitlines()
    assert len(lines) == 2, captured.out
    ages = sorted(line.split("age ")[1].split(" d)")[0] for line in lines)
    assert ages == ["0", "9"]
    assert "ages measured against 2025-03-19T00:00Z (the newest insight a run wrote)" in (
        captured.err
    )


@pytest.mark.parametrize(
    "args",
    [
        ["a lesson about the retest\x1b[2J of support"],
        ["a lesson about the retest of support\x00"],
    ],
)
def test_memory_add_refuses_control_characters_with_exit_2_and_stores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    """They reached `vigil memory list`'s one line per insight (and the terminal showing it)."""
    state = tmp_path / "state"
    assert main(["--state-dir", str(state), "memory", "add", *args]) == 2
    assert "control character U+00" in capsys.readouterr().err
    assert run(capsys, state, "list") == (0, "")


def test_memory_add_still_folds_line_breaks_and_tabs_of_the_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    assert run(capsys, state, "add", "a lesson about\n\tthe retest\r\nof support")[0] == 0
    assert run(capsys, state, "list")[1].rstrip().endswith("a lesson about the retest of support")


def test_memory_export_escapes_c1_controls_and_keeps_the_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model's words may hold U+0080..U+009F (U+009B is CSI: a terminal reads it as ESC [).
    orjson writes them raw, so `vigil memory export` piped to a terminal could clear or colour it;
    they are written as JSON escapes, and an import reads the very text back."""
    state = tmp_path / "state"
    text = "a lesson\x9b2J about the retest\x85 of support\x80"

    async def write() -> None:
        store = SqliteMemoryStore(state / "memory.db")
        created = 1_741_564_800_000
        await store.put_insight(
            Insight(
                insight_id=Insight.make_id("reflection", created, "SOL/USDT", text),
                text=text, kind="reflection", salience=0.5, author="rules",
                summary_source="rules", created_ms=created, ticker="SOL/USDT",
            )
        )  # fmt: skip
        await store.close()

    asyncio.run(write())
    code, out = run(capsys, state, "export")
    assert code == 0
    assert not any("\x80" <= ch <= "\x9f" for ch in out), repr(out)
    assert "\\u009b2J" in out
    assert [json.loads(line)["text"] for line in out.splitlines()] == [text]
    exported = tmp_path / "export.jsonl"
    exported.write_text(out)
    assert run(capsys, tmp_path / "other", "import", str(exported))[0] == 0
    again = run(capsys, tmp_path / "other", "export")[1]
    assert [json.loads(line)["text"] for line in again.splitlines()] == [text]
