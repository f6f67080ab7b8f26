"""`vigil prompt` over a state dir holding what a person, a model or a mistake left there: it
prints what would be sent, never blocks, and never drives the terminal it prints to."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from fakes.claude_support import snapshot
from fakes.fifo import outcome_beside_fifo

from core.clock import VirtualClock
from memory.session_store import SessionStore, session_key
from runner.cli import main

#: ESC, CSI (U+009B: ESC [ to a terminal that takes C1 codes) and NUL
HOSTILE = "watch\x1b[2J the \x9b2J weekend now\x00"


def _state_dir(tmp_path: Path, notes: str) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir(parents=True)
    snap = snapshot()
    line = {
        "type": "decision",
        "decision_id": "d1",
        "at_ms": snap.at_ms,
        "trigger": ["t"],
        "snapshot": snap.model_dump(mode="json"),
    }
    (logs / "decisions.jsonl").write_bytes(orjson.dumps(line) + b"\n")
    (tmp_path / "MEMORY.md").write_text(f"# MEMORY\n{notes}\n", encoding="utf-8")
    return tmp_path


def _prompt(capsys: Any, state: Path, *extra: str) -> str:
    assert main(["--state-dir", str(state), "prompt", *extra]) == 0
    out: str = capsys.readouterr().out
    return out


def _drives_a_terminal(text: str) -> list[str]:
    return [ch for ch in text if (ch < " " and ch not in "\n\t") or "\x7f" <= ch <= "\x9f"]


def test_the_json_keeps_the_notes_text_and_escapes_every_control_character(
    tmp_path: Path, capsys: Any
) -> None:
    """orjson escapes U+0000..U+001F but writes U+0080..U+009F raw: a CSI in MEMORY.md (or a
    model's reasoning in its ``[auto]`` line) reached the terminal `vigil prompt` prints to."""
    out = _prompt(capsys, _state_dir(tmp_path, HOSTILE))
    assert not _drives_a_terminal(out), repr(_drives_a_terminal(out))
    blocks = json.loads(out)["messages"][0]["content"]
    assert any(HOSTILE in block["text"] for block in blocks)  # the very text is sent


def test_the_parts_print_control_characters_escaped(tmp_path: Path, capsys: Any) -> None:
    """``--parts`` printed the tiers' texts as they are: ESC [2J cleared the person's screen."""
    out = _prompt(capsys, _state_dir(tmp_path, HOSTILE), "--parts")
    assert not _drives_a_terminal(out), repr(_drives_a_terminal(out))
    assert "watch\\x1b[2J the \\x9b2J weekend now\\x00" in out


@pytest.mark.parametrize("what", ["fifo", "folder"])
def test_runner_state_that_is_not_a_file_leaves_out_the_persons_notes_without_blocking(
    tmp_path: Path, capsys: Any, what: str
) -> None:
    """``read_bytes`` of a FIFO at runner_state.json blocked until someone wrote to it."""
    state = _state_dir(tmp_path, "weekends are thin")
    path = state / "runner_state.json"
    if what == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    code = outcome_beside_fifo(lambda: main(["--state-dir", str(state), "prompt", "--parts"]), path)
    assert code == 0
    out = capsys.readouterr().out
    assert "weekends are thin" in out


def _journal_at(state: Path, what: str) -> Path:
    logs = state / "logs"
    logs.mkdir(parents=True)
    if what == "folder":
        path = logs / "decisions.jsonl"
        path.mkdir()
    elif what == "fifo":
        path = logs / "decisions.jsonl"
        os.mkfifo(path)
    else:  # a gzipped segment cut short (a copy that stopped, a full disk at rotation)
        path = logs / "decisions.20250102T000000Z.jsonl.gz"
        path.write_bytes(gzip.compress(b'{"type": "decision"}\n' * 100)[:40])
    return path


@pytest.mark.parametrize("what", ["folder", "fifo", "cut gzip"])
def test_a_journal_segment_that_cannot_be_read_is_named_not_a_traceback_or_a_hang(
    tmp_path: Path, capsys: Any, what: str
) -> None:
    """A folder or a cut-short gzipped segment ended `vigil prompt` in an UnreadableSegmentError
    traceback; a FIFO in place of decisions.jsonl blocked its open until someone wrote to it."""
    path = _journal_at(tmp_path, what)

    def prompt() -> object:
        try:
            return main(["--state-dir", str(tmp_path), "prompt"])
        except SystemExit as exc:
            return exc

    exited = outcome_beside_fifo(prompt, path if what == "fifo" else tmp_path / "fifo")
    assert isinstance(exited, SystemExit), exited
    assert str(path) in str(exited.code) and "cannot be read" in str(exited.code)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("later_ms", [2 * 86_400_000, 10**17 - 1_741_564_800_000])
def test_vigil_prompt_leaves_the_session_files_as_they_are(
    tmp_path: Path, capsys: Any, later_ms: int
) -> None:
    """`vigil prompt` reads the session tier at the snapshot's instant, and reading evicted: an
    entry expired by then, or a file it could not read, was deleted from the state dir by a
    command that changes nothing. A journaled snapshot dated far ahead (a damaged line) would
    have deleted every entry, the open positions' theses too."""
    snap = snapshot()
    written = SessionStore(tmp_path / "sessions", VirtualClock(epoch_ms=snap.at_ms))
    written.set(session_key("BTC/USDT", "decision"), "BTC: hold", ttl_secs=86_400)
    (tmp_path / "sessions" / "ticker__btc_usdt__review.json").write_bytes(b'{"torn')
    before = sorted(p.name for p in (tmp_path / "sessions").iterdir())
    logs = tmp_path / "logs"
    logs.mkdir()
    dumped = snap.model_dump(mode="json")
    dumped["at_ms"] = snap.at_ms + later_ms
    line = {"type": "decision", "decision_id": "d1", "at_ms": 1, "trigger": ["t"]}
    (logs / "decisions.jsonl").write_bytes(orjson.dumps({**line, "snapshot": dumped}) + b"\n")
    assert main(["--state-dir", str(tmp_path), "prompt", "--parts"]) == 0
    assert "snapshot" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "sessions").iterdir()) == before
