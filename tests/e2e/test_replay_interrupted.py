"""Ctrl-C in the middle of ``vigil replay``: the loops stop in order, every journal line is whole,
the state files parse, and the run folder's report covers the part replayed (exit code 1)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes.daemon import REPO, daemon_env

from broker.paper_store import parse_document
from state.models import RunnerState

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

DECISIONS_BEFORE_INTERRUPT = 150  # about half a simulated day of the ten asked
POLL_SECS = 0.2  # polling files another process writes


def _decision_lines(run_dir: Path) -> int:
    path = run_dir / "logs" / "decisions.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_an_interrupted_replay_keeps_a_whole_run_folder_and_reports_it(tmp_path: Path) -> None:
    config = tmp_path / "vigil.toml"
    config.write_text("# empty: the defaults\n")
    run_dir, log = tmp_path / "run", tmp_path / "replay.log"
    env = daemon_env(tmp_path / "unused_state", VIGIL_CONFIG_FILE=str(config))
    with log.open("wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "runner.cli", "replay", "--from", "2025-03-01",
             "--to", "2025-03-10", "--out", str(run_dir)],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=log_file,
        )  # fmt: skip
        try:
            while _decision_lines(run_dir) < DECISIONS_BEFORE_INTERRUPT:
                assert proc.poll() is None, log.read_text()
                time.sleep(POLL_SECS)
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = log.read_text()
    assert code == 1, text  # stopped before --to
    assert "stopped early: replayed" in text
    assert "Traceback" not in text, text

    lines = (run_dir / "logs" / "decisions.jsonl").read_bytes().splitlines()
    records = [json.loads(line) for line in lines]  # a torn line would raise here
    assert len(records) >= DECISIONS_BEFORE_INTERRUPT
    RunnerState.model_validate_json((run_dir / "runner_state.json").read_bytes())
    parse_document((run_dir / "paper_broker.json").read_bytes())
    replayed = json.loads((run_dir / "replay.json").read_text())
    assert replayed["finished"] is False
    assert replayed["decisions"] == sum(1 for r in records if r.get("type") == "decision")
    report = json.loads((run_dir / "report.json").read_text())
    last_ms = max(int(r["at_ms"]) for r in records)
    assert report["equity"][-1]["at_ms"] >= last_ms  # the report covers what was replayed
    assert (run_dir / "report.html").is_file()
    # what was asked, in replay.json and back in the report
    assert replayed["data_dir"] == str((REPO / "data").resolve())
    assert len(replayed["config_digest"]) == 16
    asked = report["parameters"]
    assert asked["source"] == "replay.json" and asked["unavailable"] == {}
    assert asked["config_digest"] == replayed["config_digest"]
    assert (asked["decider"], asked["memory"], asked["seed"]) == ("fallback", True, 42)
