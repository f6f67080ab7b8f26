"""Files vigil writes for itself and reads back (a journal's last lines, the heartbeat, the API's
endpoint file, a sweep run's replay.json / report.json / failed.json) may be cut, overwritten or
edited by a person. Past json's own limits (a number of 5,000 digits, nesting 5,000 deep) they
raised what the readers did not catch: a start-up, ``vigil health`` or a sweep's report died with
a traceback. Each now reads through ``core.jsonread`` and takes such a file as unreadable."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from fakes.fifo import outcome_beside_fifo
from test_sweep_grid_report import fake_run

from api.server import ENDPOINT_FILE_NAME, read_endpoint
from runner.heartbeat import check_health
from runner.sim_start import sim_start_ms
from runner.sweep.worker import is_done
from sim.feed import SimFeed

MARCH_1 = 1_740_787_200_000  # 2025-03-01 00:00 UTC

HOSTILE = [
    b"[" * 5_000,  # past the recursion limit, inside a journal tail
    b'{"at_ms": ' + b"1" * 5000 + b"}",
    b"\xff\xfe not UTF-8",
    b"[1, 2, 3]",  # JSON, but not an object
    b"",
]


@pytest.mark.parametrize("body", HOSTILE)
def test_a_hostile_last_journal_line_is_skipped_at_a_sim_start(tmp_path: Path, body: bytes) -> None:
    (tmp_path / "logs").mkdir()
    decisions = tmp_path / "logs" / "decisions.jsonl"
    good = json.dumps({"type": "decision", "at_ms": MARCH_1 + 3_600_000}).encode()
    decisions.write_bytes(good + b"\n" + body + b"\n")
    started = sim_start_ms(
        MARCH_1, tmp_path / "runner_state.json", decisions, SimFeed(("BTC/USDT",))
    )
    assert started == MARCH_1 + 3_600_000


@pytest.mark.parametrize("body", HOSTILE)
def test_a_hostile_heartbeat_is_no_beat(tmp_path: Path, body: bytes) -> None:
    heartbeat = tmp_path / "heartbeat"
    heartbeat.write_bytes(body)
    status = check_health(heartbeat, 60.0, time.time())
    assert not status.healthy and "is not a heartbeat" in status.reason


@pytest.mark.parametrize("body", HOSTILE)
def test_a_hostile_endpoint_file_is_no_endpoint(tmp_path: Path, body: bytes) -> None:
    (tmp_path / ENDPOINT_FILE_NAME).write_bytes(body)
    assert read_endpoint(tmp_path) is None


@pytest.mark.parametrize("which", ["replay.json", "report.json"])
@pytest.mark.parametrize("body", HOSTILE)
def test_a_sweep_run_with_a_hostile_record_is_not_done(
    tmp_path: Path, which: str, body: bytes
) -> None:
    run = Path(fake_run(tmp_path, "run", 2.0, 4.0))  # a report of a run's shape
    (run / "replay.json").write_text(json.dumps({"finished": True}))
    assert is_done(run)
    (run / which).write_bytes(body)
    assert not is_done(run)


@pytest.mark.parametrize("which", ["replay.json", "report.json"])
def test_a_sweep_run_with_a_fifo_for_a_record_is_not_done(tmp_path: Path, which: str) -> None:
    """``read_bytes`` blocked on the FIFO until someone wrote to it: the sweep's resume hung."""
    run = Path(fake_run(tmp_path, "run", 2.0, 4.0))
    (run / "replay.json").write_text(json.dumps({"finished": True}))
    (run / which).unlink()
    os.mkfifo(run / which)
    assert outcome_beside_fifo(lambda: is_done(run), run / which) is False
