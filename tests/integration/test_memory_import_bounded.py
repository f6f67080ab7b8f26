"""``vigil memory import`` holds one line of its file at a time: it read the whole file, decoded
it and split it into lines before the first row, three copies of an export of any size (a file
of gigabytes, or a sparse one, could take the machine's memory). Measured in a fresh interpreter
(its peak resident size, which depends on what is held, not on the machine's speed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fakes.daemon import REPO, daemon_env

from memory.embeddings import HashedNgramEmbedder
from memory.model import Insight

_SCRIPT = """
import json, resource, sys
from runner.cli import main
code = main(["--state-dir", sys.argv[1], "memory", "import", sys.argv[2]])
print(json.dumps({"code": code, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""
PADDING_LINES = 256
PADDING_LINE_BYTES = 512 * 1024  # blank lines (skipped): 128 MiB of them
MIB = 1024


def _insight_line() -> bytes:
    text = "Funding spikes on ETH faded within the day."
    (embedding,) = HashedNgramEmbedder().embed_now([text])
    insight = Insight(
        insight_id="i-after-the-padding",
        text=text,
        kind="person",
        salience=1.0,
        author="person",
        summary_source="person",
        created_ms=1_740_000_000_000,
        embedding=embedding,
    )
    return json.dumps({"type": "insight", **json.loads(insight.model_dump_json())}).encode()


def _import(tmp_path: Path, name: str, content: bytes, padding_lines: int) -> dict[str, int]:
    path = tmp_path / f"{name}.jsonl"
    with path.open("wb") as out:
        for _ in range(padding_lines):
            out.write(b" " * (PADDING_LINE_BYTES - 1) + b"\n")
        out.write(content + b"\n")
    state = tmp_path / f"state-{name}"
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(state), str(path)],
        env=daemon_env(state),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, done.stderr[-2000:]
    assert "imported 0 trades, 1 insights" in done.stdout
    return result


def test_an_import_of_any_size_holds_one_line_at_a_time(tmp_path: Path) -> None:
    line = _insight_line()
    small = _import(tmp_path, "small", line, padding_lines=0)
    large = _import(tmp_path, "large", line, padding_lines=PADDING_LINES)
    # the file is 128 MiB; reading it whole held at least twice that
    assert large["peak_kib"] - small["peak_kib"] < 32 * MIB, (small, large)
