"""A loop that fails during a replay is restarted, as in the daemon, but the replay does not pass:
its figures are not the daemon's (a market loop that is down publishes no ticks). ``vigil replay``
says so and exits 1, ``replay.json`` keeps which loop failed, and a sweep records the run as failed
and redoes it when resumed."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from replay_support import default_settings, replay_options

from derivatives.monitor import DerivativesMonitor
from runner.replay.build import replay_settings
from runner.replay.command import replay_main
from runner.sweep.worker import is_done

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def test_a_loop_that_fails_once_fails_the_replay_and_says_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = default_settings(tmp_path)
    options = replay_options(tmp_path / "run", "2025-03-03", 1, tickers=("BTC/USDT",))
    real_run = DerivativesMonitor.run
    calls: list[int] = []

    async def fails_the_first_time(self: DerivativesMonitor) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("planted fault")
        await real_run(self)

    monkeypatch.setattr(DerivativesMonitor, "run", fails_the_first_time)
    stream = io.StringIO()

    code = replay_main(replay_settings(settings, options), options, stream=stream)

    text = stream.getvalue()
    assert code == 1, text
    assert "replayed 1.0 days" in text and "stopped early" not in text  # it reached its end
    assert (
        "vigil replay: not the daemon's run: loop derivatives failed 1 time(s), "
        "last: RuntimeError: planted fault" in text
    )
    assert len(calls) == 2  # restarted, as the daemon would
    facts = json.loads((options.out_dir / "replay.json").read_text())
    assert facts["finished"] is True
    assert facts["loop_failures"] == {
        "derivatives": {"restarts": 1, "last_error": "RuntimeError: planted fault"}
    }
    assert (options.out_dir / "report.json").is_file()
    assert not is_done(options.out_dir)  # a sweep redoes it


def test_a_replay_whose_loops_stay_up_passes(tmp_path: Path) -> None:
    settings = default_settings(tmp_path)
    options = replay_options(tmp_path / "run", "2025-03-03", 1, tickers=("BTC/USDT",))
    stream = io.StringIO()

    assert replay_main(replay_settings(settings, options), options, stream=stream) == 0, (
        stream.getvalue()
    )
    assert "not the daemon's run" not in stream.getvalue()
    facts = json.loads((options.out_dir / "replay.json").read_text())
    assert facts["loop_failures"] == {}
    assert is_done(options.out_dir)
